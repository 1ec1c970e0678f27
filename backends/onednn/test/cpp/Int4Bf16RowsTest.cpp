// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// int4_bf16_vector_matrix (runtime/Int4VectorMatrix.h): a bf16 row times int4 weights in two int8
// slices per 32 values where AVX512-VNNI runs, else the f32 kernel on the widened row. Against torchao's
// dequantize-then-linear in double, within the header's bound (each value within 2^-14 of its
// segment's largest magnitude); non-finite and extreme segments bit for bit as the f32 kernel; bf16
// results as the f32 ones rounded; bf16 scales as their f32 values; threads on disjoint ranges.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "../../runtime/Bf16.h"
#include "../../runtime/Int4VectorMatrix.h"
#include "../../runtime/RowKernels.h"
#include "Int4Matrices.h"

namespace executorch::backends::onednn {
namespace {

using namespace int4_testing;

constexpr float kInf = std::numeric_limits<float>::infinity();

// The widest path this CPU runs (under oneDNN's cap): the sliced kernel where it has AVX512-VNNI.
Int4MatrixShape host_shape(const Int4Matrix& matrix) {
  const RowIsa isa = host_row_isa();
  return matrix.shape(isa, isa == RowIsa::avx512 && __builtin_cpu_supports("avx512vnni"));
}

// k bf16 values: uniform in [-1, 1], every 7th 30 times larger, every 11th 2^-12 times smaller (so
// that segments span more than the slices hold exactly), and the second segment all zeros.
std::vector<uint16_t> make_row(size_t k, std::mt19937& generator) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<uint16_t> row(k);
  for (size_t i = 0; i < k; ++i) {
    const float factor = i % 7 == 0 ? 30.0f : i % 11 == 0 ? 0x1p-12f : 1.0f;
    row[i] = to_bf16_bits(uniform(generator) * factor);
  }
  for (size_t i = 32; i < 64 && i < k; ++i) {
    row[i] = 0;
  }
  return row;
}

std::vector<float> widened(const std::vector<uint16_t>& row) {
  std::vector<float> out(row.size());
  for (size_t i = 0; i < row.size(); ++i) {
    out[i] = from_bf16_bits(row[i]);
  }
  return out;
}

// The header's bound on column r's error: sum over k of |W[r, k]| * 2^-14 * the largest magnitude of
// k's 32 values.
double slices_bound(const Int4Matrix& matrix, const std::vector<float>& x, const int8_t* zero_points, size_t r) {
  const size_t groups = matrix.k / matrix.group;
  double bound = 0.0;
  for (size_t k = 0; k < matrix.k; ++k) {
    double largest = 0.0;
    for (size_t i = k / 32 * 32; i < k / 32 * 32 + 32 && i < matrix.k; ++i) {
      largest = std::max(largest, static_cast<double>(std::fabs(x[i])));
    }
    const size_t g = r * groups + k / matrix.group;
    const int zero = zero_points != nullptr ? zero_points[g] : 0;
    bound +=
        std::fabs(static_cast<double>(matrix.values[r * matrix.k + k] - zero) * matrix.scales[g]) * largest * 0x1p-14;
  }
  return bound;
}

Int4Bf16RowOperands bf16_operands(
    const Int4Matrix& matrix, const std::vector<uint16_t>& row, const int8_t* zero_points, const float* bias) {
  Int4Bf16RowOperands operands;
  operands.row = row.data();
  operands.weights = matrix.packed.data();
  operands.scales = matrix.scales.data();
  operands.zero_points = zero_points;
  operands.bias = bias;
  return operands;
}

TEST(Int4Bf16Rows, StayWithinTheSlicesBoundOfTorchaosDequantizeThenLinearOnTheirRangeOnly) {
  std::mt19937 generator(31);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (const Case& c : kFloatCases) {
    const Int4Matrix matrix(c.n, c.k, c.group, generator);
    const std::vector<uint16_t> row = make_row(c.k, generator);
    const std::vector<float> x = widened(row);
    std::vector<float> bias(c.n);
    for (float& v : bias) {
      v = uniform(generator);
    }
    for (const ZeroPoints kind : {ZeroPoints::none, ZeroPoints::random, ZeroPoints::extreme}) {
      const std::vector<int8_t> zero_points = make_zero_points(matrix, kind, generator);
      const int8_t* zeros = kind == ZeroPoints::none ? nullptr : zero_points.data();
      for (const bool has_bias : {false, true}) {
        // Columns 0 and n - 1 stay outside; the split falls anywhere.
        std::vector<float> dst(c.n, -7.0f);
        Int4Bf16RowOperands operands = bf16_operands(matrix, row, zeros, has_bias ? bias.data() : nullptr);
        operands.dst_f32 = dst.data();
        const Int4MatrixShape shape = host_shape(matrix);
        const size_t split = c.n / 2;
        int4_bf16_vector_matrix(shape, operands, 1, split);
        int4_bf16_vector_matrix(shape, operands, std::max<size_t>(split, 1), c.n - 1);
        for (size_t r = 0; r < c.n; ++r) {
          const std::string where = float_case_name(c, kind, has_bias) + ", column " + std::to_string(r);
          if (r == 0 || r == c.n - 1) {
            EXPECT_EQ(dst[r], -7.0f) << where << ": written outside the range";
            continue;
          }
          double want, magnitude;
          float_reference(matrix, x, zeros, operands.bias, r, want, magnitude);
          EXPECT_NEAR(dst[r], want, slices_bound(matrix, x, zeros, r) + 1e-5 * magnitude) << where;
        }
      }
    }
  }
}

class SlicedRows : public testing::Test {
 protected:
  void SetUp() override {
    std::mt19937 generator(1);
    if (!int4_bf16_rows_sliced(host_shape(Int4Matrix(1, 64, 32, generator)))) {
      GTEST_SKIP() << "the sliced kernel needs AVX-512 (avx512_core) with AVX512-VNNI, which this CPU (or oneDNN's "
                      "instruction-set cap) lacks";
    }
  }
};

TEST_F(SlicedRows, TakeTheInt8UnitExactlyWhereTheSlicesHoldTheRow) {
  std::mt19937 generator(37);
  const Int4Matrix matrix(96, 2048, 32, generator);
  std::vector<float> exact(matrix.n), sliced(matrix.n);
  // Each value within 2^6 of its segment's largest, on 8 bits: the slices hold it exactly, and the
  // products are exact integers; only the f32 sums round.
  std::uniform_int_distribution<int> mantissa(-255, 255);
  std::vector<uint16_t> row(matrix.k);
  for (size_t k = 0; k < matrix.k; ++k) {
    row[k] = to_bf16_bits(std::ldexp(static_cast<float>(k % 32 == 0 ? 255 : mantissa(generator)), -8 + (k / 32) % 5));
  }
  Int4Bf16RowOperands operands = bf16_operands(matrix, row, nullptr, nullptr);
  operands.dst_f32 = sliced.data();
  int4_bf16_vector_matrix(host_shape(matrix), operands, 0, matrix.n);
  const std::vector<float> x = widened(row);
  for (size_t r = 0; r < matrix.n; ++r) {
    double want, magnitude;
    float_reference(matrix, x, nullptr, nullptr, r, want, magnitude);
    EXPECT_NEAR(sliced[r], want, 2e-6 * magnitude) << "column " << r;
  }
  // A row whose segments span 2^12: the slices round its small values, so some columns differ from the
  // f32 kernel's: the int8 unit ran.
  row = make_row(matrix.k, generator);
  operands.row = row.data();
  int4_bf16_vector_matrix(host_shape(matrix), operands, 0, matrix.n);
  const std::vector<float> wide = widened(row);
  int4_float_vector_matrix(host_shape(matrix), float_operands(matrix, wide, nullptr, nullptr, exact), 0, matrix.n);
  size_t differing = 0;
  for (size_t r = 0; r < matrix.n; ++r) {
    differing += same_bits(sliced[r], exact[r]) ? 0 : 1;
    EXPECT_NEAR(sliced[r], exact[r], slices_bound(matrix, wide, nullptr, r) + 1e-5 * std::fabs(exact[r]))
        << "column " << r;
  }
  EXPECT_GT(differing, 0u) << "every column equals the f32 kernel's: the slices did not run";
}

TEST(Int4Bf16Rows, NonFiniteOrExtremeSegmentsGiveTheF32KernelsBits) {
  std::mt19937 generator(41);
  const float denormal = std::numeric_limits<float>::denorm_min() * 65536.0f; // a bf16 denormal
  const std::vector<float> specials{kInf, -kInf, std::nanf(""), 0x1p100f, -0x1p110f, 0x1p-101f, denormal};
  for (const Case& c : {Case{33, 2048, 32}, Case{9, 320, 64}, Case{5, 384, 96}}) {
    Int4Matrix matrix(c.n, c.k, c.group, generator);
    const std::vector<int8_t> zero_points = make_zero_points(matrix, ZeroPoints::random, generator);
    for (const float special : specials) {
      for (const bool has_zero_points : {false, true}) {
        std::vector<uint16_t> row = make_row(c.k, generator);
        if (special < 0x1p-90f && special > 0.0f) {
          for (size_t k = 64; k < 96; ++k) { // a whole segment that small
            row[k] = to_bf16_bits(k % 2 == 0 ? special : -special);
          }
        } else {
          row[c.k / 3] = to_bf16_bits(special);
        }
        const int8_t* zeros = has_zero_points ? zero_points.data() : nullptr;
        std::vector<float> want(c.n), got(c.n);
        std::vector<uint16_t> got_bf16(c.n);
        const std::vector<float> x = widened(row);
        int4_float_vector_matrix(host_shape(matrix), float_operands(matrix, x, zeros, nullptr, want), 0, c.n);
        Int4Bf16RowOperands operands = bf16_operands(matrix, row, zeros, nullptr);
        operands.dst_f32 = got.data();
        int4_bf16_vector_matrix(host_shape(matrix), operands, 0, c.n);
        operands.dst_f32 = nullptr;
        operands.dst_bf16 = got_bf16.data();
        int4_bf16_vector_matrix(host_shape(matrix), operands, 0, c.n);
        for (size_t r = 0; r < c.n; ++r) {
          const std::string where = float_case_name(c, has_zero_points ? ZeroPoints::random : ZeroPoints::none, false) +
                                    ", a value " + std::to_string(special) + ", column " + std::to_string(r);
          EXPECT_TRUE(same_bits(got[r], want[r]) || (std::isnan(got[r]) && std::isnan(want[r])))
              << where << ": " << got[r] << " against " << want[r];
          EXPECT_EQ(got_bf16[r], to_bf16_bits(want[r])) << where;
        }
      }
    }
  }
}

TEST(Int4Bf16Rows, Bf16ResultsAreTheF32ResultsRoundedAndBf16ScalesTheirF32Values) {
  std::mt19937 generator(43);
  for (const Case& c : kFloatCases) {
    Int4Matrix matrix(c.n, c.k, c.group, generator);
    const std::vector<uint16_t> scale_bits = round_scales_to_bf16(matrix);
    const std::vector<uint16_t> row = make_row(c.k, generator);
    for (const ZeroPoints kind : {ZeroPoints::none, ZeroPoints::random}) {
      const std::vector<int8_t> zero_points = make_zero_points(matrix, kind, generator);
      const int8_t* zeros = kind == ZeroPoints::none ? nullptr : zero_points.data();
      std::vector<float> from_f32(c.n), from_bf16(c.n);
      std::vector<uint16_t> rounded(c.n);
      Int4Bf16RowOperands operands = bf16_operands(matrix, row, zeros, nullptr);
      operands.dst_f32 = from_f32.data();
      int4_bf16_vector_matrix(host_shape(matrix), operands, 0, c.n);
      operands.scales = GroupScales(scale_bits.data());
      operands.dst_f32 = from_bf16.data();
      int4_bf16_vector_matrix(host_shape(matrix), operands, 0, c.n);
      operands.dst_f32 = nullptr;
      operands.dst_bf16 = rounded.data();
      int4_bf16_vector_matrix(host_shape(matrix), operands, 0, c.n);
      for (size_t r = 0; r < c.n; ++r) {
        const std::string where = float_case_name(c, kind, false) + ", column " + std::to_string(r);
        EXPECT_TRUE(same_bits(from_bf16[r], from_f32[r])) << where << ": " << from_bf16[r] << ", " << from_f32[r];
        EXPECT_EQ(rounded[r], to_bf16_bits(from_bf16[r])) << where;
      }
    }
  }
}

TEST(Int4Bf16Rows, ThreadsOnDisjointRangesGetWhatOneThreadGets) {
  // Each thread keeps its own slices and factors; two shapes alternate so that they regrow.
  std::mt19937 generator(47);
  const Int4Matrix wide(64, 2048, 32, generator), narrow(64, 320, 64, generator);
  const std::vector<int8_t> wide_zeros = make_zero_points(wide, ZeroPoints::random, generator);
  const std::vector<uint16_t> wide_row = make_row(wide.k, generator), narrow_row = make_row(narrow.k, generator);
  std::vector<uint16_t> wide_want(wide.n), narrow_want(narrow.n);
  Int4Bf16RowOperands wide_operands = bf16_operands(wide, wide_row, wide_zeros.data(), nullptr);
  Int4Bf16RowOperands narrow_operands = bf16_operands(narrow, narrow_row, nullptr, nullptr);
  wide_operands.dst_bf16 = wide_want.data();
  narrow_operands.dst_bf16 = narrow_want.data();
  int4_bf16_vector_matrix(host_shape(wide), wide_operands, 0, wide.n);
  int4_bf16_vector_matrix(host_shape(narrow), narrow_operands, 0, narrow.n);
  constexpr size_t kThreads = 4;
  std::vector<uint16_t> wide_got(wide.n, 7), narrow_got(narrow.n, 7);
  wide_operands.dst_bf16 = wide_got.data();
  narrow_operands.dst_bf16 = narrow_got.data();
  std::vector<std::thread> threads;
  for (size_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const size_t begin = t * wide.n / kThreads, end = (t + 1) * wide.n / kThreads;
      for (int round = 0; round < 20; ++round) {
        int4_bf16_vector_matrix(host_shape(wide), wide_operands, begin, end);
        int4_bf16_vector_matrix(host_shape(narrow), narrow_operands, begin, end);
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(wide_got, wide_want) << "k 2048 group 32, zero points";
  EXPECT_EQ(narrow_got, narrow_want) << "k 320 group 64";
}

} // namespace
} // namespace executorch::backends::onednn
