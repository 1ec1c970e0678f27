// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// The exact int8 matmul of CPUs without VNNI (runtime/ExactInt8Matmul.h): oneDNN's packed layout is
// the one the kernel reads, and every result is the exact integer sum scaled in f32, also where
// oneDNN's non-VNNI kernels would saturate a pair of products in 16 bits.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include <dnnl.hpp>

#include "../../runtime/ExactInt8Matmul.h"
#include "../../runtime/RowKernels.h"

namespace executorch::backends::onednn {
namespace {

struct Problem {
  ExactInt8MatmulShape shape;
  std::vector<uint8_t> src;    // [rows, k]
  std::vector<int8_t> weights; // [k, n], plain
  std::vector<int8_t> packed;  // BA16a16b2a
  std::vector<float> scales;   // [n]
  std::vector<float> bias;     // [n]
};

std::vector<int8_t> packed_by_onednn(const std::vector<int8_t>& weights, size_t k, size_t n) {
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const dnnl::memory::dims dims{static_cast<int64_t>(k), static_cast<int64_t>(n)};
  const dnnl::memory::desc plain(dims, dnnl::memory::data_type::s8, dnnl::memory::format_tag::ab);
  const dnnl::memory::desc blocked(dims, dnnl::memory::data_type::s8, dnnl::memory::format_tag::BA16a16b2a);
  std::vector<int8_t> packed(blocked.get_size());
  dnnl::memory from(plain, engine, const_cast<int8_t*>(weights.data()));
  dnnl::memory to(blocked, engine, packed.data());
  dnnl::reorder(from, to).execute(stream, from, to);
  stream.wait();
  return packed;
}

// `extreme`: every src at the end of its range away from the zero point and weights alternating
// 127 / -128 by pairs, so each pair of products adds to 2 * 255 * 127 or more in magnitude.
Problem make_problem(
    size_t rows, size_t k, size_t n, bool src_signed, int32_t zero_point, bool extreme, uint32_t seed) {
  std::mt19937 random(seed);
  Problem p;
  p.shape = {rows, k, n, src_signed, zero_point};
  p.src.resize(rows * k);
  p.weights.resize(k * n);
  std::uniform_int_distribution<int> byte(0, 255), weight(-128, 127);
  for (uint8_t& v : p.src) {
    v = extreme ? (src_signed ? 0x80 : 255) : static_cast<uint8_t>(byte(random));
  }
  for (size_t i = 0; i < p.weights.size(); ++i) {
    const size_t row = i / n;
    p.weights[i] = extreme ? static_cast<int8_t>(row % 4 < 2 ? -128 : 127) : static_cast<int8_t>(weight(random));
  }
  p.packed = packed_by_onednn(p.weights, k, n);
  std::uniform_real_distribution<float> scale(1e-4f, 1e-2f), offset(-1.0f, 1.0f);
  for (size_t c = 0; c < n; ++c) {
    p.scales.push_back(scale(random));
    p.bias.push_back(offset(random));
  }
  return p;
}

int64_t exact_sum(const Problem& p, size_t r, size_t c) {
  int64_t sum = 0;
  for (size_t k = 0; k < p.shape.k; ++k) {
    const uint8_t byte = p.src[r * p.shape.k + k];
    const int32_t x = p.shape.src_signed ? static_cast<int8_t>(byte) : byte;
    sum += static_cast<int64_t>(x - p.shape.src_zero_point) * p.weights[k * p.shape.n + c];
  }
  return sum;
}

// The kernel's own f32 steps on the exact sum: one rounding to f32, a product, an addition.
float expected(const Problem& p, size_t r, size_t c, bool bias) {
  const float product = static_cast<float>(exact_sum(p, r, c)) * p.scales[c];
  return bias ? product + p.bias[c] : product;
}

size_t blocks(size_t n) {
  return (n + kExactInt8Columns - 1) / kExactInt8Columns;
}

std::vector<float> run(const Problem& p, bool bias, ExactInt8Tile tile) {
  std::vector<float> dst(p.shape.rows * p.shape.n, -7.0f);
  const ExactInt8MatmulOperands operands{
      p.src.data(), p.packed.data(), p.scales.data(), bias ? p.bias.data() : nullptr, dst.data()};
  exact_int8_matmul(p.shape, operands, tile);
  return dst;
}

std::vector<float> run(const Problem& p, bool bias) {
  return run(p, bias, {0, p.shape.rows, 0, blocks(p.shape.n)});
}

#define SKIP_WITHOUT_AVX2()                                                   \
  if (host_row_isa() == RowIsa::scalar) {                                     \
    GTEST_SKIP() << "the exact int8 matmul needs AVX2, which this CPU lacks"; \
  }

TEST(ExactInt8Matmul, OneDnnsPackedLayoutIsTheOneTheKernelReads) {
  for (const size_t k : {1, 2, 15, 16, 17, 40}) {
    for (const size_t n : {1, 15, 16, 17, 33}) {
      const Problem p = make_problem(1, k, n, false, 0, false, static_cast<uint32_t>(k * 100 + n));
      const size_t padded_k = exact_int8_padded_depth(k);
      ASSERT_EQ(p.packed.size(), padded_k * blocks(n) * kExactInt8Columns);
      std::vector<int8_t> expected_bytes(p.packed.size(), 0);
      for (size_t i = 0; i < k; ++i) {
        for (size_t c = 0; c < n; ++c) {
          expected_bytes[exact_int8_packed_offset(i, c, padded_k)] = p.weights[i * n + c];
        }
      }
      EXPECT_EQ(p.packed, expected_bytes) << "k " << k << ", n " << n;
    }
  }
}

TEST(ExactInt8Matmul, ResultsAreTheExactSumsScaledAtEveryShapeAndTail) {
  SKIP_WITHOUT_AVX2();
  for (const size_t rows : {1, 3, 4, 5, 9}) {
    for (const size_t k : {1, 7, 16, 33, 1000, 1030, 2100}) {
      for (const size_t n : {1, 8, 16, 23, 300}) {
        for (const bool src_signed : {false, true}) {
          const int32_t zero_point = src_signed ? -3 : 131;
          const Problem p =
              make_problem(rows, k, n, src_signed, zero_point, false, static_cast<uint32_t>(rows + k + n));
          for (const bool bias : {false, true}) {
            const std::vector<float> dst = run(p, bias);
            for (size_t r = 0; r < rows; ++r) {
              for (size_t c = 0; c < n; ++c) {
                ASSERT_EQ(dst[r * n + c], expected(p, r, c, bias))
                    << "rows " << rows << ", k " << k << ", n " << n << ", signed " << src_signed << ", at " << r
                    << ", " << c;
              }
            }
          }
        }
      }
    }
  }
}

TEST(ExactInt8Matmul, PairsOfProductsBeyondSixteenBitsAddUpExactly) {
  SKIP_WITHOUT_AVX2();
  for (const bool src_signed : {false, true}) {
    // u8 255 with zero point 0 (s8 -128 with zero point 127: -255) against weights -128, -128, 127, 127, ...
    const int32_t zero_point = src_signed ? 127 : 0;
    const Problem p = make_problem(5, 2052, 40, src_signed, zero_point, true, 1);
    const int32_t x = src_signed ? -128 - zero_point : 255;
    ASSERT_GT(2 * std::abs(x) * 127, 32767) << "a pair of products that saturates 16 bits";
    const std::vector<float> dst = run(p, false);
    for (size_t r = 0; r < 5; ++r) {
      for (size_t c = 0; c < 40; ++c) {
        ASSERT_EQ(dst[r * 40 + c], expected(p, r, c, false)) << "signed " << src_signed << " at " << r << ", " << c;
      }
    }
    // The sum itself: 513 pairs of rows at -128 and 513 at 127 (k 2052 = 4 * 513).
    EXPECT_EQ(exact_sum(p, 0, 0), static_cast<int64_t>(x) * 1026 * (127 - 128));
  }
}

TEST(ExactInt8Matmul, WritesOnlyItsTilesRowsAndColumns) {
  SKIP_WITHOUT_AVX2();
  const size_t n = 70; // blocks [0, 16), [16, 32), [32, 48), [48, 64), [64, 70)
  const Problem p = make_problem(11, 50, n, false, 3, false, 9);
  for (const ExactInt8Tile tile :
       std::vector<ExactInt8Tile>{{0, 11, 1, 3}, {2, 7, 4, 5}, {5, 6, 0, 1}, {3, 11, 0, 5}}) {
    const std::vector<float> dst = run(p, true, tile);
    for (size_t r = 0; r < p.shape.rows; ++r) {
      for (size_t c = 0; c < n; ++c) {
        const bool inside = r >= tile.row_begin && r < tile.row_end && c >= tile.block_begin * kExactInt8Columns &&
                            c < tile.block_end * kExactInt8Columns;
        ASSERT_EQ(dst[r * n + c], inside ? expected(p, r, c, true) : -7.0f)
            << "rows " << tile.row_begin << "-" << tile.row_end << ", blocks " << tile.block_begin << "-"
            << tile.block_end << " at " << r << ", " << c;
      }
    }
  }
}

} // namespace
} // namespace executorch::backends::onednn
