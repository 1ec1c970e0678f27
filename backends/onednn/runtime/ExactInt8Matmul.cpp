// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
#include "ExactInt8Matmul.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "VectorTargets.h" // the caller runs it on CPUs with AVX2 only

namespace executorch::backends::onednn {
namespace {

// Rows widened a few at a time, a chunk of their depth at a time (on the stack): each product step
// reads one pair of 16-bit values per row and one pair of packed rows for 16 columns.
constexpr size_t kRowsPerStep = 4;
constexpr size_t kDepthChunk = 1024;
// Columns of one pass over the rows: their packed weights (at most kGroupBytes, at least one block)
// stay in the core's L2 cache while every block of rows reads them; their int32 sums stay in L1.
constexpr size_t kGroupBytes = size_t{256} << 10;
constexpr size_t kMaxGroupBlocks = 16;

using WideRows = int16_t[kRowsPerStep][kDepthChunk];
using Sums = int32_t[kRowsPerStep][kMaxGroupBlocks * kExactInt8Columns];

// Rows [first, first + count) of the src, depths [k0, k0 + depth) (a multiple of kExactInt8Depth),
// minus the zero point, as 16-bit values; zeros past the src's depth.
ODNN_AVX2 void widen_rows(
    const ExactInt8MatmulShape& shape,
    const uint8_t* src,
    size_t first,
    size_t count,
    size_t k0,
    size_t depth,
    WideRows& wide) {
  const __m256i zero_point = _mm256_set1_epi16(static_cast<int16_t>(shape.src_zero_point));
  const size_t stored = std::min(depth, shape.k - std::min(shape.k, k0));
  for (size_t r = 0; r < count; ++r) {
    const uint8_t* row = src + (first + r) * shape.k + k0;
    int16_t* out = wide[r];
    size_t k = 0;
    for (; k + 16 <= stored; k += 16) {
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k));
      const __m256i widened = shape.src_signed ? _mm256_cvtepi8_epi16(bytes) : _mm256_cvtepu8_epi16(bytes);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k), _mm256_sub_epi16(widened, zero_point));
    }
    for (; k < stored; ++k) {
      const int32_t value = shape.src_signed ? static_cast<int8_t>(row[k]) : row[k];
      out[k] = static_cast<int16_t>(value - shape.src_zero_point);
    }
    std::fill(out + stored, out + depth, int16_t{0});
  }
}

// sums[r][0..16) += the products of `Rows` widened rows with one block of packed weights over `pairs`
// pairs of depths (zeroed first when `first`).
template <size_t Rows>
ODNN_AVX2 void multiply_block(const WideRows& wide, const int8_t* weights, size_t pairs, int32_t* sums, bool first) {
  constexpr size_t stride = kMaxGroupBlocks * kExactInt8Columns;
  __m256i low[Rows], high[Rows]; // in registers: every loop over the rows unrolled
#pragma GCC unroll 4
  for (size_t r = 0; r < Rows; ++r) {
    low[r] = first ? _mm256_setzero_si256() : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums + r * stride));
    high[r] =
        first ? _mm256_setzero_si256() : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums + r * stride + 8));
  }
  for (size_t p = 0; p < pairs; ++p) {
    const int8_t* pair = weights + p * 2 * kExactInt8Columns;
    const __m256i w_low = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pair)));
    const __m256i w_high = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pair + 16)));
#pragma GCC unroll 4
    for (size_t r = 0; r < Rows; ++r) {
      int32_t both;
      std::memcpy(&both, &wide[r][2 * p], sizeof(both));
      const __m256i x = _mm256_set1_epi32(both);
      low[r] = _mm256_add_epi32(low[r], _mm256_madd_epi16(x, w_low));
      high[r] = _mm256_add_epi32(high[r], _mm256_madd_epi16(x, w_high));
    }
  }
#pragma GCC unroll 4
  for (size_t r = 0; r < Rows; ++r) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums + r * stride), low[r]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums + r * stride + 8), high[r]);
  }
}

ODNN_AVX2 void multiply(
    size_t rows, const WideRows& wide, const int8_t* weights, size_t pairs, int32_t* sums, bool first) {
  switch (rows) {
    case 4:
      return multiply_block<4>(wide, weights, pairs, sums, first);
    case 3:
      return multiply_block<3>(wide, weights, pairs, sums, first);
    case 2:
      return multiply_block<2>(wide, weights, pairs, sums, first);
    default:
      return multiply_block<1>(wide, weights, pairs, sums, first);
  }
}

// The first `columns` (<= 8) lanes.
ODNN_AVX2 __m256i lanes(size_t columns) {
  const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(columns)), index);
}

// dst row = sums * scales (+ bias) for `columns` columns from `column`, 8 at a time.
ODNN_AVX2 void finish_row(
    const ExactInt8MatmulOperands& operands, const int32_t* sums, size_t column, size_t columns, float* dst) {
  for (size_t c = 0; c < columns; c += 8) {
    const size_t count = std::min<size_t>(8, columns - c);
    const __m256i mask = lanes(count);
    const __m256 sum = _mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums + c)));
    __m256 value = _mm256_mul_ps(sum, _mm256_maskload_ps(operands.scales + column + c, mask));
    if (operands.bias != nullptr) {
      value = _mm256_add_ps(value, _mm256_maskload_ps(operands.bias + column + c, mask));
    }
    _mm256_maskstore_ps(dst + column + c, mask, value);
  }
}

ODNN_AVX2 void matmul_avx2(
    const ExactInt8MatmulShape& shape, const ExactInt8MatmulOperands& operands, const ExactInt8Tile& tile) {
  const size_t padded_k = exact_int8_padded_depth(shape.k);
  const size_t block_bytes = padded_k * kExactInt8Columns;
  const size_t group = std::clamp<size_t>(kGroupBytes / block_bytes, 1, kMaxGroupBlocks);
  alignas(32) WideRows wide;
  alignas(32) Sums sums;
  for (size_t g = tile.block_begin; g < tile.block_end; g += group) {
    const size_t blocks = std::min(group, tile.block_end - g);
    for (size_t r0 = tile.row_begin; r0 < tile.row_end; r0 += kRowsPerStep) {
      const size_t rows = std::min(kRowsPerStep, tile.row_end - r0);
      for (size_t k0 = 0; k0 < padded_k; k0 += kDepthChunk) {
        const size_t depth = std::min(kDepthChunk, padded_k - k0);
        widen_rows(shape, operands.src, r0, rows, k0, depth, wide);
        for (size_t b = 0; b < blocks; ++b) {
          const int8_t* weights = operands.weights + (g + b) * block_bytes + k0 * kExactInt8Columns;
          multiply(rows, wide, weights, depth / 2, &sums[0][b * kExactInt8Columns], k0 == 0);
        }
      }
      const size_t column = g * kExactInt8Columns;
      const size_t columns = std::min(blocks * kExactInt8Columns, shape.n - column);
      for (size_t r = 0; r < rows; ++r) {
        finish_row(operands, sums[r], column, columns, operands.dst + (r0 + r) * shape.n);
      }
    }
  }
}

} // namespace

void exact_int8_matmul(
    const ExactInt8MatmulShape& shape, const ExactInt8MatmulOperands& operands, const ExactInt8Tile& tile) {
  matmul_avx2(shape, operands, tile);
}

} // namespace executorch::backends::onednn
