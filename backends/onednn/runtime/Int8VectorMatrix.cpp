// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
#include "Int8VectorMatrix.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "VectorTargets.h" // each vector path runs only where the shape's isa allows it

namespace executorch::backends::onednn {
namespace {

// Software prefetch this far ahead of the weights being read, but not past the call's last row (the
// next rows may be another thread's): one core streamed 5-6 GB/s without it, 10-11.5 with it
// (n 8192, k 2048, 1 GiB of weights rotated, the 2-core AMX Xeon of model 207; 8-9 at 2048 bytes ahead).
constexpr size_t kPrefetchBytes = 4096;

void fetch_ahead(const int8_t* at, const int8_t* last) {
  // As addresses: `at + kPrefetchBytes` may lie past the weights.
  const uintptr_t ahead = std::min(reinterpret_cast<uintptr_t>(at) + kPrefetchBytes, reinterpret_cast<uintptr_t>(last));
  _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
}

float finished(const Int8FloatRowOperands& operands, size_t r, float sum) {
  return operands.bias != nullptr ? sum + operands.bias[r] : sum;
}

void rows_scalar(const Int4MatrixShape& shape, const Int8FloatRowOperands& operands, size_t begin, size_t end) {
  const size_t groups = shape.k / shape.group;
  for (size_t r = begin; r < end; ++r) {
    const int8_t* weights = operands.weights + r * shape.k;
    float sum = 0.0f;
    for (size_t g = 0; g < groups; ++g) {
      float part = 0.0f;
      for (size_t k = g * shape.group; k < (g + 1) * shape.group; ++k) {
        part += operands.row[k] * static_cast<float>(weights[k]);
      }
      sum += operands.scales[r * groups + g] * part;
    }
    operands.dst[r] = finished(operands, r, sum);
  }
}

ODNN_AVX512 __m512 widened512(const int8_t* w) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w))));
}

// Four partial sums of 16 lanes over 64 values at a time (an FMA's latency covered), one over the
// group's last 16-value steps.
ODNN_AVX512 void rows_avx512(
    const Int4MatrixShape& shape, const Int8FloatRowOperands& operands, size_t begin, size_t end) {
  const size_t groups = shape.k / shape.group;
  const float* x = operands.row;
  const int8_t* end_of_range = operands.weights + end * shape.k - 1;
  for (size_t r = begin; r < end; ++r) {
    const int8_t* weights = operands.weights + r * shape.k;
    __m512 sum = _mm512_setzero_ps();
    for (size_t g = 0; g < groups; ++g) {
      const size_t first = g * shape.group, last = first + shape.group;
      __m512 a = _mm512_setzero_ps(), b = _mm512_setzero_ps(), c = _mm512_setzero_ps(), d = _mm512_setzero_ps();
      size_t k = first;
      for (; k + 64 <= last; k += 64) {
        fetch_ahead(weights + k, end_of_range);
        a = _mm512_fmadd_ps(_mm512_loadu_ps(x + k), widened512(weights + k), a);
        b = _mm512_fmadd_ps(_mm512_loadu_ps(x + k + 16), widened512(weights + k + 16), b);
        c = _mm512_fmadd_ps(_mm512_loadu_ps(x + k + 32), widened512(weights + k + 32), c);
        d = _mm512_fmadd_ps(_mm512_loadu_ps(x + k + 48), widened512(weights + k + 48), d);
      }
      for (; k < last; k += 16) {
        a = _mm512_fmadd_ps(_mm512_loadu_ps(x + k), widened512(weights + k), a);
      }
      const __m512 part = _mm512_add_ps(_mm512_add_ps(a, b), _mm512_add_ps(c, d));
      sum = _mm512_fmadd_ps(part, _mm512_set1_ps(operands.scales[r * groups + g]), sum);
    }
    operands.dst[r] = finished(operands, r, _mm512_reduce_add_ps(sum));
  }
}

ODNN_AVX2 float lanes_added(__m256 v) {
  const __m128 half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 pairs = _mm_add_ps(half, _mm_movehl_ps(half, half));
  return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_shuffle_ps(pairs, pairs, 1)));
}

ODNN_AVX2 __m256 widened256(const int8_t* w) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w))));
}

// As rows_avx512, 8 lanes: four partial sums over 32 values at a time.
ODNN_AVX2 void rows_avx2(const Int4MatrixShape& shape, const Int8FloatRowOperands& operands, size_t begin, size_t end) {
  const size_t groups = shape.k / shape.group;
  const float* x = operands.row;
  const int8_t* end_of_range = operands.weights + end * shape.k - 1;
  for (size_t r = begin; r < end; ++r) {
    const int8_t* weights = operands.weights + r * shape.k;
    __m256 sum = _mm256_setzero_ps();
    for (size_t g = 0; g < groups; ++g) {
      const size_t first = g * shape.group, last = first + shape.group;
      __m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps(), c = _mm256_setzero_ps(), d = _mm256_setzero_ps();
      size_t k = first;
      for (; k + 32 <= last; k += 32) {
        fetch_ahead(weights + k, end_of_range);
        a = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), widened256(weights + k), a);
        b = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 8), widened256(weights + k + 8), b);
        c = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 16), widened256(weights + k + 16), c);
        d = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 24), widened256(weights + k + 24), d);
      }
      for (; k < last; k += 8) {
        a = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), widened256(weights + k), a);
      }
      const __m256 part = _mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d));
      sum = _mm256_fmadd_ps(part, _mm256_set1_ps(operands.scales[r * groups + g]), sum);
    }
    operands.dst[r] = finished(operands, r, lanes_added(sum));
  }
}

} // namespace

void int8_float_vector_matrix(
    const Int4MatrixShape& shape, const Int8FloatRowOperands& operands, size_t begin, size_t end) {
  if (shape.isa == RowIsa::avx512 && shape.group % 16 == 0) {
    rows_avx512(shape, operands, begin, end);
  } else if (shape.isa != RowIsa::scalar && shape.group % 8 == 0) {
    rows_avx2(shape, operands, begin, end);
  } else {
    rows_scalar(shape, operands, begin, end);
  }
}

} // namespace executorch::backends::onednn
