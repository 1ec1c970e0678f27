// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// The host kernels' shared vector math on 16 and 8 f32 lanes: horizontal sums and the exponential
// (softmax rows, GELU, cached attention). In .cpp files only.
#pragma once

#include <immintrin.h>
#include <iterator>

#include "VectorTargets.h"

namespace executorch::backends::onednn {

// Across the lanes, in halves.
ODNN_AVX512 inline float horizontal_sum(__m512 v) {
  const __m256 eight = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 four = _mm_add_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1));
  four = _mm_add_ps(four, _mm_movehl_ps(four, four));
  return _mm_cvtss_f32(_mm_add_ss(four, _mm_shuffle_ps(four, four, 1)));
}

ODNN_AVX2 inline float horizontal_sum(__m256 v) {
  __m128 four = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  four = _mm_add_ps(four, _mm_movehl_ps(four, four));
  return _mm_cvtss_f32(_mm_add_ss(four, _mm_shuffle_ps(four, four, 1)));
}

// exp(x) within about 1 ulp: x = n ln2 + r, |r| <= ln2 / 2, exp(r) by its Taylor series to r^7 and
// 2^n applied exactly by scalef. Below -104 the result is 0 (as exp(-inf)); a NaN stays NaN (max
// and min return their second operand when one is NaN).
ODNN_AVX512 inline __m512 exp16(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
  x = _mm512_min_ps(_mm512_set1_ps(88.7228f), x);
  const __m512 n = _mm512_roundscale_ps(
      _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// 2^exponent for exponent in [-126, 127].
ODNN_AVX2 inline __m256 power_of_two(__m256i exponent) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(exponent, _mm256_set1_epi32(127)), 23));
}

// 1/k! for k = 0..7: exp's Taylor series.
inline constexpr float kInverseFactorials[] = {
    1.0f, 1.0f, 1.0f / 2.0f, 1.0f / 6.0f, 1.0f / 24.0f, 1.0f / 120.0f, 1.0f / 720.0f, 1.0f / 5040.0f};

// exp(x) = 2^n exp(r) for x within float's range: n = round(x / ln2), and exp(r), |r| <= ln2 / 2, by
// its Taylor series to r^kDegree.
struct ExpParts8 {
  __m256 n;
  __m256 mantissa;
};
template <size_t kDegree = 7>
ODNN_AVX2 inline ExpParts8 exp_parts8(__m256 x) {
  static_assert(kDegree < std::size(kInverseFactorials));
  const __m256 n = _mm256_round_ps(
      _mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187045e-06f), r);
  __m256 p = _mm256_set1_ps(kInverseFactorials[kDegree]);
  for (size_t k = kDegree; k-- > 0;) {
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kInverseFactorials[k]));
  }
  return {n, p};
}

// exp16's method; 2^n (n in [-150, 128]) applied as two exact powers of two, AVX2 having no scalef.
ODNN_AVX2 inline __m256 exp8(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-104.0f), x);
  x = _mm256_min_ps(_mm256_set1_ps(88.7228f), x);
  const ExpParts8 parts = exp_parts8(x);
  const __m256i whole = _mm256_cvtps_epi32(parts.n);
  const __m256i half = _mm256_srai_epi32(whole, 1);
  return _mm256_mul_ps(_mm256_mul_ps(parts.mantissa, power_of_two(half)), power_of_two(_mm256_sub_epi32(whole, half)));
}

} // namespace executorch::backends::onednn
