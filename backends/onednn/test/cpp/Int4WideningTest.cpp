// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// int4 weights widened to s8 on a grid per column (runtime/Int4Widening.h): within 0.502 of the grid
// of their value, the extremes exact, the AVX-512 path equal to the scalar loop bit for bit.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "../../runtime/Int4Widening.h"
#include "../../runtime/RowKernels.h"

namespace onednn_test {
namespace {

using executorch::backends::onednn::host_row_isa;
using executorch::backends::onednn::RowIsa;
using executorch::backends::onednn::widen_int4_rows;
using executorch::backends::onednn::widened_column_scale;
using executorch::backends::onednn::widened_int4_terms;
using executorch::backends::onednn::WidenedInt4Shape;

struct Int4Weights {
  WidenedInt4Shape shape;
  std::vector<int8_t> values; // [n, k] in [-8, 7]
  std::vector<uint8_t> packed;
  std::vector<float> scales; // [n, k / group]
  std::vector<float> column_scales;

  Int4Weights(size_t n, size_t k, size_t group, uint32_t seed) : values(n * k), packed(n * k / 2) {
    shape.n = n;
    shape.k = k;
    shape.group = group;
    std::mt19937 generator(seed);
    std::uniform_int_distribution<int> value(-8, 7);
    // Groups of very different widths, one of them negative: the ratios cover their whole range.
    std::uniform_real_distribution<float> scale(0.001f, 0.05f);
    for (int8_t& v : values) {
      v = static_cast<int8_t>(value(generator));
    }
    for (size_t i = 0; i < n * (k / group); ++i) {
      scales.push_back(i % 7 == 3 ? -scale(generator) : scale(generator));
    }
    pack();
  }
  void pack() {
    for (size_t i = 0; i < packed.size(); ++i) {
      packed[i] = static_cast<uint8_t>((values[2 * i] & 0x0F) | ((values[2 * i + 1] & 0x0F) << 4));
    }
    const size_t groups = shape.k / shape.group;
    column_scales.assign(shape.n, 0.0f);
    for (size_t r = 0; r < shape.n; ++r) {
      EXPECT_TRUE(widened_column_scale(&scales[r * groups], groups, &column_scales[r]));
    }
  }
  std::vector<int8_t> widened(RowIsa isa) const {
    WidenedInt4Shape with = shape;
    with.isa = isa;
    std::vector<int8_t> out(shape.n * shape.k);
    widen_int4_rows(with, packed.data(), scales.data(), column_scales.data(), 0, shape.n, out.data());
    return out;
  }
};

TEST(Int4Widening, EachWeightStaysWithinHalfAStepOfItsColumnsGrid) {
  for (const size_t group : {size_t{32}, size_t{128}}) {
    Int4Weights w(9, 256, group, 3);
    // Row 0: the extremes at the column's widest scale, which widen exactly to -127 and 111.
    w.values[0] = -8;
    w.values[1] = 7;
    w.scales[0] = 0.08f;
    w.pack();
    const std::vector<int8_t> out = w.widened(RowIsa::scalar);
    EXPECT_EQ(out[0], -127);
    EXPECT_EQ(out[1], 111);
    const size_t groups = w.shape.k / group;
    for (size_t r = 0; r < w.shape.n; ++r) {
      for (size_t k = 0; k < w.shape.k; ++k) {
        const float weight = w.values[r * w.shape.k + k] * w.scales[r * groups + k / group];
        const float grid = w.column_scales[r];
        EXPECT_LE(std::abs(out[r * w.shape.k + k] * grid - weight), 0.502f * grid)
            << "group " << group << " row " << r << " k " << k;
      }
    }
  }
}

TEST(Int4Widening, EachVectorPathMatchesTheScalarLoopBitForBit) {
  const RowIsa host = host_row_isa();
  if (host == RowIsa::scalar) {
    GTEST_SKIP() << "this CPU has no AVX2";
  }
  for (const RowIsa isa : {RowIsa::avx2, RowIsa::avx512}) {
    if (isa == RowIsa::avx512 && host != RowIsa::avx512) {
      continue; // AVX2 is checked; AVX-512 (avx512_core) is missing
    }
    for (const size_t group : {size_t{32}, size_t{64}, size_t{256}}) {
      const Int4Weights w(13, 512, group, 5);
      EXPECT_EQ(w.widened(isa), w.widened(RowIsa::scalar))
          << "group " << group << " avx512 " << (isa == RowIsa::avx512);
    }
  }
}

TEST(Int4Widening, ColumnScalesRefuseNonFiniteOrVanishingScalesAndTakeOneForZeros) {
  float column = 0.0f;
  const float zeros[2] = {0.0f, -0.0f};
  EXPECT_TRUE(widened_column_scale(zeros, 2, &column));
  EXPECT_EQ(column, 1.0f);
  const float widest[3] = {0.01f, -0.127f, 0.1f};
  EXPECT_TRUE(widened_column_scale(widest, 3, &column));
  EXPECT_FLOAT_EQ(column, 0.008f);
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), 1e-37f}) {
    const float scales[2] = {bad == 1e-37f ? 0.0f : 0.01f, bad};
    EXPECT_FALSE(widened_column_scale(scales, 2, &column)) << bad;
  }
}

TEST(Int4Widening, TermsAreTheWidenedWeightsSummedOnTheirGrid) {
  const Int4Weights w(6, 128, 32, 7);
  const std::vector<int8_t> out = w.widened(RowIsa::scalar);
  std::vector<float> terms(w.shape.n, -1.0f);
  WidenedInt4Shape shape = w.shape;
  widened_int4_terms(shape, w.packed.data(), w.scales.data(), w.column_scales.data(), terms.data(), 1, 5);
  EXPECT_EQ(terms[0], -1.0f);
  EXPECT_EQ(terms[5], -1.0f);
  for (size_t r = 1; r < 5; ++r) {
    int64_t sum = 0;
    for (size_t k = 0; k < w.shape.k; ++k) {
      sum += out[r * w.shape.k + k];
    }
    EXPECT_FLOAT_EQ(terms[r], w.column_scales[r] * static_cast<float>(sum)) << "row " << r;
  }
}

} // namespace
} // namespace onednn_test
