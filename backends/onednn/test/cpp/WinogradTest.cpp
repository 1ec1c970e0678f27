// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// The Winograd F(4x4, 3x3) transforms (runtime/Winograd.h), with the products computed here in
// double, against a direct convolution in double: odd and even sizes (partial output tiles), every
// padding from 0 to 2 on each side, batches, bias, residual and ReLU, and tiles split across calls as
// the runtime's threads split them.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "../../runtime/RowKernels.h"
#include "../../runtime/Winograd.h"

namespace executorch::backends::onednn {
namespace {

struct Case {
  size_t batch, channels, height, width, out_channels;
  int64_t pad_top, pad_left, pad_bottom, pad_right;
  bool bias, residual, relu;
};

// dst[n][y][x][o] (channels-last) by the definition of a 3x3 convolution of stride 1.
std::vector<double> direct(
    const Case& c,
    const std::vector<float>& src,
    const std::vector<float>& weights,
    const std::vector<float>& bias,
    const std::vector<float>& residual,
    size_t oh,
    size_t ow) {
  std::vector<double> dst(c.batch * oh * ow * c.out_channels);
  for (size_t n = 0; n < c.batch; ++n) {
    for (size_t y = 0; y < oh; ++y) {
      for (size_t x = 0; x < ow; ++x) {
        for (size_t o = 0; o < c.out_channels; ++o) {
          double sum = c.bias ? bias[o] : 0.0;
          for (int64_t ky = 0; ky < 3; ++ky) {
            for (int64_t kx = 0; kx < 3; ++kx) {
              const int64_t sy = static_cast<int64_t>(y) + ky - c.pad_top;
              const int64_t sx = static_cast<int64_t>(x) + kx - c.pad_left;
              if (sy < 0 || sx < 0 || sy >= static_cast<int64_t>(c.height) || sx >= static_cast<int64_t>(c.width)) {
                continue;
              }
              for (size_t i = 0; i < c.channels; ++i) {
                sum += static_cast<double>(src[((n * c.height + sy) * c.width + sx) * c.channels + i]) *
                       weights[((o * c.channels + i) * 3 + ky) * 3 + kx];
              }
            }
          }
          const size_t at = ((n * oh + y) * ow + x) * c.out_channels + o;
          sum += c.residual ? residual[at] : 0.0;
          dst[at] = c.relu ? std::max(sum, 0.0) : sum;
        }
      }
    }
  }
  return dst;
}

void check(const Case& c) {
  WinogradShape shape;
  shape.batch = c.batch;
  shape.channels = c.channels;
  shape.height = c.height;
  shape.width = c.width;
  shape.out_channels = c.out_channels;
  shape.out_height = c.height + c.pad_top + c.pad_bottom - 2;
  shape.out_width = c.width + c.pad_left + c.pad_right - 2;
  shape.pad_top = c.pad_top;
  shape.pad_left = c.pad_left;
  shape.relu = c.relu;
  std::mt19937 generator(7);
  std::normal_distribution<float> normal;
  const auto random = [&](size_t count) {
    std::vector<float> values(count);
    for (float& v : values) {
      v = normal(generator);
    }
    return values;
  };
  const std::vector<float> src = random(c.batch * c.height * c.width * c.channels);
  const std::vector<float> weights = random(c.out_channels * c.channels * 9);
  const std::vector<float> bias = random(c.out_channels);
  const size_t outputs = c.batch * shape.out_height * shape.out_width * c.out_channels;
  const std::vector<float> residual = random(outputs);

  const size_t tiles = shape.tiles();
  const size_t points = kWinogradPoints;
  std::vector<float> by_filter(points * c.channels * c.out_channels);
  winograd_weights(weights.data(), c.out_channels * c.channels, by_filter.data());
  std::vector<float> transformed(by_filter.size()); // [36][IC][OC], as the runtime reorders it
  for (size_t f = 0; f < c.out_channels * c.channels; ++f) {
    for (size_t p = 0; p < points; ++p) {
      transformed[(p * c.channels + f % c.channels) * c.out_channels + f / c.channels] = by_filter[f * points + p];
    }
  }
  std::vector<float> input_tiles(points * tiles * c.channels, -1.0f);
  // In two calls, as two threads would split the tiles.
  winograd_input_tiles(shape, src.data(), input_tiles.data(), 0, tiles / 2);
  winograd_input_tiles(shape, src.data(), input_tiles.data(), tiles / 2, tiles);
  std::vector<float> products(points * tiles * c.out_channels);
  for (size_t p = 0; p < points; ++p) {
    for (size_t t = 0; t < tiles; ++t) {
      for (size_t o = 0; o < c.out_channels; ++o) {
        double sum = 0.0;
        for (size_t i = 0; i < c.channels; ++i) {
          sum += static_cast<double>(input_tiles[(p * tiles + t) * c.channels + i]) *
                 transformed[(p * c.channels + i) * c.out_channels + o];
        }
        products[(p * tiles + t) * c.out_channels + o] = static_cast<float>(sum);
      }
    }
  }
  std::vector<float> dst(outputs, std::nanf(""));
  winograd_output_tiles(
      shape,
      products.data(),
      c.bias ? bias.data() : nullptr,
      c.residual ? residual.data() : nullptr,
      dst.data(),
      0,
      tiles / 3);
  winograd_output_tiles(
      shape,
      products.data(),
      c.bias ? bias.data() : nullptr,
      c.residual ? residual.data() : nullptr,
      dst.data(),
      tiles / 3,
      tiles);

  const std::vector<double> expected = direct(c, src, weights, bias, residual, shape.out_height, shape.out_width);
  double magnitude = 0.0;
  for (double v : expected) {
    magnitude = std::max(magnitude, std::abs(v));
  }
  // The transforms multiply by up to 8 (output) and 5 (input): some ten f32 ulps of the magnitude.
  const double tolerance = 2e-5 * magnitude;
  for (size_t i = 0; i < outputs; ++i) {
    ASSERT_LE(std::abs(dst[i] - expected[i]), tolerance)
        << "output " << i << " of " << outputs << ": " << dst[i] << " vs " << expected[i] << " (batch " << c.batch
        << ", " << c.height << "x" << c.width << ", pads " << c.pad_top << c.pad_left << c.pad_bottom << c.pad_right
        << ")";
  }
}

TEST(WinogradTest, MatchesADirectConvolution) {
  if (host_row_isa() == RowIsa::scalar) {
    GTEST_SKIP() << "the Winograd kernels need AVX2 and FMA; oneDNN reports neither on this CPU";
  }
  check({1, 8, 8, 8, 8, 1, 1, 1, 1, true, false, false});
  check({1, 16, 7, 7, 8, 1, 1, 1, 1, true, true, true});     // odd: partial tiles on both edges
  check({2, 8, 5, 9, 24, 1, 1, 1, 1, false, false, true});   // batch 2, rectangle
  check({1, 8, 6, 6, 8, 0, 0, 0, 0, true, true, false});     // no padding
  check({3, 8, 4, 5, 16, 2, 1, 0, 2, true, false, true});    // uneven padding, batch 3
  check({1, 32, 3, 3, 8, 1, 1, 1, 1, true, true, true});     // one partial tile per image
  check({1, 64, 14, 14, 16, 1, 1, 1, 1, true, false, true}); // a longer reduction
}

TEST(WinogradTest, WeightsTransformIsGgGt) {
  // One 3x3 filter of ones: G g G^T is the outer product of G's row sums with themselves.
  const std::vector<float> ones(9, 1.0f);
  const double sums[kWinogradSide] = {0.25, -0.5, -1.0 / 6, 7.0 / 24, 1.0 / 8, 1.0};
  std::vector<float> transformed(kWinogradPoints);
  winograd_weights(ones.data(), 1, transformed.data());
  for (size_t a = 0; a < kWinogradSide; ++a) {
    for (size_t b = 0; b < kWinogradSide; ++b) {
      EXPECT_FLOAT_EQ(transformed[a * kWinogradSide + b], static_cast<float>(sums[a] * sums[b])) << a << "," << b;
    }
  }
}

} // namespace
} // namespace executorch::backends::onednn
