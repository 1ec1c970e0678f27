// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// CACHED_ATTENTION: ExecuTorch's llama::custom_sdpa over a KV cache, on the host. Queries at
// positions start .. start + S - 1 attend to the cache's first start + S entries (causal: each to
// those up to its own position), where `start` is read from an int64 value at run time. The number of
// keys therefore changes from call to call without new shapes, which oneDNN's primitives cannot follow;
// the keys are read in chunks with a running maximum (one pass over the cache, no score buffer).
#pragma once

#include <cstddef>
#include <cstdint>

#include "RowKernels.h"
#include "Schema.h"

namespace executorch::backends::onednn {

struct CachedAttentionShape {
  RowIsa isa = RowIsa::scalar; // host_row_isa(); vector paths need width and value_width multiples of the lanes
  size_t batch = 0;
  size_t queries = 0;      // S
  size_t heads = 0;        // query heads
  size_t kv_heads = 0;     // divides heads: query head h reads key head h / (heads / kv_heads)
  size_t cache_length = 0; // L, the cache's second dim
  size_t width = 0;        // D of queries and keys
  size_t value_width = 0;  // D of values and of the result
  float scale = 0.0f;
  bool causal = true;
};

struct CachedAttentionOperands {
  const float* queries = nullptr; // [batch, queries, heads, width]
  const float* keys = nullptr;    // [batch, cache_length, kv_heads, width]
  const float* values = nullptr;  // [batch, cache_length, kv_heads, value_width]
  float* dst = nullptr;           // [batch, queries, heads, value_width]
};

// Whether `start` fits the cache: 0 <= start and start + queries <= cache_length.
bool cached_attention_start_fits(const CachedAttentionShape& shape, int64_t start) noexcept;

// The tasks the rows are computed in: each is one query's heads that share a key head, as many as
// the kernel takes together (one, or up to four with AVX-512).
size_t cached_attention_tasks(const CachedAttentionShape& shape) noexcept;

// Tasks [begin, end) of cached_attention_tasks(shape): dst row = softmax(scale * q kᵀ) v over the
// visible keys, in f32, for each row of those tasks. The tasks take the rows in an order that balances
// causal work across any equal split of [0, count). A NaN among the products makes its row NaN.
// Threads may call it on disjoint task ranges at once; `start` must fit (cached_attention_start_fits).
void cached_attention_tasks_run(
    const CachedAttentionShape& shape,
    const CachedAttentionOperands& operands,
    int64_t start,
    size_t begin,
    size_t end) noexcept;

} // namespace executorch::backends::onednn
