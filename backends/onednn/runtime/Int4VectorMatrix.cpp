// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
#include "Int4VectorMatrix.h"

#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "Int4Steps.h"
#include "VectorTargets.h"

// Compiled for AVX-512 and for AVX2 with FMA (VectorTargets.h), with VNNI too where named (Int4Steps.h);
// each runs only where the shape's isa and vnni allow it. One template serves the VNNI and the non-VNNI
// kernel of a width, so its target names both; the non-VNNI instantiation calls only maddubs and madd,
// and the compiler makes no VNNI instruction the source does not name (checked with objdump: vpdpbusd
// appears in the VNNI instantiations only). Code that every vector path runs, VNNI or not, and the
// f32-row kernels are compiled without VNNI (ODNN_AVX2, ODNN_AVX512).

namespace executorch::backends::onednn {
namespace {

// Row r's value k, in [-8, 7].
int32_t weight_at(const uint8_t* row, size_t k) {
  const int32_t nibble = (row[k / 2] >> (4 * (k % 2))) & 0x0F;
  return (nibble ^ 8) - 8;
}

// The sum of the signed nibbles of `bytes` bytes. With each nibble n stored as two's complement, its
// value is (n ^ 8) - 8: SSE2's byte sums (baseline x86-64) add the flipped nibbles 16 bytes at a time.
int32_t byte_group_sum(const uint8_t* bytes, size_t count) {
  int32_t sum = -16 * static_cast<int32_t>(count);
  size_t b = 0;
  const __m128i flip = _mm_set1_epi8(static_cast<char>(0x88));
  const __m128i low = _mm_set1_epi8(0x0F);
  __m128i lanes = _mm_setzero_si128();
  for (; b + 16 <= count; b += 16) {
    const __m128i x = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + b)), flip);
    const __m128i nibbles = _mm_add_epi8(_mm_and_si128(x, low), _mm_and_si128(_mm_srli_epi16(x, 4), low));
    lanes = _mm_add_epi64(lanes, _mm_sad_epu8(nibbles, _mm_setzero_si128()));
  }
  sum += _mm_cvtsi128_si32(lanes) + _mm_cvtsi128_si32(_mm_unpackhi_epi64(lanes, lanes));
  for (; b < count; ++b) {
    sum += ((bytes[b] & 0x0F) ^ 8) + ((bytes[b] >> 4) ^ 8);
  }
  return sum;
}

// Group g of a row whose groups split bytes (an odd group size).
int32_t odd_group_sum(const uint8_t* row, size_t g, size_t group) {
  int32_t sum = 0;
  for (size_t k = g * group; k < (g + 1) * group; ++k) {
    sum += weight_at(row, k);
  }
  return sum;
}

void finish(const Int4RowOperands& operands, size_t r, float sum) {
  const float value = operands.row_scale * (sum - static_cast<float>(operands.zero_point) * operands.terms[r]);
  operands.dst[r] = operands.bias != nullptr ? value + operands.bias[r] : value;
}

// Group g's products on row r, exact. An even group takes whole bytes.
int32_t group_dot_scalar(const Int4MatrixShape& shape, const int8_t* q, const uint8_t* row, size_t g) {
  const size_t begin = g * shape.group, end = begin + shape.group;
  int32_t dot = 0;
  if (shape.group % 2 == 0) {
    for (size_t k = begin; k < end; k += 2) {
      const int32_t byte = row[k / 2];
      dot += q[k] * (((byte & 0x0F) ^ 8) - 8) + q[k + 1] * (((byte >> 4) ^ 8) - 8);
    }
  } else {
    for (size_t k = begin; k < end; ++k) {
      dot += q[k] * weight_at(row, k);
    }
  }
  return dot;
}

void rows_scalar(const Int4MatrixShape& shape, const Int4RowOperands& operands, size_t begin, size_t end) {
  const size_t groups = shape.k / shape.group;
  ScaleRows scale_rows(operands.scales, groups);
  for (size_t r = begin; r < end; ++r) {
    const uint8_t* row = operands.weights + r * (shape.k / 2);
    const float* scales = scale_rows(r);
    float sum = 0.0f;
    for (size_t g = 0; g < groups; ++g) {
      sum += scales[g] * static_cast<float>(group_dot_scalar(shape, operands.q, row, g));
    }
    finish(operands, r, sum);
  }
}

// The row as the vector kernels read it. They multiply the weights as w + 8 (the nibble xor 8, in
// [0, 15]: unsigned bytes, as dpbusd and maddubs want their first operand) by the signed q, and take
// the surplus 8 * sum q off per group. They go through k in steps of 128 values (64 bytes of weights, a
// cache line), then one step of 64 where k % 128 == 64.
struct PreparedRow {
  LineAlignedBytes q;                   // per step: its values at even k, then those at odd k
  std::vector<float> surplus;           // per group: 8 * sum of its q
  std::vector<uint32_t> segment_groups; // per 32 values: their group (ScaleKind::per_segment)
};

// How a step's lanes find their scales: one per group of several steps, one per step, or one per 32
// values (groups of 32, of 64, or of other multiples of 32, through a table).
enum class ScaleKind { per_group, per_step, per_32, per_64, per_segment };

ScaleKind scale_kind(size_t group) {
  return group == kStep       ? ScaleKind::per_step
         : group % kStep == 0 ? ScaleKind::per_group
         : group == 32        ? ScaleKind::per_32
         : group == 64        ? ScaleKind::per_64
                              : ScaleKind::per_segment;
}

// Per 32 values of q: [16 at even k | 16 at odd k] in each 128-bit lane.
ODNN_AVX2 inline __m256i split_even_odd(const int8_t* at) {
  const __m256i order = _mm256_setr_epi8(
      0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  const __m256i lanes = _mm256_shuffle_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at)), order);
  return _mm256_permute4x64_epi64(lanes, 0xD8); // [16 even | 16 odd]
}

// Sum of 32 values of q, as four partial sums of q + 128.
ODNN_AVX2 inline __m256i biased_sums(const int8_t* at) {
  const __m256i biased = _mm256_xor_si256(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at)), _mm256_set1_epi8(static_cast<char>(0x80)));
  return _mm256_sad_epu8(biased, _mm256_setzero_si256());
}

} // namespace

ODNN_AVX2 void arrange_for_steps(const int8_t* q, size_t k, int8_t* out) {
  for (size_t begin = 0; begin < k; begin += kStep) {
    const size_t half = std::min(kStep, k - begin) / 2; // 64, or 32 in a last step of 64
    for (size_t j = 0; j < half; j += 32) {
      const __m256i first = split_even_odd(q + begin + 2 * j), second = split_even_odd(q + begin + 2 * j + 32);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + begin + j), _mm256_permute2x128_si256(first, second, 0x20));
      _mm256_storeu_si256(
          reinterpret_cast<__m256i*>(out + begin + half + j), _mm256_permute2x128_si256(first, second, 0x31));
    }
  }
}

namespace {

// Both vector widths run on CPUs with AVX2: one preparation serves them.
ODNN_AVX2 void prepare_into(const Int4MatrixShape& shape, const int8_t* q, PreparedRow& prepared) {
  const size_t groups = shape.k / shape.group;
  arrange_for_steps(q, shape.k, prepared.q.resize(shape.k));
  prepared.surplus.resize(groups);
  for (size_t g = 0; g < groups; ++g) {
    __m256i sums = _mm256_setzero_si256();
    for (size_t k = g * shape.group; k < (g + 1) * shape.group; k += kSegment) {
      sums = _mm256_add_epi64(sums, biased_sums(q + k));
    }
    const __m128i two = _mm_add_epi64(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
    const int64_t sum = _mm_cvtsi128_si64(_mm_add_epi64(two, _mm_unpackhi_epi64(two, two)));
    prepared.surplus[g] = static_cast<float>(8 * (sum - 128 * static_cast<int64_t>(shape.group)));
  }
  if (scale_kind(shape.group) == ScaleKind::per_segment) {
    prepared.segment_groups.resize(shape.k / kSegment);
    for (size_t i = 0; i < shape.k / kSegment; ++i) {
      prepared.segment_groups[i] = static_cast<uint32_t>(i * kSegment / shape.group);
    }
  }
}

// A buffer per thread: no allocation per call once it has grown.
const PreparedRow& prepare(const Int4MatrixShape& shape, const int8_t* q) {
  thread_local PreparedRow prepared;
  prepare_into(shape, q, prepared);
  return prepared;
}

// ---- AVX-512 ----
// A step's 64 bytes of weights make two vectors, the low nibbles (k even, with the step's first 64
// prepared values) and the high ones (k odd, with the next 64). Lane i of a product holds k in
// [8i, 8i + 8): lanes 4s to 4s + 3 hold segment s of the step.

// Step products added to `even_sum` and `odd_sum`: two dpbusd chains, or one chain when both name the
// same variable. Without VNNI all go to `even_sum`: two pairs of products add to at most
// 4 * 15 * 128 in magnitude, so no 16-bit sum saturates.
template <bool Vnni>
ODNN_AVX512_VNNI inline void step_avx512(
    const uint8_t* weights, const int8_t* row, const uint8_t* last_line, __m512i& even_sum, __m512i& odd_sum) {
  fetch_ahead(weights, last_line);
  const __m512i bytes = _mm512_loadu_si512(weights);
  const __m512i even = biased_nibbles_avx512(bytes), odd = biased_nibbles_avx512(_mm512_srli_epi16(bytes, 4));
  if constexpr (Vnni) {
    even_sum = _mm512_dpbusd_epi32(even_sum, even, _mm512_loadu_si512(row));
    odd_sum = _mm512_dpbusd_epi32(odd_sum, odd, _mm512_loadu_si512(row + 64));
  } else {
    const __m512i pairs = _mm512_add_epi16(
        _mm512_maddubs_epi16(even, _mm512_loadu_si512(row)), _mm512_maddubs_epi16(odd, _mm512_loadu_si512(row + 64)));
    even_sum = _mm512_add_epi32(even_sum, _mm512_madd_epi16(pairs, _mm512_set1_epi16(1)));
  }
}

// Step t's lanes alone, in f32.
template <bool Vnni>
ODNN_AVX512_VNNI inline __m512 step_lanes_avx512(
    const uint8_t* weights, const int8_t* row, size_t t, const uint8_t* last_line) {
  __m512i sum = _mm512_setzero_si512();
  step_avx512<Vnni>(weights + t * (kStep / 2), row + t * kStep, last_line, sum, sum);
  return _mm512_cvtepi32_ps(sum);
}

// A group of `steps` whole steps at `weights` and `row`, in f32: two steps at a time into four sums.
template <bool Vnni>
ODNN_AVX512_VNNI inline __m512 group_lanes_avx512(
    const uint8_t* weights, const int8_t* row, size_t steps, const uint8_t* last_line) {
  __m512i a = _mm512_setzero_si512(), b = _mm512_setzero_si512(), c = _mm512_setzero_si512(),
          d = _mm512_setzero_si512();
  for (size_t t = 0; t < steps; t += 2) {
    step_avx512<Vnni>(weights + t * (kStep / 2), row + t * kStep, last_line, a, b);
    if (t + 1 < steps) {
      step_avx512<Vnni>(weights + (t + 1) * (kStep / 2), row + (t + 1) * kStep, last_line, c, d);
    }
  }
  return _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_add_epi32(a, b), _mm512_add_epi32(c, d)));
}

// Step t's four segment scales, each over its four lanes.
template <ScaleKind kind>
ODNN_AVX512_VNNI inline __m512 step_scales_avx512(const float* scales, const PreparedRow& prepared, size_t t) {
  if constexpr (kind == ScaleKind::per_step) {
    return _mm512_set1_ps(scales[t]);
  } else if constexpr (kind == ScaleKind::per_64) {
    const __m128 two = _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales + 2 * t)));
    return _mm512_permutexvar_ps(
        _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0), _mm512_castps128_ps512(two));
  } else {
    __m128 four;
    if constexpr (kind == ScaleKind::per_32) {
      four = _mm_loadu_ps(scales + 4 * t);
    } else {
      const uint32_t* groups = prepared.segment_groups.data() + 4 * t;
      four = _mm_setr_ps(scales[groups[0]], scales[groups[1]], scales[groups[2]], scales[groups[3]]);
    }
    return _mm512_permutexvar_ps(
        _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0), _mm512_castps128_ps512(four));
  }
}

// The last 64 values where k % 128 == 64, prepared as 32 at even k then 32 at odd k, scaled: its 32
// bytes of weights make one vector [low nibbles | high nibbles]; lanes 0-3 and 8-11 hold its first
// segment, 4-7 and 12-15 its second.
template <bool Vnni>
ODNN_AVX512_VNNI inline __m512 tail_avx512(
    const Int4MatrixShape& shape, const uint8_t* weights, const float* scales, const int8_t* row) {
  const size_t begin = shape.k - kStep / 2;
  const __m512i both =
      _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(weights + begin / 2)));
  const __m512i nibbles = biased_nibbles_avx512(_mm512_mask_srli_epi16(both, 0xFFFF0000u, both, 4));
  const __m512i x = _mm512_loadu_si512(row + begin);
  __m512i dot;
  if constexpr (Vnni) {
    dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), nibbles, x);
  } else {
    dot = _mm512_madd_epi16(_mm512_maddubs_epi16(nibbles, x), _mm512_set1_epi16(1));
  }
  const __m512 scale = _mm512_mask_blend_ps(
      0xF0F0, _mm512_set1_ps(scales[begin / shape.group]), _mm512_set1_ps(scales[(begin + kSegment) / shape.group]));
  return _mm512_mul_ps(_mm512_cvtepi32_ps(dot), scale);
}

template <bool Vnni, ScaleKind kind>
ODNN_AVX512_VNNI void rows_avx512(
    const Int4MatrixShape& shape,
    const Int4RowOperands& operands,
    const PreparedRow& prepared,
    size_t begin,
    size_t end) {
  const size_t groups = shape.k / shape.group, steps = shape.k / kStep;
  const int8_t* row = prepared.q.data();
  const float* surplus = prepared.surplus.data();
  const uint8_t* last_line = last_line_of(shape.k, operands.weights, end);
  ScaleRows scale_rows(operands.scales, groups);
  for (size_t r = begin; r < end; ++r) {
    const uint8_t* weights = operands.weights + r * (shape.k / 2);
    const float* scales = scale_rows(r);
    // Two sums, so that consecutive groups or steps do not wait on each other's FMA.
    __m512 sum0 = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
    if constexpr (kind == ScaleKind::per_group) {
      const size_t group_bytes = shape.group / 2, group_steps = shape.group / kStep;
      for (size_t g = 0; g < groups; g += 2) {
        sum0 = _mm512_fmadd_ps(
            group_lanes_avx512<Vnni>(weights + g * group_bytes, row + g * shape.group, group_steps, last_line),
            _mm512_set1_ps(scales[g]),
            sum0);
        if (g + 1 < groups) {
          sum1 = _mm512_fmadd_ps(
              group_lanes_avx512<Vnni>(
                  weights + (g + 1) * group_bytes, row + (g + 1) * shape.group, group_steps, last_line),
              _mm512_set1_ps(scales[g + 1]),
              sum1);
        }
      }
    } else {
      for (size_t t = 0; t < steps; t += 2) {
        sum0 = _mm512_fmadd_ps(
            step_lanes_avx512<Vnni>(weights, row, t, last_line), step_scales_avx512<kind>(scales, prepared, t), sum0);
        if (t + 1 < steps) {
          sum1 = _mm512_fmadd_ps(
              step_lanes_avx512<Vnni>(weights, row, t + 1, last_line),
              step_scales_avx512<kind>(scales, prepared, t + 1),
              sum1);
        }
      }
      if (shape.k % kStep != 0) {
        sum1 = _mm512_add_ps(sum1, tail_avx512<Vnni>(shape, weights, scales, row));
      }
    }
    __m512 sum = _mm512_add_ps(sum0, sum1);
    for (size_t g = 0; g < groups; g += 16) {
      const __mmask16 mask = first_lanes(groups - g);
      sum = _mm512_fnmadd_ps(_mm512_maskz_loadu_ps(mask, scales + g), _mm512_maskz_loadu_ps(mask, surplus + g), sum);
    }
    finish(operands, r, _mm512_reduce_add_ps(sum));
  }
}

// ---- AVX2 ----
// A step is two halves of 32 bytes of weights, each making two vectors: its low nibbles (with 32 of
// the step's even-k values) and its high ones (with 32 of the odd-k values). Lane i of a half's
// product holds k in [8i, 8i + 8) of the half: lanes 0-3 its first segment, 4-7 its second.

ODNN_AVX2_VNNI inline __m256i load256(const int8_t* at) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at));
}

// As step_avx512, for a half.
template <bool Vnni>
ODNN_AVX2_VNNI inline void half_avx2(
    const uint8_t* weights, const int8_t* even, const int8_t* odd, __m256i& even_sum, __m256i& odd_sum) {
  const __m256i biased = _mm256_xor_si256(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(weights)), _mm256_set1_epi8(static_cast<char>(0x88)));
  const __m256i low = _mm256_and_si256(biased, _mm256_set1_epi8(0x0F));
  const __m256i high = _mm256_and_si256(_mm256_srli_epi16(biased, 4), _mm256_set1_epi8(0x0F));
  if constexpr (Vnni) {
    even_sum = _mm256_dpbusd_avx_epi32(even_sum, low, load256(even));
    odd_sum = _mm256_dpbusd_avx_epi32(odd_sum, high, load256(odd));
  } else {
    const __m256i pairs =
        _mm256_add_epi16(_mm256_maddubs_epi16(low, load256(even)), _mm256_maddubs_epi16(high, load256(odd)));
    even_sum = _mm256_add_epi32(even_sum, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
}

// A half's lanes alone, in f32.
template <bool Vnni>
ODNN_AVX2_VNNI inline __m256 half_lanes_avx2(const uint8_t* weights, const int8_t* even, const int8_t* odd) {
  __m256i sum = _mm256_setzero_si256();
  half_avx2<Vnni>(weights, even, odd, sum, sum);
  return _mm256_cvtepi32_ps(sum);
}

// As group_lanes_avx512: each step into four sums.
template <bool Vnni>
ODNN_AVX2_VNNI inline __m256 group_lanes_avx2(
    const uint8_t* weights, const int8_t* row, size_t steps, const uint8_t* last_line) {
  __m256i a = _mm256_setzero_si256(), b = _mm256_setzero_si256(), c = _mm256_setzero_si256(),
          d = _mm256_setzero_si256();
  for (size_t t = 0; t < steps; ++t) {
    const uint8_t* at = weights + t * (kStep / 2);
    const int8_t* values = row + t * kStep;
    fetch_ahead(at, last_line);
    half_avx2<Vnni>(at, values, values + 64, a, b);
    half_avx2<Vnni>(at + 32, values + 32, values + 96, c, d);
  }
  return _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_add_epi32(a, b), _mm256_add_epi32(c, d)));
}

ODNN_AVX2 inline __m256 two_scales_avx2(float first, float second) {
  return _mm256_blend_ps(_mm256_set1_ps(first), _mm256_set1_ps(second), 0xF0);
}

ODNN_AVX2 inline float horizontal_sum_avx2(__m256 v) {
  __m128 four = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  four = _mm_add_ps(four, _mm_movehl_ps(four, four));
  return _mm_cvtss_f32(_mm_add_ss(four, _mm_shuffle_ps(four, four, 1)));
}

template <bool Vnni, ScaleKind kind>
ODNN_AVX2_VNNI void rows_avx2(
    const Int4MatrixShape& shape,
    const Int4RowOperands& operands,
    const PreparedRow& prepared,
    size_t begin,
    size_t end) {
  const size_t groups = shape.k / shape.group, steps = shape.k / kStep;
  const int8_t* row = prepared.q.data();
  const float* surplus = prepared.surplus.data();
  const uint8_t* last_line = last_line_of(shape.k, operands.weights, end);
  ScaleRows scale_rows(operands.scales, groups);
  for (size_t r = begin; r < end; ++r) {
    const uint8_t* weights = operands.weights + r * (shape.k / 2);
    const float* scales = scale_rows(r);
    __m256 sum0 = _mm256_setzero_ps(), sum1 = _mm256_setzero_ps();
    if constexpr (kind == ScaleKind::per_group) {
      const size_t group_bytes = shape.group / 2, group_steps = shape.group / kStep;
      for (size_t g = 0; g < groups; g += 2) {
        sum0 = _mm256_fmadd_ps(
            group_lanes_avx2<Vnni>(weights + g * group_bytes, row + g * shape.group, group_steps, last_line),
            _mm256_set1_ps(scales[g]),
            sum0);
        if (g + 1 < groups) {
          sum1 = _mm256_fmadd_ps(
              group_lanes_avx2<Vnni>(
                  weights + (g + 1) * group_bytes, row + (g + 1) * shape.group, group_steps, last_line),
              _mm256_set1_ps(scales[g + 1]),
              sum1);
        }
      }
    } else {
      for (size_t t = 0; t < steps; ++t) {
        const uint8_t* at = weights + t * (kStep / 2);
        const int8_t* values = row + t * kStep;
        fetch_ahead(at, last_line);
        const __m256 first = half_lanes_avx2<Vnni>(at, values, values + 64);
        const __m256 second = half_lanes_avx2<Vnni>(at + 32, values + 32, values + 96);
        float four[4]; // the step's segment scales
        if constexpr (kind == ScaleKind::per_step) {
          four[0] = four[1] = four[2] = four[3] = scales[t];
        } else if constexpr (kind == ScaleKind::per_64) {
          four[0] = four[1] = scales[2 * t];
          four[2] = four[3] = scales[2 * t + 1];
        } else if constexpr (kind == ScaleKind::per_32) {
          std::memcpy(four, scales + 4 * t, sizeof(four));
        } else {
          for (size_t i = 0; i < 4; ++i) {
            four[i] = scales[prepared.segment_groups[4 * t + i]];
          }
        }
        sum0 = _mm256_fmadd_ps(first, two_scales_avx2(four[0], four[1]), sum0);
        sum1 = _mm256_fmadd_ps(second, two_scales_avx2(four[2], four[3]), sum1);
      }
      if (shape.k % kStep != 0) {
        // The last 64 values, prepared as 32 at even k then 32 at odd k.
        const size_t tail = shape.k - kStep / 2;
        sum0 = _mm256_fmadd_ps(
            half_lanes_avx2<Vnni>(weights + tail / 2, row + tail, row + tail + 32),
            two_scales_avx2(scales[tail / shape.group], scales[(tail + kSegment) / shape.group]),
            sum0);
      }
    }
    __m256 sum = _mm256_add_ps(sum0, sum1);
    size_t g = 0;
    for (; g + 8 <= groups; g += 8) {
      sum = _mm256_fnmadd_ps(_mm256_loadu_ps(scales + g), _mm256_loadu_ps(surplus + g), sum);
    }
    float total = horizontal_sum_avx2(sum);
    for (; g < groups; ++g) {
      total -= scales[g] * surplus[g];
    }
    finish(operands, r, total);
  }
}

template <bool Vnni, ScaleKind kind>
void rows_vector(
    const Int4MatrixShape& shape,
    const Int4RowOperands& operands,
    const PreparedRow& prepared,
    size_t begin,
    size_t end) {
  if (shape.isa == RowIsa::avx512) {
    rows_avx512<Vnni, kind>(shape, operands, prepared, begin, end);
  } else {
    rows_avx2<Vnni, kind>(shape, operands, prepared, begin, end);
  }
}

template <bool Vnni>
void rows_vector(
    const Int4MatrixShape& shape,
    const Int4RowOperands& operands,
    const PreparedRow& prepared,
    size_t begin,
    size_t end) {
  switch (scale_kind(shape.group)) {
    case ScaleKind::per_group:
      return rows_vector<Vnni, ScaleKind::per_group>(shape, operands, prepared, begin, end);
    case ScaleKind::per_step:
      return rows_vector<Vnni, ScaleKind::per_step>(shape, operands, prepared, begin, end);
    case ScaleKind::per_32:
      return rows_vector<Vnni, ScaleKind::per_32>(shape, operands, prepared, begin, end);
    case ScaleKind::per_64:
      return rows_vector<Vnni, ScaleKind::per_64>(shape, operands, prepared, begin, end);
    case ScaleKind::per_segment:
      return rows_vector<Vnni, ScaleKind::per_segment>(shape, operands, prepared, begin, end);
  }
}

// Round to nearest even by the default rounding mode (cvtps2dq), as nearbyint; SSE2 is baseline
// x86-64. Values are clamped to [-512, 512] first, which changes no result after the clamp to int8.
inline __m128i round_to_int(__m128 v) {
  return _mm_cvtps_epi32(_mm_min_ps(_mm_max_ps(v, _mm_set1_ps(-512.0f)), _mm_set1_ps(512.0f)));
}

} // namespace

void quantize_row_affine_int8(const float* x, size_t k, int8_t* q, float* scale, int32_t* zero_point) {
  // min(min(x), 0) and max(max(x), 0) at once: the running extremes start at 0. Exponent bits all
  // ones mark a NaN or an infinity.
  __m128 low = _mm_setzero_ps(), high = _mm_setzero_ps();
  const __m128i exponent = _mm_set1_epi32(0x7F800000);
  __m128i non_finite = _mm_setzero_si128();
  size_t i = 0;
  for (; i + 4 <= k; i += 4) {
    const __m128 v = _mm_loadu_ps(x + i);
    low = _mm_min_ps(low, v);
    high = _mm_max_ps(high, v);
    non_finite = _mm_or_si128(non_finite, _mm_cmpeq_epi32(_mm_and_si128(_mm_castps_si128(v), exponent), exponent));
  }
  float lows[4], highs[4];
  _mm_storeu_ps(lows, low);
  _mm_storeu_ps(highs, high);
  float min_neg = std::fmin(std::fmin(lows[0], lows[1]), std::fmin(lows[2], lows[3]));
  float max_pos = std::fmax(std::fmax(highs[0], highs[1]), std::fmax(highs[2], highs[3]));
  bool finite = _mm_movemask_epi8(non_finite) == 0;
  for (; i < k; ++i) {
    finite = finite && std::isfinite(x[i]);
    min_neg = std::fmin(min_neg, x[i]);
    max_pos = std::fmax(max_pos, x[i]);
  }
  const float s = std::fmax((max_pos - min_neg) / 255.0f, FLT_MIN);
  if (!finite || !std::isfinite(s)) {
    *scale = std::numeric_limits<float>::quiet_NaN();
    *zero_point = 0;
    std::memset(q, 0, k);
    return;
  }
  const float zero = std::fmin(std::fmax(-128.0f - std::nearbyint(min_neg / s), -128.0f), 127.0f);
  *scale = s;
  *zero_point = static_cast<int32_t>(zero);
  const float inverse = 1.0f / s;
  const __m128 scaled = _mm_set1_ps(inverse);
  const __m128i zeros = _mm_set1_epi32(*zero_point);
  const auto quantize4 = [&](const float* at) {
    return _mm_add_epi32(round_to_int(_mm_mul_ps(_mm_loadu_ps(at), scaled)), zeros);
  };
  i = 0;
  for (; i + 16 <= k; i += 16) {
    // The packs saturate: the clamp to [-128, 127].
    const __m128i low8 = _mm_packs_epi32(quantize4(x + i), quantize4(x + i + 4));
    const __m128i high8 = _mm_packs_epi32(quantize4(x + i + 8), quantize4(x + i + 12));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm_packs_epi16(low8, high8));
  }
  for (; i < k; ++i) {
    const int32_t value = _mm_cvtsi128_si32(round_to_int(_mm_set_ss(x[i] * inverse))) + *zero_point;
    q[i] = static_cast<int8_t>(value < -128 ? -128 : value > 127 ? 127 : value);
  }
}

void quantize_rows_affine_int8(
    const float* x, size_t rows, size_t k, int8_t* q, float* scales, int32_t* zero_points, size_t begin, size_t end) {
  for (size_t m = begin; m < end && m < rows; ++m) {
    quantize_row_affine_int8(x + m * k, k, q + m * k, scales + m, zero_points + m);
  }
}

void center_rows_bf16(const int8_t* q, size_t k, const int32_t* zero_points, uint16_t* dst, size_t begin, size_t end) {
  for (size_t m = begin; m < end; ++m) {
    const int32_t zero_point = zero_points[m];
    for (size_t i = m * k; i < (m + 1) * k; ++i) {
      uint32_t bits;
      const float value = static_cast<float>(int32_t{q[i]} - zero_point);
      std::memcpy(&bits, &value, sizeof bits);
      dst[i] = static_cast<uint16_t>(bits >> 16);
    }
  }
}

void int4_column_terms(
    const Int4MatrixShape& shape,
    const uint8_t* weights,
    const GroupScales& scales,
    float* terms,
    size_t begin,
    size_t end) {
  const size_t groups = shape.k / shape.group;
  const size_t group_bytes = shape.group / 2;
  ScaleRows scale_rows(scales, groups);
  for (size_t r = begin; r < end; ++r) {
    const uint8_t* row = weights + r * (shape.k / 2);
    const float* row_scales = scale_rows(r);
    float sum = 0.0f;
    for (size_t g = 0; g < groups; ++g) {
      sum += row_scales[g] * static_cast<float>(
                                 shape.group % 2 == 0 ? byte_group_sum(row + g * group_bytes, group_bytes)
                                                      : odd_group_sum(row, g, shape.group));
    }
    terms[r] = sum;
  }
}

void int4_vector_matrix(const Int4MatrixShape& shape, const Int4RowOperands& operands, size_t begin, size_t end) {
  if (begin >= end) {
    return;
  }
  if (!shape.vectorized()) {
    rows_scalar(shape, operands, begin, end);
    return;
  }
  const PreparedRow& prepared = prepare(shape, operands.q);
  if (shape.vnni) {
    rows_vector<true>(shape, operands, prepared, begin, end);
  } else {
    rows_vector<false>(shape, operands, prepared, begin, end);
  }
}

void subtract_zero_point_terms(
    float* dst,
    size_t rows,
    size_t n,
    const float* row_scales,
    const int32_t* zero_points,
    float zero_point_offset,
    const float* terms,
    size_t begin,
    size_t end) {
  for (size_t m = begin; m < end && m < rows; ++m) {
    const float factor = row_scales[m] * (static_cast<float>(zero_points[m]) + zero_point_offset);
    float* out = dst + m * n;
    for (size_t r = 0; r < n; ++r) {
      out[r] -= factor * terms[r];
    }
  }
}

// ---- f32 rows times int4 weights (4w) ----

namespace {

// Nibble n's value as f32: n, or n - 16 from 8 on.
alignas(64) constexpr float kNibbleValues[16] = {0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1};

struct PreparedFloatRow {
  std::vector<float> row;             // in the order the kernel reads the weights
  std::vector<float> zero_points;     // AVX-512: a weight row's zero points, as f32
  std::vector<uint32_t> chunk_groups; // AVX-512, groups of other multiples of 32: per 32 values, their group
  std::vector<uint8_t> tables;        // AVX2: a weight row's byte tables, 16 bytes a group
};

void finish_float(const Int4FloatRowOperands& operands, size_t r, float sum) {
  operands.dst[r] = operands.bias != nullptr ? sum + operands.bias[r] : sum;
}

// Adds row[k] * W[r, k] into two sums, of even and of odd k, each in order of k (one sum would wait on
// every add), then adds those; W from a table of the group's 16 dequantized weights. An even group
// takes whole bytes.
void float_rows_scalar(const Int4MatrixShape& shape, const Int4FloatRowOperands& operands, size_t begin, size_t end) {
  const size_t groups = shape.k / shape.group;
  const float* x = operands.row;
  ScaleRows scale_rows(operands.scales, groups);
  for (size_t r = begin; r < end; ++r) {
    const uint8_t* row = operands.weights + r * (shape.k / 2);
    const float* scales = scale_rows(r);
    float even = 0.0f, odd = 0.0f;
    for (size_t g = 0; g < groups; ++g) {
      const float scale = scales[g];
      const float zero = operands.zero_points != nullptr ? operands.zero_points[r * groups + g] : 0.0f;
      float table[16];
      for (size_t n = 0; n < 16; ++n) {
        table[n] = (kNibbleValues[n] - zero) * scale;
      }
      const size_t first = g * shape.group, last = first + shape.group;
      if (shape.group % 2 == 0) {
        for (size_t i = first / 2; i < last / 2; ++i) {
          even += x[2 * i] * table[row[i] & 0x0F];
          odd += x[2 * i + 1] * table[row[i] >> 4];
        }
      } else {
        for (size_t k = first; k < last; ++k) {
          (k % 2 == 0 ? even : odd) += x[k] * table[(row[k / 2] >> (4 * (k % 2))) & 0x0F];
        }
      }
    }
    finish_float(operands, r, even + odd);
  }
}

// ---- AVX-512 ----
// Per 32 values (16 bytes of weights, within one group): the bytes widened to int32 lanes index a
// table of the group's 16 dequantized weights by their low nibble (k even) and, shifted, by their high
// one (k odd); vpermps reads the low 4 bits of an index, so the low nibble needs no mask. Per 16
// bytes: a widening load, a shift, two permutes and two FMAs, plus a multiply (and with zero points a
// subtract) per group for its table.

// Per 32 values: the 16 at even k, then the 16 at odd k.
ODNN_AVX512 void prepare_float_avx512(const Int4MatrixShape& shape, const float* row, std::vector<float>& out) {
  out.resize(shape.k);
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  for (size_t c = 0; c < shape.k; c += kSegment) {
    const __m512 first = _mm512_loadu_ps(row + c), second = _mm512_loadu_ps(row + c + 16);
    _mm512_storeu_ps(out.data() + c, _mm512_permutex2var_ps(first, even, second));
    _mm512_storeu_ps(out.data() + c + 16, _mm512_permutex2var_ps(first, odd, second));
  }
}

// A weight row's zero points as f32, 16 at a time.
ODNN_AVX512 void zero_points_f32_avx512(const int8_t* zero_points, size_t groups, float* out) {
  for (size_t g = 0; g < groups; g += 16) {
    const __mmask16 mask = first_lanes(groups - g);
    const __m128i bytes = _mm_maskz_loadu_epi8(mask, zero_points + g);
    _mm512_mask_storeu_ps(out + g, mask, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes)));
  }
}

// Group g's weights by nibble: (value - zero point) * scale, as torchao's dequantize_affine makes them.
template <bool ZeroPoints>
ODNN_AVX512 inline __m512 group_table_avx512(__m512 nibbles, const float* scales, const float* zero_points, size_t g) {
  if constexpr (ZeroPoints) {
    nibbles = _mm512_sub_ps(nibbles, _mm512_set1_ps(zero_points[g]));
  }
  return _mm512_mul_ps(nibbles, _mm512_set1_ps(scales[g]));
}

// 32 values' products added to `even` (k even) and `odd`.
ODNN_AVX512 inline void chunk_avx512(const uint8_t* weights, const float* x, __m512 table, __m512& even, __m512& odd) {
  const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(weights)));
  even = _mm512_fmadd_ps(_mm512_permutexvar_ps(bytes, table), _mm512_loadu_ps(x), even);
  odd = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), table), _mm512_loadu_ps(x + 16), odd);
}

// How a step's four chunks find their tables: a group each (group 32), a group per two (group 64), a
// group per one or more whole steps (group % 128 == 0), or through the list of the chunks' groups.
enum class ChunkGroups { each, pairs, steps, listed };

// Where row `weights` prefetches from: kPrefetchBytes on, but no further than the call's last row, so
// that every line it fetches is the call's.
inline const uint8_t* prefetch_base(const uint8_t* weights, const uint8_t* last_row) {
  return last_row - weights > static_cast<ptrdiff_t>(kPrefetchBytes) ? weights + kPrefetchBytes : last_row;
}

// A step of 128 values, its chunks with tables t0 to t3.
ODNN_AVX512 inline void float_step_avx512(
    const uint8_t* weights,
    const float* x,
    __m512 t0,
    __m512 t1,
    __m512 t2,
    __m512 t3,
    __m512& a,
    __m512& b,
    __m512& c,
    __m512& d) {
  chunk_avx512(weights, x, t0, a, b);
  chunk_avx512(weights + 16, x + 32, t1, c, d);
  chunk_avx512(weights + 32, x + 64, t2, a, b);
  chunk_avx512(weights + 48, x + 96, t3, c, d);
}

template <bool ZeroPoints, ChunkGroups kind>
ODNN_AVX512 void float_rows_avx512(
    const Int4MatrixShape& shape,
    const Int4FloatRowOperands& operands,
    PreparedFloatRow& prepared,
    size_t begin,
    size_t end) {
  const size_t groups = shape.k / shape.group, steps = shape.k / kStep, row_bytes = shape.k / 2;
  const size_t step_bytes = kStep / 2;
  const float* x = prepared.row.data();
  const uint32_t* chunk_groups = prepared.chunk_groups.data();
  const uint8_t* last_row = operands.weights + (end - 1) * row_bytes;
  const __m512 nibbles = _mm512_load_ps(kNibbleValues);
  prepared.zero_points.resize(groups);
  float* zero_points = prepared.zero_points.data();
  ScaleRows scale_rows(operands.scales, groups);
  for (size_t r = begin; r < end; ++r) {
    const uint8_t* weights = operands.weights + r * row_bytes;
    const uint8_t* ahead = prefetch_base(weights, last_row);
    const float* scales = scale_rows(r);
    if constexpr (ZeroPoints) {
      zero_points_f32_avx512(operands.zero_points + r * groups, groups, zero_points);
    }
    // Two pairs of sums, alternating by chunk, so that consecutive chunks do not wait on each other.
    __m512 a = _mm512_setzero_ps(), b = _mm512_setzero_ps(), c = _mm512_setzero_ps(), d = _mm512_setzero_ps();
    if constexpr (kind == ChunkGroups::steps) {
      const size_t group_steps = shape.group / kStep;
      for (size_t g = 0, t = 0; g < groups; ++g) {
        const __m512 table = group_table_avx512<ZeroPoints>(nibbles, scales, zero_points, g);
        for (size_t i = 0; i < group_steps; ++i, ++t) {
          _mm_prefetch(reinterpret_cast<const char*>(ahead + t * step_bytes), _MM_HINT_T1);
          float_step_avx512(weights + t * step_bytes, x + t * kStep, table, table, table, table, a, b, c, d);
        }
      }
    } else {
      for (size_t t = 0; t < steps; ++t) {
        __m512 t0, t1, t2, t3;
        if constexpr (kind == ChunkGroups::each) {
          t0 = group_table_avx512<ZeroPoints>(nibbles, scales, zero_points, 4 * t);
          t1 = group_table_avx512<ZeroPoints>(nibbles, scales, zero_points, 4 * t + 1);
          t2 = group_table_avx512<ZeroPoints>(nibbles, scales, zero_points, 4 * t + 2);
          t3 = group_table_avx512<ZeroPoints>(nibbles, scales, zero_points, 4 * t + 3);
        } else if constexpr (kind == ChunkGroups::pairs) {
          t0 = t1 = group_table_avx512<ZeroPoints>(nibbles, scales, zero_points, 2 * t);
          t2 = t3 = group_table_avx512<ZeroPoints>(nibbles, scales, zero_points, 2 * t + 1);
        } else {
          const uint32_t* listed = chunk_groups + 4 * t;
          t0 = group_table_avx512<ZeroPoints>(nibbles, scales, zero_points, listed[0]);
          t1 = group_table_avx512<ZeroPoints>(nibbles, scales, zero_points, listed[1]);
          t2 = group_table_avx512<ZeroPoints>(nibbles, scales, zero_points, listed[2]);
          t3 = group_table_avx512<ZeroPoints>(nibbles, scales, zero_points, listed[3]);
        }
        _mm_prefetch(reinterpret_cast<const char*>(ahead + t * step_bytes), _MM_HINT_T1);
        float_step_avx512(weights + t * step_bytes, x + t * kStep, t0, t1, t2, t3, a, b, c, d);
      }
      if (shape.k % kStep != 0) { // the last 64 values: two chunks
        const size_t first = steps * kStep;
        _mm_prefetch(reinterpret_cast<const char*>(ahead + steps * step_bytes), _MM_HINT_T1);
        chunk_avx512(
            weights + steps * step_bytes,
            x + first,
            group_table_avx512<ZeroPoints>(nibbles, scales, zero_points, first / shape.group),
            a,
            b);
        chunk_avx512(
            weights + steps * step_bytes + kSegment / 2,
            x + first + kSegment,
            group_table_avx512<ZeroPoints>(nibbles, scales, zero_points, (first + kSegment) / shape.group),
            c,
            d);
      }
    }
    finish_float(operands, r, _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a, b), _mm512_add_ps(c, d))));
  }
}

// ---- AVX2 ----
// AVX2 has no 16-entry f32 permute. Per 64 values (a block: 32 bytes of weights, a 128-bit lane per
// 32 values): each weight byte becomes 16 * w (its nibble masked in place, in the top half of the
// byte) or, with zero points, 8 * (w - zero point) (a byte table per group, by vpshufb); vpshufb puts
// four such bytes at the top of four int32 lanes, which convert exactly to w * 2^28 or
// (w - zero point) * 2^27, and the row the kernel reads is the row times 2^-28 or 2^-27. Per 8
// values: a shuffle, a conversion and an FMA.

// How a block's two halves find their groups: group 32, a group each; a group whose size is a
// multiple of 64, one for the whole block; another multiple of 32, either.
enum class BlockGroups { two, one, either };

// Per block, eight vectors of 8: for q in 0..3, values 8q + 2j (j = 0..3) of the block's first half
// and of its second, times `factor`; then the same at 8q + 2j + 1.
ODNN_AVX2 void prepare_float_avx2(
    const Int4MatrixShape& shape, const float* row, float factor, std::vector<float>& out) {
  out.resize(shape.k);
  const __m256 scale = _mm256_set1_ps(factor);
  for (size_t b = 0; b < shape.k; b += 2 * kSegment) {
    for (size_t q = 0; q < 4; ++q) {
      const __m256 first = _mm256_loadu_ps(row + b + 8 * q), second = _mm256_loadu_ps(row + b + kSegment + 8 * q);
      // Per 128-bit lane [first's | second's]; then the 64-bit quarters in order.
      const __m256 even = _mm256_shuffle_ps(first, second, _MM_SHUFFLE(2, 0, 2, 0));
      const __m256 odd = _mm256_shuffle_ps(first, second, _MM_SHUFFLE(3, 1, 3, 1));
      _mm256_storeu_ps(
          out.data() + b + 16 * q,
          _mm256_mul_ps(_mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), 0xD8)), scale));
      _mm256_storeu_ps(
          out.data() + b + 16 * q + 8,
          _mm256_mul_ps(_mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(odd), 0xD8)), scale));
    }
  }
}

// 8 * nibble n's value.
alignas(16) constexpr int8_t kEightNibbleValues[16] = {
    0, 8, 16, 24, 32, 40, 48, 56, -64, -56, -48, -40, -32, -24, -16, -8};

// Byte n of group g's table: 8 * (nibble value n - zero point g), in [-120, 120] for zero points in
// [-8, 7]. Writes a table past the last group where their number is odd.
ODNN_AVX2 void zero_point_tables_avx2(const int8_t* zero_points, size_t groups, uint8_t* tables) {
  const __m256i values =
      _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(kEightNibbleValues)));
  for (size_t g = 0; g < groups; g += 16) {
    const size_t count = std::min<size_t>(16, groups - g);
    __m128i z;
    if (count == 16) {
      z = _mm_loadu_si128(reinterpret_cast<const __m128i*>(zero_points + g));
    } else {
      int8_t part[16] = {};
      for (size_t i = 0; i < count; ++i) {
        part[i] = zero_points[g + i];
      }
      z = _mm_loadu_si128(reinterpret_cast<const __m128i*>(part));
    }
    // 8 * z per byte: a shift of 16-bit lanes, less the bits it moved into the next byte.
    const __m256i eight =
        _mm256_broadcastsi128_si256(_mm_and_si128(_mm_slli_epi16(z, 3), _mm_set1_epi8(static_cast<char>(0xF8))));
    __m256i index = _mm256_set_m128i(_mm_set1_epi8(1), _mm_setzero_si128());
    for (size_t j = 0; j < count; j += 2) {
      _mm256_storeu_si256(
          reinterpret_cast<__m256i*>(tables + 16 * (g + j)),
          _mm256_sub_epi8(values, _mm256_shuffle_epi8(eight, index)));
      index = _mm256_add_epi8(index, _mm256_set1_epi8(2));
    }
  }
}

// vpshufb indices putting bytes 4q to 4q + 3 of each 128-bit lane at the top of its four int32.
struct TopByteIndices {
  int8_t bytes[4][32];
};

constexpr TopByteIndices top_byte_indices() {
  TopByteIndices out{};
  for (int q = 0; q < 4; ++q) {
    for (int i = 0; i < 32; ++i) {
      out.bytes[q][i] = i % 4 == 3 ? static_cast<int8_t>(4 * q + i % 16 / 4) : int8_t{-128};
    }
  }
  return out;
}

alignas(32) constexpr TopByteIndices kTopByteIndices = top_byte_indices();

ODNN_AVX2 inline __m256 top_bytes_avx2(__m256i bytes, size_t q) {
  return _mm256_cvtepi32_ps(
      _mm256_shuffle_epi8(bytes, _mm256_load_si256(reinterpret_cast<const __m256i*>(kTopByteIndices.bytes[q]))));
}

// A block's products, unscaled: `even` and `odd` (lanes 0-3 its first half, 4-7 its second).
template <bool ZeroPoints>
ODNN_AVX2 inline void block_avx2(const uint8_t* weights, const float* x, __m256i table, __m256& even, __m256& odd) {
  const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(weights));
  __m256i low, high; // per weight byte, for its low and its high nibble
  if constexpr (ZeroPoints) {
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    low = _mm256_shuffle_epi8(table, _mm256_and_si256(bytes, nibble));
    high = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(bytes, 4), nibble));
  } else {
    const __m256i top = _mm256_set1_epi8(static_cast<char>(0xF0));
    low = _mm256_and_si256(_mm256_slli_epi16(bytes, 4), top);
    high = _mm256_and_si256(bytes, top);
  }
  even = _mm256_mul_ps(top_bytes_avx2(low, 0), _mm256_loadu_ps(x));
  odd = _mm256_mul_ps(top_bytes_avx2(high, 0), _mm256_loadu_ps(x + 8));
  for (size_t q = 1; q < 4; ++q) {
    even = _mm256_fmadd_ps(top_bytes_avx2(low, q), _mm256_loadu_ps(x + 16 * q), even);
    odd = _mm256_fmadd_ps(top_bytes_avx2(high, q), _mm256_loadu_ps(x + 16 * q + 8), odd);
  }
}

template <bool ZeroPoints, BlockGroups kind>
ODNN_AVX2 void float_rows_avx2(
    const Int4MatrixShape& shape,
    const Int4FloatRowOperands& operands,
    PreparedFloatRow& prepared,
    size_t begin,
    size_t end) {
  const size_t groups = shape.k / shape.group, blocks = shape.k / (2 * kSegment), block_bytes = kSegment;
  const size_t row_bytes = shape.k / 2;
  const float* x = prepared.row.data();
  const uint8_t* last_row = operands.weights + (end - 1) * row_bytes;
  prepared.tables.resize(16 * (groups + 1));
  uint8_t* tables = prepared.tables.data();
  ScaleRows scale_rows(operands.scales, groups);
  for (size_t r = begin; r < end; ++r) {
    const uint8_t* weights = operands.weights + r * row_bytes;
    const uint8_t* ahead = prefetch_base(weights, last_row);
    const float* scales = scale_rows(r);
    if constexpr (ZeroPoints) {
      zero_point_tables_avx2(operands.zero_points + r * groups, groups, tables);
    }
    __m256 even_sum = _mm256_setzero_ps(), odd_sum = _mm256_setzero_ps(), even, odd;
    __m256i table = _mm256_setzero_si256();
    if constexpr (kind == BlockGroups::one) {
      const size_t group_blocks = shape.group / (2 * kSegment);
      for (size_t g = 0, b = 0; g < groups; ++g) {
        const __m256 scale = _mm256_set1_ps(scales[g]);
        if constexpr (ZeroPoints) {
          table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tables + 16 * g)));
        }
        for (size_t i = 0; i < group_blocks; ++i, ++b) {
          _mm_prefetch(reinterpret_cast<const char*>(ahead + b * block_bytes), _MM_HINT_T1);
          block_avx2<ZeroPoints>(weights + b * block_bytes, x + b * 2 * kSegment, table, even, odd);
          even_sum = _mm256_fmadd_ps(even, scale, even_sum);
          odd_sum = _mm256_fmadd_ps(odd, scale, odd_sum);
        }
      }
    } else {
      for (size_t b = 0; b < blocks; ++b) {
        __m256 scale;
        if constexpr (kind == BlockGroups::two) {
          const __m128 two = _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales + 2 * b)));
          scale = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(two), _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
          if constexpr (ZeroPoints) {
            table = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tables + 32 * b));
          }
        } else {
          const size_t first = 2 * kSegment * b / shape.group, second = (2 * kSegment * b + kSegment) / shape.group;
          scale = two_scales_avx2(scales[first], scales[second]);
          if constexpr (ZeroPoints) {
            table = _mm256_set_m128i(
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(tables + 16 * second)),
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(tables + 16 * first)));
          }
        }
        _mm_prefetch(reinterpret_cast<const char*>(ahead + b * block_bytes), _MM_HINT_T1);
        block_avx2<ZeroPoints>(weights + b * block_bytes, x + b * 2 * kSegment, table, even, odd);
        even_sum = _mm256_fmadd_ps(even, scale, even_sum);
        odd_sum = _mm256_fmadd_ps(odd, scale, odd_sum);
      }
    }
    finish_float(operands, r, horizontal_sum_avx2(_mm256_add_ps(even_sum, odd_sum)));
  }
}

template <bool ZeroPoints>
void float_rows_vector(
    const Int4MatrixShape& shape,
    const Int4FloatRowOperands& operands,
    PreparedFloatRow& prepared,
    size_t begin,
    size_t end) {
  if (shape.isa == RowIsa::avx512) {
    if (shape.group == kSegment) {
      float_rows_avx512<ZeroPoints, ChunkGroups::each>(shape, operands, prepared, begin, end);
    } else if (shape.group == 2 * kSegment) {
      float_rows_avx512<ZeroPoints, ChunkGroups::pairs>(shape, operands, prepared, begin, end);
    } else if (shape.group % kStep == 0) {
      float_rows_avx512<ZeroPoints, ChunkGroups::steps>(shape, operands, prepared, begin, end);
    } else {
      prepared.chunk_groups.resize(shape.k / kSegment);
      for (size_t i = 0; i < shape.k / kSegment; ++i) {
        prepared.chunk_groups[i] = static_cast<uint32_t>(i * kSegment / shape.group);
      }
      float_rows_avx512<ZeroPoints, ChunkGroups::listed>(shape, operands, prepared, begin, end);
    }
    return;
  }
  if (shape.group == kSegment) {
    float_rows_avx2<ZeroPoints, BlockGroups::two>(shape, operands, prepared, begin, end);
  } else if (shape.group % (2 * kSegment) == 0) {
    float_rows_avx2<ZeroPoints, BlockGroups::one>(shape, operands, prepared, begin, end);
  } else {
    float_rows_avx2<ZeroPoints, BlockGroups::either>(shape, operands, prepared, begin, end);
  }
}

} // namespace

void int4_float_vector_matrix(
    const Int4MatrixShape& shape, const Int4FloatRowOperands& operands, size_t begin, size_t end) {
  if (begin >= end) {
    return;
  }
  if (!shape.vectorized()) {
    float_rows_scalar(shape, operands, begin, end);
    return;
  }
  thread_local PreparedFloatRow prepared;
  const bool zero_points = operands.zero_points != nullptr;
  if (shape.isa == RowIsa::avx512) {
    prepare_float_avx512(shape, operands.row, prepared.row);
  } else {
    prepare_float_avx2(shape, operands.row, zero_points ? 0x1p-27f : 0x1p-28f, prepared.row);
  }
  if (zero_points) {
    float_rows_vector<true>(shape, operands, prepared, begin, end);
  } else {
    float_rows_vector<false>(shape, operands, prepared, begin, end);
  }
}

} // namespace executorch::backends::onednn
