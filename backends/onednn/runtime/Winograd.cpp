// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
#include "Winograd.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>

#include "VectorTargets.h"

// The AVX2 transforms (VectorTargets.h): the builder picks Winograd only where oneDNN dispatches to
// AVX2 or above.

namespace executorch::backends::onednn {
namespace {

std::atomic<int> use_setting{static_cast<int>(WinogradUse::where_faster)};

struct Tile {
  size_t image, row, column; // the tile's first output is (row, column) of image `image`
};

Tile locate(const WinogradShape& shape, size_t tile) {
  const size_t per_image = shape.tiles_high() * shape.tiles_wide();
  const size_t within = tile % per_image;
  return {
      tile / per_image, kWinogradTile * (within / shape.tiles_wide()), kWinogradTile * (within % shape.tiles_wide())};
}

// The 1-D transforms, applied to the columns of a tile, then to its rows. F(4, 3), points 0, 1, -1,
// 2, -2 and infinity: B^T = [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0],
// [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]],
// A^T = [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]].
ODNN_AVX2 inline void input_1d(const __m256 (&d)[6], __m256 (&r)[6]) {
  const __m256 four = _mm256_set1_ps(4.0f), five = _mm256_set1_ps(5.0f), two = _mm256_set1_ps(2.0f);
  const __m256 even = _mm256_fnmadd_ps(four, d[2], d[4]); // d4 - 4 d2
  const __m256 odd = _mm256_fnmadd_ps(four, d[1], d[3]);  // d3 - 4 d1
  const __m256 near = _mm256_sub_ps(d[4], d[2]);
  const __m256 far = _mm256_mul_ps(two, _mm256_sub_ps(d[3], d[1]));
  r[0] = _mm256_fmadd_ps(four, d[0], _mm256_fnmadd_ps(five, d[2], d[4]));
  r[1] = _mm256_add_ps(even, odd);
  r[2] = _mm256_sub_ps(even, odd);
  r[3] = _mm256_add_ps(near, far);
  r[4] = _mm256_sub_ps(near, far);
  r[5] = _mm256_fmadd_ps(four, d[1], _mm256_fnmadd_ps(five, d[3], d[5]));
}

ODNN_AVX2 inline void output_1d(const __m256 (&m)[6], __m256 (&y)[4]) {
  const __m256 sum12 = _mm256_add_ps(m[1], m[2]), diff12 = _mm256_sub_ps(m[1], m[2]);
  const __m256 sum34 = _mm256_add_ps(m[3], m[4]), diff34 = _mm256_sub_ps(m[3], m[4]);
  y[0] = _mm256_add_ps(_mm256_add_ps(m[0], sum12), sum34);
  y[1] = _mm256_fmadd_ps(_mm256_set1_ps(2.0f), diff34, diff12);
  y[2] = _mm256_fmadd_ps(_mm256_set1_ps(4.0f), sum34, sum12);
  y[3] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8.0f), diff34, diff12), m[5]);
}

} // namespace

ODNN_AVX2 void winograd_input_tiles(
    const WinogradShape& shape, const float* src, float* tiles, size_t begin, size_t end) {
  const size_t stride = shape.tiles() * shape.channels; // between points
  const auto height = static_cast<int64_t>(shape.height);
  const auto width = static_cast<int64_t>(shape.width);
  for (size_t tile = begin; tile < end; ++tile) {
    const Tile at = locate(shape, tile);
    const float* image = src + at.image * shape.height * shape.width * shape.channels;
    const int64_t top = static_cast<int64_t>(at.row) - shape.pad_top;
    const int64_t left = static_cast<int64_t>(at.column) - shape.pad_left;
    const float* pixels[kWinogradSide][kWinogradSide]; // null: padding
    for (size_t i = 0; i < kWinogradSide; ++i) {
      for (size_t j = 0; j < kWinogradSide; ++j) {
        const int64_t y = top + static_cast<int64_t>(i), x = left + static_cast<int64_t>(j);
        pixels[i][j] = y >= 0 && y < height && x >= 0 && x < width ? image + (y * width + x) * shape.channels : nullptr;
      }
    }
    float* out = tiles + tile * shape.channels;
    for (size_t c = 0; c < shape.channels; c += kWinogradLanes) {
      __m256 columns[kWinogradSide][kWinogradSide]; // [j][i]: B^T d, column by column
      for (size_t j = 0; j < kWinogradSide; ++j) {
        __m256 column[kWinogradSide];
        for (size_t i = 0; i < kWinogradSide; ++i) {
          column[i] = pixels[i][j] != nullptr ? _mm256_loadu_ps(pixels[i][j] + c) : _mm256_setzero_ps();
        }
        input_1d(column, columns[j]);
      }
      for (size_t i = 0; i < kWinogradSide; ++i) {
        __m256 row[kWinogradSide], transformed[kWinogradSide];
        for (size_t j = 0; j < kWinogradSide; ++j) {
          row[j] = columns[j][i];
        }
        input_1d(row, transformed);
        for (size_t j = 0; j < kWinogradSide; ++j) {
          _mm256_storeu_ps(out + (i * kWinogradSide + j) * stride + c, transformed[j]);
        }
      }
    }
  }
}

ODNN_AVX2 void winograd_output_tiles(
    const WinogradShape& shape,
    const float* products,
    const float* bias,
    const float* residual,
    float* dst,
    size_t begin,
    size_t end) {
  const size_t channels = shape.out_channels;
  const size_t stride = shape.tiles() * channels; // between points
  for (size_t tile = begin; tile < end; ++tile) {
    const Tile at = locate(shape, tile);
    const size_t image = at.image * shape.out_height * shape.out_width * channels;
    const size_t rows = std::min(kWinogradTile, shape.out_height - at.row);
    const size_t columns = std::min(kWinogradTile, shape.out_width - at.column);
    const float* in = products + tile * channels;
    for (size_t c = 0; c < channels; c += kWinogradLanes) {
      __m256 reduced[kWinogradSide][kWinogradTile]; // [j][i]: A^T m, column by column
      for (size_t j = 0; j < kWinogradSide; ++j) {
        __m256 column[kWinogradSide];
        for (size_t i = 0; i < kWinogradSide; ++i) {
          column[i] = _mm256_loadu_ps(in + (i * kWinogradSide + j) * stride + c);
        }
        output_1d(column, reduced[j]);
      }
      const __m256 offset = bias != nullptr ? _mm256_loadu_ps(bias + c) : _mm256_setzero_ps();
      for (size_t i = 0; i < rows; ++i) {
        __m256 row[kWinogradSide], y[kWinogradTile];
        for (size_t j = 0; j < kWinogradSide; ++j) {
          row[j] = reduced[j][i];
        }
        output_1d(row, y);
        for (size_t j = 0; j < columns; ++j) {
          const size_t at_dst = image + ((at.row + i) * shape.out_width + at.column + j) * channels + c;
          __m256 value = _mm256_add_ps(y[j], offset);
          if (residual != nullptr) {
            value = _mm256_add_ps(value, _mm256_loadu_ps(residual + at_dst));
          }
          if (shape.relu) {
            value = _mm256_max_ps(value, _mm256_setzero_ps());
          }
          _mm256_storeu_ps(dst + at_dst, value);
        }
      }
    }
  }
}

void set_winograd_use(WinogradUse use) noexcept {
  use_setting.store(static_cast<int>(use));
}

WinogradUse winograd_use() noexcept {
  return static_cast<WinogradUse>(use_setting.load());
}

// U = G g G^T, in double before rounding to f32, with G = [[1/4, 0, 0], [-1/6, -1/6, -1/6],
// [-1/6, 1/6, -1/6], [1/24, 1/12, 1/6], [1/24, -1/12, 1/6], [0, 0, 1]].
void winograd_weights(const float* filters, size_t count, float* transformed) {
  static const double g_matrix[kWinogradSide][3] = {
      {1.0 / 4, 0.0, 0.0},
      {-1.0 / 6, -1.0 / 6, -1.0 / 6},
      {-1.0 / 6, 1.0 / 6, -1.0 / 6},
      {1.0 / 24, 1.0 / 12, 1.0 / 6},
      {1.0 / 24, -1.0 / 12, 1.0 / 6},
      {0.0, 0.0, 1.0}};
  for (size_t filter = 0; filter < count; ++filter) {
    const float* g = filters + filter * 9;
    float* u = transformed + filter * kWinogradPoints;
    double left[kWinogradSide][3]; // G g
    for (size_t a = 0; a < kWinogradSide; ++a) {
      for (size_t b = 0; b < 3; ++b) {
        left[a][b] = g_matrix[a][0] * g[b] + g_matrix[a][1] * g[3 + b] + g_matrix[a][2] * g[6 + b];
      }
    }
    for (size_t a = 0; a < kWinogradSide; ++a) {
      for (size_t b = 0; b < kWinogradSide; ++b) {
        u[a * kWinogradSide + b] =
            static_cast<float>(left[a][0] * g_matrix[b][0] + left[a][1] * g_matrix[b][1] + left[a][2] * g_matrix[b][2]);
      }
    }
  }
}

} // namespace executorch::backends::onednn
