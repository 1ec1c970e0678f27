// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
#include "Int4Widening.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "VectorTargets.h" // each vector path runs only where shape.isa says so

namespace executorch::backends::onednn {
namespace {

constexpr float kRatioOne = 2048.0f; // r_g's fixed point: 2^11

int16_t fixed_ratio(float scale, float ratio_per_scale) {
  return static_cast<int16_t>(std::nearbyint(scale * ratio_per_scale));
}

// vpmulhrsw of 16 q by r16: round(16 q r16 / 2^15), ties up.
int8_t widened(int q, int16_t ratio) {
  return static_cast<int8_t>((16 * q * int32_t{ratio} + (1 << 14)) >> 15);
}

void widen_row_scalar(
    const WidenedInt4Shape& shape, const uint8_t* row, const float* scales, float per_scale, int8_t* out) {
  int16_t ratio = 0;
  for (size_t k = 0; k < shape.k; ++k) {
    if (k % shape.group == 0) {
      ratio = fixed_ratio(scales[k / shape.group], per_scale);
    }
    const uint8_t byte = row[k / 2];
    const int q = static_cast<int8_t>(static_cast<uint8_t>(k % 2 == 0 ? byte << 4 : byte & 0xF0)) >> 4;
    out[k] = widened(q, ratio);
  }
}

// 64 values a step: the 32 bytes' nibbles as 16-bit lanes holding 16 q (lanes j: values 2j and
// 2j + 1), times the step's two groups' ratios (lanes 0-15: values 0-31), then interleaved back.
ODNN_AVX512 void widen_row_avx512(
    const WidenedInt4Shape& shape, const uint8_t* row, const float* scales, float per_scale, int8_t* out) {
  const __m512i low_nibbles = _mm512_set1_epi16(0x000F);
  const __m512i high_nibbles = _mm512_set1_epi16(0x00F0);
  const __m512i low_bytes = _mm512_set1_epi16(0x00FF);
  for (size_t k = 0; k < shape.k; k += 64) {
    const __m512i bytes = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + k / 2)));
    const __m512i even = _mm512_srai_epi16(_mm512_slli_epi16(_mm512_and_si512(bytes, low_nibbles), 12), 8);
    const __m512i odd = _mm512_srai_epi16(_mm512_slli_epi16(_mm512_and_si512(bytes, high_nibbles), 8), 8);
    const int16_t first = fixed_ratio(scales[k / shape.group], per_scale);
    const int16_t second = fixed_ratio(scales[(k + 32) / shape.group], per_scale);
    const __m512i ratios =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(first)), _mm256_set1_epi16(second), 1);
    const __m512i even_w = _mm512_mulhrs_epi16(even, ratios);
    const __m512i odd_w = _mm512_mulhrs_epi16(odd, ratios);
    const __m512i words = _mm512_or_si512(_mm512_and_si512(even_w, low_bytes), _mm512_slli_epi16(odd_w, 8));
    _mm512_storeu_si512(out + k, words);
  }
}

// 32 values (one group) a step, as above on 16 bytes.
ODNN_AVX2 void widen_row_avx2(
    const WidenedInt4Shape& shape, const uint8_t* row, const float* scales, float per_scale, int8_t* out) {
  const __m256i low_nibbles = _mm256_set1_epi16(0x000F);
  const __m256i high_nibbles = _mm256_set1_epi16(0x00F0);
  const __m256i low_bytes = _mm256_set1_epi16(0x00FF);
  for (size_t k = 0; k < shape.k; k += 32) {
    const __m256i bytes = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k / 2)));
    const __m256i even = _mm256_srai_epi16(_mm256_slli_epi16(_mm256_and_si256(bytes, low_nibbles), 12), 8);
    const __m256i odd = _mm256_srai_epi16(_mm256_slli_epi16(_mm256_and_si256(bytes, high_nibbles), 8), 8);
    const __m256i ratios = _mm256_set1_epi16(fixed_ratio(scales[k / shape.group], per_scale));
    const __m256i even_w = _mm256_mulhrs_epi16(even, ratios);
    const __m256i odd_w = _mm256_mulhrs_epi16(odd, ratios);
    const __m256i words = _mm256_or_si256(_mm256_and_si256(even_w, low_bytes), _mm256_slli_epi16(odd_w, 8));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k), words);
  }
}

} // namespace

size_t WidenedInt4Shape::block_weight_bytes() const {
  return (columns * k + 63) / 64 * 64;
}

bool widened_column_scale(const float* scales, size_t groups, float* column_scale) {
  float largest = 0.0f;
  for (size_t g = 0; g < groups; ++g) {
    if (!std::isfinite(scales[g])) {
      return false;
    }
    largest = std::max(largest, std::abs(scales[g]));
  }
  *column_scale = largest == 0.0f ? 1.0f : largest * (8.0f / 127.0f);
  // A grid so fine that r_g's factor (kRatioOne / s_col) overflows is refused with the non-finite ones.
  return std::isfinite(*column_scale) && *column_scale > 0.0f && std::isfinite(kRatioOne / *column_scale);
}

void widen_int4_rows(
    const WidenedInt4Shape& shape,
    const uint8_t* weights,
    const GroupScales& scales,
    const float* column_scales,
    size_t begin,
    size_t end,
    int8_t* out) {
  ScaleRows scale_rows(scales, shape.k / shape.group);
  for (size_t r = begin; r < end; ++r) {
    const uint8_t* row = weights + r * (shape.k / 2);
    const float* row_scales = scale_rows(r);
    const float per_scale = kRatioOne / column_scales[r];
    int8_t* widened_row = out + (r - begin) * shape.k;
    if (shape.isa == RowIsa::avx512 && vector_widening(shape.k, shape.group)) {
      widen_row_avx512(shape, row, row_scales, per_scale, widened_row);
    } else if (shape.isa == RowIsa::avx2 && vector_widening(shape.k, shape.group)) {
      widen_row_avx2(shape, row, row_scales, per_scale, widened_row);
    } else {
      widen_row_scalar(shape, row, row_scales, per_scale, widened_row);
    }
  }
}

void widened_int4_terms(
    const WidenedInt4Shape& shape,
    const uint8_t* weights,
    const GroupScales& scales,
    const float* column_scales,
    float* terms,
    size_t begin,
    size_t end) {
  std::vector<int8_t> row(shape.k);
  for (size_t r = begin; r < end; ++r) {
    widen_int4_rows(shape, weights, scales, column_scales, r, r + 1, row.data());
    int64_t sum = 0;
    for (const int8_t w : row) {
      sum += w;
    }
    terms[r] = column_scales[r] * static_cast<float>(sum);
  }
}

} // namespace executorch::backends::onednn
