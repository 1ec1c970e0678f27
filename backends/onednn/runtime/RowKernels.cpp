// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
#include "RowKernels.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>

#include "HostLoops.h"

#include <oneapi/dnnl/dnnl.h>

#include "VectorMath.h"
#include "VectorTargets.h"

// The AVX-512 and AVX2 kernels (VectorTargets.h) run only for rows whose `isa` host_row_isa() set.
// The two are written separately rather than from one template: a CPU without AVX-512 cannot run the
// AVX-512 ones, so changing them blind from an AVX2 machine is avoided.

namespace executorch::backends::onednn {
namespace {

constexpr size_t kLanes = 16;

ODNN_AVX512 inline __mmask16 tail_mask(size_t count) {
  return count >= kLanes ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << count) - 1u);
}

// Across the 16 lanes.
ODNN_AVX512 inline float horizontal_max(__m512 v) {
  const __m256 eight = _mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 four = _mm_max_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1));
  four = _mm_max_ps(four, _mm_movehl_ps(four, four));
  return _mm_cvtss_f32(_mm_max_ss(four, _mm_shuffle_ps(four, four, 1)));
}

// Masked-off lanes read as `fill`.
ODNN_AVX512 inline __m512 load(const void* row, bool bf16, size_t at, __mmask16 mask, __m512 fill) {
  if (bf16) {
    const __m256i half = _mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(row) + at);
    const __m512 value = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));
    return _mm512_mask_blend_ps(mask, fill, value);
  }
  return _mm512_mask_loadu_ps(fill, mask, static_cast<const float*>(row) + at);
}

// f32 -> bf16 rounds to nearest even, NaN stays a quiet NaN, as oneDNN converts.
ODNN_AVX512 inline void store(void* row, bool bf16, size_t at, __mmask16 mask, __m512 value) {
  if (!bf16) {
    _mm512_mask_storeu_ps(static_cast<float*>(row) + at, mask, value);
    return;
  }
  const __m512i bits = _mm512_castps_si512(value);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(value, value, _CMP_UNORD_Q);
  rounded = _mm512_mask_mov_epi32(rounded, nan, _mm512_set1_epi32(0x7FC0));
  _mm256_mask_storeu_epi16(static_cast<uint16_t*>(row) + at, mask, _mm512_cvtepi32_epi16(rounded));
}

// x op y for add, sub, mul and div: one IEEE operation a lane, for floats and vectors alike (GCC's
// vector operators), inlined into each width's target (by reference: a vector by value would be a
// call's ABI).
template <BinaryAlg Alg, typename V>
[[gnu::always_inline]] inline void combine(const V& x, const V& y, V& out) {
  if constexpr (Alg == BinaryAlg::Add) {
    out = x + y;
  } else if constexpr (Alg == BinaryAlg::Sub) {
    out = x - y;
  } else if constexpr (Alg == BinaryAlg::Mul) {
    out = x * y;
  } else {
    out = x / y;
  }
}

ODNN_AVX512 void convert_values_avx512(bool to_bf16, const void* src, void* dst, size_t begin, size_t end) {
  for (size_t at = begin; at < end; at += kLanes) {
    const __mmask16 mask = tail_mask(end - at);
    store(dst, to_bf16, at, mask, load(src, !to_bf16, at, mask, _mm512_setzero_ps()));
  }
}

template <BinaryAlg Alg>
ODNN_AVX512 void binary_bf16_avx512(const uint16_t* a, const uint16_t* b, uint16_t* dst, size_t n) {
  for (size_t at = 0; at < n; at += kLanes) {
    const __mmask16 mask = tail_mask(n - at);
    const __m512 x = load(a, true, at, mask, _mm512_setzero_ps()), y = load(b, true, at, mask, _mm512_setzero_ps());
    __m512 z;
    combine<Alg>(x, y, z);
    store(dst, true, at, mask, z);
  }
}

// x = src (+ mask) for lanes of `mask` (masked-off lanes: -inf).
ODNN_AVX512 inline __m512 input(const void* src, bool bf16, const float* mask_row, size_t at, __mmask16 mask) {
  const __m512 minus_infinity = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512 x = load(src, bf16, at, mask, minus_infinity);
  return mask_row == nullptr ? x : _mm512_add_ps(x, _mm512_maskz_loadu_ps(mask, mask_row + at));
}

// One row: the first `valid` values take part, the rest of the `extent` become 0.
ODNN_AVX512 void softmax_row_avx512(
    const SoftmaxRows& rows, const void* src, void* dst, const float* mask_row, size_t valid) {
  float max = -std::numeric_limits<float>::infinity();
  __mmask16 nan = 0; // max() drops NaNs: they are looked for separately
  if (valid > 0) {
    __m512 running_max = _mm512_set1_ps(max);
    for (size_t at = 0; at < valid; at += kLanes) {
      const __m512 x = input(src, rows.src_bf16, mask_row, at, tail_mask(valid - at));
      nan |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
      running_max = _mm512_max_ps(running_max, x);
    }
    max = nan != 0 ? std::numeric_limits<float>::quiet_NaN() : horizontal_max(running_max);
  }
  if (max == -std::numeric_limits<float>::infinity()) {
    valid = 0; // fully masked: zeros, or NaN as PyTorch's plain softmax gives
  }
  const __m512 shift = _mm512_set1_ps(max);
  // An f32 dst keeps the exponentials for the final scaling; a bf16 one would round them, so they
  // are computed again instead.
  __m512 sum = _mm512_setzero_ps();
  for (size_t at = 0; at < valid; at += kLanes) {
    const __mmask16 mask = tail_mask(valid - at);
    const __m512 e = exp16(_mm512_sub_ps(input(src, rows.src_bf16, mask_row, at, mask), shift));
    sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(mask, e));
    if (!rows.dst_bf16 && !rows.log) {
      store(dst, false, at, mask, e);
    }
  }
  if (rows.log) {
    const __m512 log_sum = _mm512_set1_ps(std::log(horizontal_sum(sum)));
    for (size_t at = 0; at < valid; at += kLanes) {
      const __mmask16 mask = tail_mask(valid - at);
      const __m512 shifted = _mm512_sub_ps(input(src, rows.src_bf16, mask_row, at, mask), shift);
      store(dst, rows.dst_bf16, at, mask, _mm512_sub_ps(shifted, log_sum));
    }
  }
  const __m512 scale = _mm512_set1_ps(1.0f / horizontal_sum(sum));
  for (size_t at = 0; at < valid && !rows.log; at += kLanes) {
    const __mmask16 mask = tail_mask(valid - at);
    const __m512 e = rows.dst_bf16 ? exp16(_mm512_sub_ps(input(src, rows.src_bf16, mask_row, at, mask), shift))
                                   : load(dst, false, at, mask, _mm512_setzero_ps());
    store(dst, rows.dst_bf16, at, mask, _mm512_mul_ps(e, scale));
  }
  const bool nan_row = valid == 0 && !rows.zero_fully_masked;
  const __m512 rest = nan_row ? _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN()) : _mm512_setzero_ps();
  for (size_t at = valid; at < rows.extent; at += kLanes) {
    store(dst, rows.dst_bf16, at, tail_mask(rows.extent - at), rest);
  }
}

// AVX2: 8 lanes. A row's last partial vector goes through an 8-value buffer (AVX2 has no masked
// bf16 load or store).
constexpr size_t kLanes2 = 8;

ODNN_AVX2 inline float horizontal_max(__m256 v) {
  __m128 four = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  four = _mm_max_ps(four, _mm_movehl_ps(four, four));
  return _mm_cvtss_f32(_mm_max_ss(four, _mm_shuffle_ps(four, four, 1)));
}

// `count` values from `at` (all 8 when count >= 8); the missing lanes read as `fill`.
ODNN_AVX2 inline __m256 load8(const void* row, bool bf16, size_t at, size_t count, float fill) {
  if (count >= kLanes2) {
    if (bf16) {
      const __m128i half = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(row) + at));
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(half), 16));
    }
    return _mm256_loadu_ps(static_cast<const float*>(row) + at);
  }
  float buffer[kLanes2];
  for (size_t i = 0; i < kLanes2; ++i) {
    buffer[i] = i >= count ? fill
                : bf16     ? from_bf16_bits(static_cast<const uint16_t*>(row)[at + i])
                           : static_cast<const float*>(row)[at + i];
  }
  return _mm256_loadu_ps(buffer);
}

// f32 -> bf16 as to_bf16_bits() converts (nearest even, NaN a quiet NaN).
ODNN_AVX2 inline void store8(void* row, bool bf16, size_t at, size_t count, __m256 value) {
  if (count >= kLanes2 && !bf16) {
    _mm256_storeu_ps(static_cast<float*>(row) + at, value);
    return;
  }
  if (count >= kLanes2) {
    const __m256i bits = _mm256_castps_si256(value);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7FFF))), 16);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(value, value, _CMP_UNORD_Q));
    rounded = _mm256_blendv_epi8(rounded, _mm256_set1_epi32(0x7FC0), nan);
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(rounded), _mm256_extracti128_si256(rounded, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<uint16_t*>(row) + at), packed);
    return;
  }
  float buffer[kLanes2];
  _mm256_storeu_ps(buffer, value);
  for (size_t i = 0; i < count; ++i) {
    if (bf16) {
      static_cast<uint16_t*>(row)[at + i] = to_bf16_bits(buffer[i]);
    } else {
      static_cast<float*>(row)[at + i] = buffer[i];
    }
  }
}

ODNN_AVX2 void convert_values_avx2(bool to_bf16, const void* src, void* dst, size_t begin, size_t end) {
  for (size_t at = begin; at < end; at += kLanes2) {
    const size_t count = std::min(kLanes2, end - at);
    store8(dst, to_bf16, at, count, load8(src, !to_bf16, at, count, 0.0f));
  }
}

template <BinaryAlg Alg>
ODNN_AVX2 void binary_bf16_avx2(const uint16_t* a, const uint16_t* b, uint16_t* dst, size_t n) {
  for (size_t at = 0; at < n; at += kLanes2) {
    const size_t count = std::min(kLanes2, n - at);
    const __m256 x = load8(a, true, at, count, 0.0f), y = load8(b, true, at, count, 0.0f);
    __m256 z;
    combine<Alg>(x, y, z);
    store8(dst, true, at, count, z);
  }
}

// x = src (+ mask) for `count` lanes from `at` (the others: -inf).
ODNN_AVX2 inline __m256 input8(const void* src, bool bf16, const float* mask_row, size_t at, size_t count) {
  const __m256 x = load8(src, bf16, at, count, -std::numeric_limits<float>::infinity());
  return mask_row == nullptr ? x : _mm256_add_ps(x, load8(mask_row, false, at, count, 0.0f));
}

// softmax_row_avx512's algorithm on 8 lanes.
ODNN_AVX2 void softmax_row_avx2(
    const SoftmaxRows& rows, const void* src, void* dst, const float* mask_row, size_t valid) {
  float max = -std::numeric_limits<float>::infinity();
  if (valid > 0) {
    __m256 running_max = _mm256_set1_ps(max);
    int nan = 0; // max() drops NaNs: they are looked for separately
    for (size_t at = 0; at < valid; at += kLanes2) {
      const __m256 x = input8(src, rows.src_bf16, mask_row, at, valid - at);
      nan |= _mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
      running_max = _mm256_max_ps(running_max, x);
    }
    max = nan != 0 ? std::numeric_limits<float>::quiet_NaN() : horizontal_max(running_max);
  }
  if (max == -std::numeric_limits<float>::infinity()) {
    valid = 0;
  }
  const __m256 shift = _mm256_set1_ps(max);
  __m256 sum = _mm256_setzero_ps(); // lanes past `valid` read -inf: their exponential adds 0
  for (size_t at = 0; at < valid; at += kLanes2) {
    const __m256 e = exp8(_mm256_sub_ps(input8(src, rows.src_bf16, mask_row, at, valid - at), shift));
    sum = _mm256_add_ps(sum, e);
    if (!rows.dst_bf16 && !rows.log) {
      store8(dst, false, at, valid - at, e);
    }
  }
  if (rows.log) {
    const __m256 log_sum = _mm256_set1_ps(std::log(horizontal_sum(sum)));
    for (size_t at = 0; at < valid; at += kLanes2) {
      const __m256 shifted = _mm256_sub_ps(input8(src, rows.src_bf16, mask_row, at, valid - at), shift);
      store8(dst, rows.dst_bf16, at, valid - at, _mm256_sub_ps(shifted, log_sum));
    }
  }
  const __m256 scale = _mm256_set1_ps(1.0f / horizontal_sum(sum));
  for (size_t at = 0; at < valid && !rows.log; at += kLanes2) {
    const __m256 e = rows.dst_bf16 ? exp8(_mm256_sub_ps(input8(src, rows.src_bf16, mask_row, at, valid - at), shift))
                                   : load8(dst, false, at, valid - at, 0.0f);
    store8(dst, rows.dst_bf16, at, valid - at, _mm256_mul_ps(e, scale));
  }
  const bool nan_row = valid == 0 && !rows.zero_fully_masked;
  const __m256 rest = _mm256_set1_ps(nan_row ? std::numeric_limits<float>::quiet_NaN() : 0.0f);
  for (size_t at = valid; at < rows.extent; at += kLanes2) {
    store8(dst, rows.dst_bf16, at, rows.extent - at, rest);
  }
}

ODNN_AVX2 void rms_norm_row_avx2(const RmsNormRows& rows, const void* src, void* dst, const float* weight) {
  const size_t extent = rows.extent;
  __m256 squares = _mm256_setzero_ps();
  for (size_t at = 0; at < extent; at += kLanes2) {
    const __m256 x = load8(src, rows.src_bf16, at, extent - at, 0.0f);
    squares = _mm256_fmadd_ps(x, x, squares);
  }
  const float mean = horizontal_sum(squares) / static_cast<float>(extent);
  const __m256 scale = _mm256_set1_ps(1.0f / std::sqrt(mean + rows.eps));
  for (size_t at = 0; at < extent; at += kLanes2) {
    __m256 y = _mm256_mul_ps(load8(src, rows.src_bf16, at, extent - at, 0.0f), scale);
    if (weight != nullptr) {
      y = _mm256_mul_ps(y, load8(weight, false, at, extent - at, 0.0f));
    }
    store8(dst, rows.dst_bf16, at, extent - at, y);
  }
}

// The same, one value at a time, for CPUs (or instruction-set caps) without AVX2.
void softmax_row_scalar(const SoftmaxRows& rows, const void* src, void* dst, const float* mask_row, size_t valid) {
  const auto x = [&](size_t e) {
    const float value =
        rows.src_bf16 ? from_bf16_bits(static_cast<const uint16_t*>(src)[e]) : static_cast<const float*>(src)[e];
    return mask_row == nullptr ? value : value + mask_row[e];
  };
  const auto put = [&](size_t e, float value) {
    if (rows.dst_bf16) {
      static_cast<uint16_t*>(dst)[e] = to_bf16_bits(value);
    } else {
      static_cast<float*>(dst)[e] = value;
    }
  };
  float max = -std::numeric_limits<float>::infinity();
  bool nan = false;
  for (size_t e = 0; e < valid; ++e) {
    const float value = x(e);
    nan = nan || value != value;
    max = value > max ? value : max;
  }
  if (max == -std::numeric_limits<float>::infinity() && !nan) {
    valid = 0;
  }
  float sum = 0.0f;
  for (size_t e = 0; e < valid; ++e) {
    sum += std::exp(x(e) - max);
  }
  const float scale = nan ? std::numeric_limits<float>::quiet_NaN() : 1.0f / sum;
  const float log_sum = nan ? std::numeric_limits<float>::quiet_NaN() : std::log(sum);
  for (size_t e = 0; e < valid; ++e) {
    put(e, rows.log ? (x(e) - max) - log_sum : std::exp(x(e) - max) * scale);
  }
  const float rest = valid == 0 && !rows.zero_fully_masked ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
  for (size_t e = valid; e < rows.extent; ++e) {
    put(e, rest);
  }
}

ODNN_AVX512 void rms_norm_row_avx512(const RmsNormRows& rows, const void* src, void* dst, const float* weight) {
  const size_t extent = rows.extent;
  __m512 squares = _mm512_setzero_ps();
  for (size_t at = 0; at < extent; at += kLanes) {
    const __m512 x = load(src, rows.src_bf16, at, tail_mask(extent - at), _mm512_setzero_ps());
    squares = _mm512_fmadd_ps(x, x, squares);
  }
  const float mean = horizontal_sum(squares) / static_cast<float>(extent);
  const __m512 scale = _mm512_set1_ps(1.0f / std::sqrt(mean + rows.eps));
  for (size_t at = 0; at < extent; at += kLanes) {
    const __mmask16 mask = tail_mask(extent - at);
    __m512 y = _mm512_mul_ps(load(src, rows.src_bf16, at, mask, _mm512_setzero_ps()), scale);
    if (weight != nullptr) {
      y = _mm512_mul_ps(y, _mm512_maskz_loadu_ps(mask, weight + at));
    }
    store(dst, rows.dst_bf16, at, mask, y);
  }
}

void rms_norm_row_scalar(const RmsNormRows& rows, const void* src, void* dst, const float* weight) {
  const auto x = [&](size_t e) {
    return rows.src_bf16 ? from_bf16_bits(static_cast<const uint16_t*>(src)[e]) : static_cast<const float*>(src)[e];
  };
  float squares = 0.0f;
  for (size_t e = 0; e < rows.extent; ++e) {
    squares += x(e) * x(e);
  }
  const float scale = 1.0f / std::sqrt(squares / static_cast<float>(rows.extent) + rows.eps);
  for (size_t e = 0; e < rows.extent; ++e) {
    const float y = x(e) * scale * (weight != nullptr ? weight[e] : 1.0f);
    if (rows.dst_bf16) {
      static_cast<uint16_t*>(dst)[e] = to_bf16_bits(y);
    } else {
      static_cast<float*>(dst)[e] = y;
    }
  }
}

// 2 sqrt(2 / pi) and 2 sqrt(2 / pi) * 0.044715: sigmoid(2u) = (1 + tanh(u)) / 2.
constexpr float kGeluLinear = 1.5957691216057308f;
constexpr float kGeluCubic = 0.0713548162726009f;
// Below this the exponential overflows: the sigmoid is 0, and x * 0 keeps -inf's NaN.
constexpr float kGeluSaturated = -88.0f;

ODNN_AVX2 inline __m256 gelu_tanh8(__m256 x) {
  const __m256 slope = _mm256_fmadd_ps(_mm256_mul_ps(x, x), _mm256_set1_ps(kGeluCubic), _mm256_set1_ps(kGeluLinear));
  const __m256 z = _mm256_mul_ps(x, slope);
  const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), z));
  const __m256 gelu = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  const __m256 saturated = _mm256_cmp_ps(z, _mm256_set1_ps(kGeluSaturated), _CMP_LT_OQ);
  return _mm256_blendv_ps(gelu, _mm256_mul_ps(x, _mm256_setzero_ps()), saturated);
}

// erfc(z) for z >= 0 as t exp(P(t) - z^2), t = 1 / (1 + z / 2): the Chebyshev fit of Numerical Recipes
// (2nd ed., 6.2), relative error below 1.2e-7 at every z, so GELU's lower tail keeps its relative
// accuracy where 1 + erf(x / sqrt(2)) would cancel.
constexpr float kErfcFit[] = {
    0.17087277f,
    -0.82215223f,
    1.48851587f,
    -1.13520398f,
    0.27886807f,
    -0.18628806f,
    0.09678418f,
    0.37409196f,
    1.00002368f,
    -1.26551223f};

ODNN_AVX2 inline __m256 erfc_nonnegative8(__m256 z) {
  const __m256 t = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_fmadd_ps(z, _mm256_set1_ps(0.5f), _mm256_set1_ps(1.0f)));
  __m256 p = _mm256_set1_ps(kErfcFit[0]);
  for (size_t i = 1; i < std::size(kErfcFit); ++i) {
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(kErfcFit[i]));
  }
  return _mm256_mul_ps(t, exp8(_mm256_fnmadd_ps(z, z, p)));
}

// x Phi(x), Phi(x) = erfc(-x / sqrt(2)) / 2: 1 - erfc(|x| / sqrt(2)) / 2 for x >= 0, its complement below.
ODNN_AVX2 inline __m256 gelu_erf8(__m256 x) {
  const __m256 magnitude = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
  const __m256 half_tail =
      _mm256_mul_ps(_mm256_set1_ps(0.5f), erfc_nonnegative8(_mm256_mul_ps(magnitude, _mm256_set1_ps(0.70710678f))));
  const __m256 upper = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ);
  return _mm256_mul_ps(x, _mm256_blendv_ps(half_tail, _mm256_sub_ps(_mm256_set1_ps(1.0f), half_tail), upper));
}

// 1 / (1 + exp(-z)) as PyTorch's sigmoid: a NaN stays NaN, 1 above 87.3, 0 below -88.38 (PyTorch's
// gives subnormals of at most 4.2e-39 down to -88.72). exp(-z) as exp8 on an argument clamped
// to [-87.3, 88.73], where one power of two 2^n, n in [-126, 128], scales it: 2^128 reads as +inf,
// which makes the sigmoid 0 with no compare. Half exp8's integer work, no blend, and the series to r^6
// (sigmoid and swish within 3.2e-7 relative of a double reference on [-40, 20]), one term fewer: with the loop of
// activation_values_avx2, a swish costs 0.54 ns a value a thread where it cost 1.51 (Zen 3), and
// EfficientNet-B0's SiLUs are 6 million values a call.
ODNN_AVX2 inline __m256 logistic8(__m256 z) {
  __m256 x = _mm256_sub_ps(_mm256_setzero_ps(), z);
  x = _mm256_max_ps(_mm256_set1_ps(-87.3f), _mm256_min_ps(_mm256_set1_ps(88.7228f), x));
  const ExpParts8 parts = exp_parts8<6>(x);
  const __m256 e = _mm256_mul_ps(parts.mantissa, power_of_two(_mm256_cvtps_epi32(parts.n)));
  return _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

// max and min return their second operand when one is a NaN: the bound goes first, so a NaN stays.
ODNN_AVX2 inline __m256 hardsigmoid8(__m256 alpha, __m256 beta, __m256 z) {
  return _mm256_min_ps(_mm256_set1_ps(1.0f), _mm256_max_ps(_mm256_setzero_ps(), _mm256_fmadd_ps(alpha, z, beta)));
}

ODNN_AVX2 inline __m256 activation8(Activation activation, __m256 alpha, __m256 beta, __m256 x) {
  switch (activation) {
    case Activation::logistic:
      return logistic8(x);
    case Activation::swish:
      return _mm256_mul_ps(x, logistic8(_mm256_mul_ps(alpha, x)));
    case Activation::hardsigmoid:
      return hardsigmoid8(alpha, beta, x);
    case Activation::hardswish:
      return _mm256_mul_ps(x, hardsigmoid8(alpha, beta, x));
    case Activation::gelu_tanh:
      return gelu_tanh8(x);
    case Activation::gelu_erf:
      return gelu_erf8(x);
  }
  return x;
}

template <Activation kind>
ODNN_AVX2 void activation_values_avx2(
    float alpha, float beta, bool bf16, const void* src, void* dst, size_t begin, size_t end) {
  const __m256 a = _mm256_set1_ps(alpha), b = _mm256_set1_ps(beta);
  // Computed side by side, their long dependency chains overlap: the tanh GELU at 1.8x the speed of
  // one vector a step (Zen 3).
  constexpr size_t kVectors = 4;
  size_t at = begin;
  for (; at + kVectors * kLanes2 <= end; at += kVectors * kLanes2) {
    __m256 values[kVectors];
    for (size_t v = 0; v < kVectors; ++v) {
      values[v] = activation8(kind, a, b, load8(src, bf16, at + v * kLanes2, kLanes2, 0.0f));
    }
    for (size_t v = 0; v < kVectors; ++v) {
      store8(dst, bf16, at + v * kLanes2, kLanes2, values[v]);
    }
  }
  for (; at < end; at += kLanes2) {
    const size_t count = std::min(kLanes2, end - at);
    store8(dst, bf16, at, count, activation8(kind, a, b, load8(src, bf16, at, count, 0.0f)));
  }
}

float activation_value(Activation activation, float alpha, float beta, float x) {
  const auto logistic = [](float z) { return 1.0f / (1.0f + std::exp(-z)); }; // 0 where exp overflows
  const auto hard = [&](float z) {
    const float y = alpha * z + beta;
    return y != y ? y : std::min(std::max(y, 0.0f), 1.0f);
  };
  switch (activation) {
    case Activation::logistic:
      return logistic(x);
    case Activation::swish:
      return x * logistic(alpha * x);
    case Activation::hardsigmoid:
      return hard(x);
    case Activation::hardswish:
      return x * hard(x);
    case Activation::gelu_tanh: {
      const float z = x * (kGeluLinear + kGeluCubic * x * x);
      return z < kGeluSaturated ? x * 0.0f : x / (1.0f + std::exp(-z));
    }
    case Activation::gelu_erf:
      return x * 0.5f * std::erfc(-x * 0.70710678f);
  }
  return x;
}

} // namespace

RowIsa host_row_isa() noexcept {
  const auto allows = [](dnnl_cpu_isa_t isa) {
    const auto needed = static_cast<unsigned>(isa);
    return (static_cast<unsigned>(dnnl_get_effective_cpu_isa()) & needed) == needed;
  };
  // oneDNN's avx2 level implies FMA.
  return allows(dnnl_cpu_isa_avx512_core) ? RowIsa::avx512 : allows(dnnl_cpu_isa_avx2) ? RowIsa::avx2 : RowIsa::scalar;
}

void softmax_rows(const SoftmaxRows& rows, const void* src, void* dst, const float* mask, size_t begin, size_t end) {
  const size_t src_bytes = rows.extent * (rows.src_bf16 ? 2 : 4);
  const size_t dst_bytes = rows.extent * (rows.dst_bf16 ? 2 : 4);
  for (size_t row = begin; row < end; ++row) {
    const size_t query = rows.first_query + row % rows.block_rows;
    const float* mask_row = nullptr;
    if (rows.has_mask) {
      const size_t group = row / rows.block_rows;
      const size_t head = group % (rows.kv_heads * rows.heads_per_kv);
      const size_t batch = group / (rows.kv_heads * rows.heads_per_kv);
      mask_row = mask + batch * rows.mask_batch_stride + head * rows.mask_head_stride + query * rows.mask_query_stride;
    }
    const size_t valid = rows.causal ? std::min(rows.extent, query + 1) : rows.extent;
    const void* src_row = static_cast<const uint8_t*>(src) + row * src_bytes;
    void* dst_row = static_cast<uint8_t*>(dst) + row * dst_bytes;
    switch (rows.isa) {
      case RowIsa::avx512:
        softmax_row_avx512(rows, src_row, dst_row, mask_row, valid);
        break;
      case RowIsa::avx2:
        softmax_row_avx2(rows, src_row, dst_row, mask_row, valid);
        break;
      case RowIsa::scalar:
        softmax_row_scalar(rows, src_row, dst_row, mask_row, valid);
        break;
    }
  }
}

void rms_norm_rows(const RmsNormRows& rows, const void* src, void* dst, const float* weight, size_t begin, size_t end) {
  const size_t src_bytes = rows.extent * (rows.src_bf16 ? 2 : 4);
  const size_t dst_bytes = rows.extent * (rows.dst_bf16 ? 2 : 4);
  const float* row_weight = rows.has_weight ? weight : nullptr;
  for (size_t row = begin; row < end; ++row) {
    const void* src_row = static_cast<const uint8_t*>(src) + row * src_bytes;
    void* dst_row = static_cast<uint8_t*>(dst) + row * dst_bytes;
    switch (rows.isa) {
      case RowIsa::avx512:
        rms_norm_row_avx512(rows, src_row, dst_row, row_weight);
        break;
      case RowIsa::avx2:
        rms_norm_row_avx2(rows, src_row, dst_row, row_weight);
        break;
      case RowIsa::scalar:
        rms_norm_row_scalar(rows, src_row, dst_row, row_weight);
        break;
    }
  }
}

void convert_values(RowIsa isa, bool to_bf16, const void* src, void* dst, size_t begin, size_t end) {
  if (isa == RowIsa::avx512) {
    convert_values_avx512(to_bf16, src, dst, begin, end);
  } else if (isa == RowIsa::avx2) {
    convert_values_avx2(to_bf16, src, dst, begin, end);
  } else if (to_bf16) {
    for (size_t i = begin; i < end; ++i) {
      static_cast<uint16_t*>(dst)[i] = to_bf16_bits(static_cast<const float*>(src)[i]);
    }
  } else {
    for (size_t i = begin; i < end; ++i) {
      static_cast<float*>(dst)[i] = from_bf16_bits(static_cast<const uint16_t*>(src)[i]);
    }
  }
}

template <BinaryAlg Alg>
void binary_bf16(RowIsa isa, const uint16_t* a, const uint16_t* b, uint16_t* dst, size_t n) {
  if (isa == RowIsa::avx512) {
    binary_bf16_avx512<Alg>(a, b, dst, n);
  } else if (isa == RowIsa::avx2) {
    binary_bf16_avx2<Alg>(a, b, dst, n);
  } else {
    for (size_t i = 0; i < n; ++i) {
      float z;
      combine<Alg>(from_bf16_bits(a[i]), from_bf16_bits(b[i]), z);
      dst[i] = to_bf16_bits(z);
    }
  }
}

void binary_values_bf16(RowIsa isa, int64_t alg, const uint16_t* a, const uint16_t* b, uint16_t* dst, size_t n) {
  switch (static_cast<BinaryAlg>(alg)) {
    case BinaryAlg::Add:
      return binary_bf16<BinaryAlg::Add>(isa, a, b, dst, n);
    case BinaryAlg::Sub:
      return binary_bf16<BinaryAlg::Sub>(isa, a, b, dst, n);
    case BinaryAlg::Mul:
      return binary_bf16<BinaryAlg::Mul>(isa, a, b, dst, n);
    default:
      return binary_bf16<BinaryAlg::Div>(isa, a, b, dst, n);
  }
}

void activation_values(
    RowIsa isa,
    Activation activation,
    float alpha,
    float beta,
    bool bf16,
    const void* src,
    void* dst,
    size_t begin,
    size_t end) {
  if (isa != RowIsa::scalar) {
    switch (activation) {
      case Activation::logistic:
        return activation_values_avx2<Activation::logistic>(alpha, beta, bf16, src, dst, begin, end);
      case Activation::swish:
        return activation_values_avx2<Activation::swish>(alpha, beta, bf16, src, dst, begin, end);
      case Activation::hardsigmoid:
        return activation_values_avx2<Activation::hardsigmoid>(alpha, beta, bf16, src, dst, begin, end);
      case Activation::hardswish:
        return activation_values_avx2<Activation::hardswish>(alpha, beta, bf16, src, dst, begin, end);
      case Activation::gelu_tanh:
        return activation_values_avx2<Activation::gelu_tanh>(alpha, beta, bf16, src, dst, begin, end);
      case Activation::gelu_erf:
        return activation_values_avx2<Activation::gelu_erf>(alpha, beta, bf16, src, dst, begin, end);
    }
  }
  for (size_t i = begin; i < end; ++i) {
    if (bf16) {
      const float x = from_bf16_bits(static_cast<const uint16_t*>(src)[i]);
      static_cast<uint16_t*>(dst)[i] = to_bf16_bits(activation_value(activation, alpha, beta, x));
    } else {
      static_cast<float*>(dst)[i] = activation_value(activation, alpha, beta, static_cast<const float*>(src)[i]);
    }
  }
}

} // namespace executorch::backends::onednn
