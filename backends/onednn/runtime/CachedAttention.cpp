// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
#include "CachedAttention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "VectorMath.h"
#include "VectorTargets.h"

namespace executorch::backends::onednn {
namespace {

// Keys per chunk: their scores stay in L1 between the products and the exponentials.
constexpr size_t kChunk = 64;
// Query heads of one key head computed together (each key and value row read once for all of them).
constexpr size_t kMaxTaskHeads = 4;

// One task: the query heads [head, head + heads) of one query, which share a key head.
struct Task {
  const float* queries[kMaxTaskHeads];
  float* dst[kMaxTaskHeads];
  size_t heads;
  const float* keys;   // the key head's entry at position 0; positions key_stride apart
  const float* values; // likewise, value_stride apart
  size_t key_stride;
  size_t value_stride;
  size_t visible; // the entries the query sees
};

// The query heads a task takes: as many of a key head's group as the AVX-512 kernel keeps in registers
// (accumulators of at most 16 vectors in all), else one.
size_t heads_per_task(const CachedAttentionShape& shape) {
  const size_t group = shape.heads / shape.kv_heads;
  const size_t vectors = shape.width / 16;
  if (shape.isa != RowIsa::avx512 || shape.width % 16 != 0 || shape.width != shape.value_width || vectors > 8) {
    return 1;
  }
  for (size_t heads = kMaxTaskHeads; heads > 1; heads /= 2) {
    if (group % heads == 0 && heads * vectors <= 16) {
      return heads;
    }
  }
  return 1;
}

// Task t. Causal rows see more keys the later their query, so the tasks take the queries in the order
// 0, S - 1, 1, S - 2, ...: any equal split of the tasks between threads carries about equal work.
Task task_at(
    const CachedAttentionShape& shape,
    const CachedAttentionOperands& operands,
    int64_t start,
    size_t task_heads,
    size_t t) {
  const size_t blocks = shape.heads / task_heads;
  const size_t block = t % blocks;
  const size_t slot = (t / blocks) % shape.queries;
  const size_t b = t / (blocks * shape.queries);
  const size_t query = slot % 2 == 0 ? slot / 2 : shape.queries - 1 - slot / 2;
  const size_t first_head = block * task_heads;
  const size_t kv_head = first_head / (shape.heads / shape.kv_heads);
  Task task;
  task.heads = task_heads;
  for (size_t h = 0; h < task_heads; ++h) {
    const size_t r = (b * shape.queries + query) * shape.heads + first_head + h;
    task.queries[h] = operands.queries + r * shape.width;
    task.dst[h] = operands.dst + r * shape.value_width;
  }
  task.keys = operands.keys + (b * shape.cache_length * shape.kv_heads + kv_head) * shape.width;
  task.values = operands.values + (b * shape.cache_length * shape.kv_heads + kv_head) * shape.value_width;
  task.key_stride = shape.kv_heads * shape.width;
  task.value_stride = shape.kv_heads * shape.value_width;
  task.visible = static_cast<size_t>(start) + (shape.causal ? query + 1 : shape.queries);
  return task;
}

// The running softmax: the factor by which the sums so far shrink for a chunk's maximum (the new
// maximum's), updating `max`. A NaN score reaches the sums through its exponential.
float rescale_to(float chunk_max, float& max) {
  if (!(chunk_max > max)) {
    return 1.0f;
  }
  const float factor = max == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(max - chunk_max);
  max = chunk_max;
  return factor;
}

void head_scalar(const CachedAttentionShape& shape, const Task& task, size_t h) {
  float acc[kMaxAttentionValueWidth];
  std::fill(acc, acc + shape.value_width, 0.0f);
  float scores[kChunk];
  float max = -std::numeric_limits<float>::infinity();
  float sum = 0.0f;
  for (size_t first = 0; first < task.visible; first += kChunk) {
    const size_t count = std::min(kChunk, task.visible - first);
    float chunk_max = -std::numeric_limits<float>::infinity();
    for (size_t j = 0; j < count; ++j) {
      const float* key = task.keys + (first + j) * task.key_stride;
      float dot = 0.0f;
      for (size_t d = 0; d < shape.width; ++d) {
        dot += task.queries[h][d] * key[d];
      }
      scores[j] = dot * shape.scale;
      chunk_max = std::max(chunk_max, scores[j]);
    }
    const float factor = rescale_to(chunk_max, max);
    sum *= factor;
    for (size_t d = 0; d < shape.value_width; ++d) {
      acc[d] *= factor;
    }
    for (size_t j = 0; j < count; ++j) {
      const float e = std::exp(scores[j] - max);
      sum += e;
      const float* value = task.values + (first + j) * task.value_stride;
      for (size_t d = 0; d < shape.value_width; ++d) {
        acc[d] += e * value[d];
      }
    }
  }
  for (size_t d = 0; d < shape.value_width; ++d) {
    task.dst[h][d] = acc[d] / sum;
  }
}

// kVectors: the vectors of 16 in a row (width and value_width alike) and kHeads the task's heads, fixed
// so that the accumulators stay in registers (the loops over them are unrolled for that); kVectors 0:
// the widths taken from the shape, one head, the accumulators in memory.
template <size_t kVectors, size_t kHeads>
ODNN_AVX512 void task_avx512(const CachedAttentionShape& shape, const Task& task) {
  constexpr size_t kLanes = 16;
  const size_t q_vectors = kVectors != 0 ? kVectors : shape.width / kLanes;
  const size_t v_vectors = kVectors != 0 ? kVectors : shape.value_width / kLanes;
  __m512 acc[kHeads][kVectors != 0 ? kVectors : kMaxAttentionValueWidth / kLanes];
  float max[kHeads], sum[kHeads];
  alignas(64) float scores[kHeads][kChunk];
#pragma GCC unroll 4
  for (size_t h = 0; h < kHeads; ++h) {
    max[h] = -std::numeric_limits<float>::infinity();
    sum[h] = 0.0f;
#pragma GCC unroll 16
    for (size_t v = 0; v < v_vectors; ++v) {
      acc[h][v] = _mm512_setzero_ps();
    }
  }
  for (size_t first = 0; first < task.visible; first += kChunk) {
    const size_t count = std::min(kChunk, task.visible - first);
    float chunk_max[kHeads];
    std::fill(chunk_max, chunk_max + kHeads, -std::numeric_limits<float>::infinity());
    for (size_t j = 0; j < count; ++j) {
      const float* key = task.keys + (first + j) * task.key_stride;
#pragma GCC unroll 4
      for (size_t h = 0; h < kHeads; ++h) {
        __m512 dot = _mm512_mul_ps(_mm512_loadu_ps(task.queries[h]), _mm512_loadu_ps(key));
#pragma GCC unroll 16
        for (size_t v = 1; v < q_vectors; ++v) {
          dot = _mm512_fmadd_ps(_mm512_loadu_ps(task.queries[h] + v * kLanes), _mm512_loadu_ps(key + v * kLanes), dot);
        }
        scores[h][j] = horizontal_sum(dot) * shape.scale;
        chunk_max[h] = std::max(chunk_max[h], scores[h][j]);
      }
    }
#pragma GCC unroll 4
    for (size_t h = 0; h < kHeads; ++h) {
      const float factor = rescale_to(chunk_max[h], max[h]);
      if (factor != 1.0f) {
        sum[h] *= factor;
#pragma GCC unroll 16
        for (size_t v = 0; v < v_vectors; ++v) {
          acc[h][v] = _mm512_mul_ps(acc[h][v], _mm512_set1_ps(factor));
        }
      }
      for (size_t j = 0; j < count; j += kLanes) {
        const __mmask16 lanes = count - j >= kLanes ? __mmask16(0xFFFF) : __mmask16((1u << (count - j)) - 1u);
        const __m512 e = _mm512_maskz_mov_ps(
            lanes, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(lanes, scores[h] + j), _mm512_set1_ps(max[h]))));
        _mm512_store_ps(scores[h] + j, e);
        sum[h] += horizontal_sum(e);
      }
    }
    for (size_t j = 0; j < count; ++j) {
      const float* value = task.values + (first + j) * task.value_stride;
#pragma GCC unroll 16
      for (size_t v = 0; v < v_vectors; ++v) {
        const __m512 x = _mm512_loadu_ps(value + v * kLanes);
#pragma GCC unroll 4
        for (size_t h = 0; h < kHeads; ++h) {
          acc[h][v] = _mm512_fmadd_ps(_mm512_set1_ps(scores[h][j]), x, acc[h][v]);
        }
      }
    }
  }
#pragma GCC unroll 4
  for (size_t h = 0; h < kHeads; ++h) {
    const __m512 inverse = _mm512_set1_ps(1.0f / sum[h]);
#pragma GCC unroll 16
    for (size_t v = 0; v < v_vectors; ++v) {
      _mm512_storeu_ps(task.dst[h] + v * kLanes, _mm512_mul_ps(acc[h][v], inverse));
    }
  }
}

template <size_t kVectors>
ODNN_AVX512 void task_avx512_heads(const CachedAttentionShape& shape, const Task& task) {
  switch (task.heads) {
    case 4:
      return task_avx512<kVectors, 4>(shape, task);
    case 2:
      return task_avx512<kVectors, 2>(shape, task);
    default:
      return task_avx512<kVectors, 1>(shape, task);
  }
}

ODNN_AVX512 void dispatch_avx512(const CachedAttentionShape& shape, const Task& task) {
  switch (shape.width == shape.value_width ? shape.width / 16 : 0) {
    case 4:
      return task_avx512_heads<4>(shape, task);
    case 8:
      return task_avx512_heads<8>(shape, task);
    case 2:
      return task_avx512_heads<2>(shape, task);
    case 1:
      return task_avx512_heads<1>(shape, task);
    default:
      return task_avx512<0, 1>(shape, task); // heads_per_task() gave one head
  }
}

// One head of the task; kVectors as for task_avx512, in vectors of 8.
template <size_t kVectors>
ODNN_AVX2 void head_avx2(const CachedAttentionShape& shape, const Task& task, size_t h) {
  constexpr size_t kLanes = 8;
  const size_t q_vectors = kVectors != 0 ? kVectors : shape.width / kLanes;
  const size_t v_vectors = kVectors != 0 ? kVectors : shape.value_width / kLanes;
  __m256 acc[kVectors != 0 ? kVectors : kMaxAttentionValueWidth / kLanes];
#pragma GCC unroll 16
  for (size_t v = 0; v < v_vectors; ++v) {
    acc[v] = _mm256_setzero_ps();
  }
  alignas(32) float scores[kChunk];
  float max = -std::numeric_limits<float>::infinity();
  float sum = 0.0f;
  const float* query = task.queries[h];
  for (size_t first = 0; first < task.visible; first += kChunk) {
    const size_t count = std::min(kChunk, task.visible - first);
    float chunk_max = -std::numeric_limits<float>::infinity();
    for (size_t j = 0; j < count; ++j) {
      const float* key = task.keys + (first + j) * task.key_stride;
      __m256 dot = _mm256_mul_ps(_mm256_loadu_ps(query), _mm256_loadu_ps(key));
#pragma GCC unroll 16
      for (size_t v = 1; v < q_vectors; ++v) {
        dot = _mm256_fmadd_ps(_mm256_loadu_ps(query + v * kLanes), _mm256_loadu_ps(key + v * kLanes), dot);
      }
      scores[j] = horizontal_sum(dot) * shape.scale;
      chunk_max = std::max(chunk_max, scores[j]);
    }
    const float factor = rescale_to(chunk_max, max);
    if (factor != 1.0f) {
      sum *= factor;
#pragma GCC unroll 16
      for (size_t v = 0; v < v_vectors; ++v) {
        acc[v] = _mm256_mul_ps(acc[v], _mm256_set1_ps(factor));
      }
    }
    size_t j = 0;
    for (; j + kLanes <= count; j += kLanes) {
      const __m256 e = exp8(_mm256_sub_ps(_mm256_load_ps(scores + j), _mm256_set1_ps(max)));
      _mm256_store_ps(scores + j, e);
      sum += horizontal_sum(e);
    }
    for (; j < count; ++j) {
      scores[j] = std::exp(scores[j] - max);
      sum += scores[j];
    }
    for (j = 0; j < count; ++j) {
      const __m256 e = _mm256_set1_ps(scores[j]);
      const float* value = task.values + (first + j) * task.value_stride;
#pragma GCC unroll 16
      for (size_t v = 0; v < v_vectors; ++v) {
        acc[v] = _mm256_fmadd_ps(e, _mm256_loadu_ps(value + v * kLanes), acc[v]);
      }
    }
  }
  const __m256 inverse = _mm256_set1_ps(1.0f / sum);
#pragma GCC unroll 16
  for (size_t v = 0; v < v_vectors; ++v) {
    _mm256_storeu_ps(task.dst[h] + v * kLanes, _mm256_mul_ps(acc[v], inverse));
  }
}

ODNN_AVX2 void dispatch_avx2(const CachedAttentionShape& shape, const Task& task, size_t h) {
  switch (shape.width == shape.value_width ? shape.width / 8 : 0) {
    case 8:
      return head_avx2<8>(shape, task, h);
    case 4:
      return head_avx2<4>(shape, task, h);
    case 16:
      return head_avx2<16>(shape, task, h);
    default:
      return head_avx2<0>(shape, task, h);
  }
}

} // namespace

bool cached_attention_start_fits(const CachedAttentionShape& shape, int64_t start) noexcept {
  return start >= 0 && static_cast<uint64_t>(start) <= shape.cache_length &&
         shape.queries <= shape.cache_length - static_cast<size_t>(start);
}

size_t cached_attention_tasks(const CachedAttentionShape& shape) noexcept {
  return shape.batch * shape.queries * shape.heads / heads_per_task(shape);
}

void cached_attention_tasks_run(
    const CachedAttentionShape& shape,
    const CachedAttentionOperands& operands,
    int64_t start,
    size_t begin,
    size_t end) noexcept {
  const size_t task_heads = heads_per_task(shape);
  const bool avx512 = shape.isa == RowIsa::avx512 && shape.width % 16 == 0 && shape.value_width % 16 == 0;
  const bool avx2 = shape.isa != RowIsa::scalar && shape.width % 8 == 0 && shape.value_width % 8 == 0;
  for (size_t t = begin; t < end; ++t) {
    const Task task = task_at(shape, operands, start, task_heads, t);
    if (avx512) {
      dispatch_avx512(shape, task);
      continue;
    }
    for (size_t h = 0; h < task.heads; ++h) {
      if (avx2) {
        dispatch_avx2(shape, task, h);
      } else {
        head_scalar(shape, task, h);
      }
    }
  }
}

} // namespace executorch::backends::onednn
