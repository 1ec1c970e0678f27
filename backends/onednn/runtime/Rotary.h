// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// ROTARY: an interleaved rotary embedding (Meta's Llama, ExecuTorch's export_llm models) on the host.
// Lowered op by op it is 13 steps of a few microseconds each (two strided slices, four copies of the
// tables over the heads, six binaries and an interleaving concat), about 1 ms of a 27 ms decode
// token on a 1.1B model; here it is one pass over the values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace executorch::backends::onednn {

// `rows` rows of `pairs` pairs (x0, x1), contiguous; row r reads row table_rows[r] of the cos and sin
// tables ([table rows, pairs], f32).
struct RotaryRows {
  size_t rows = 0;
  size_t pairs = 0;
  bool bf16 = false; // src and dst hold bf16 (raw bits), else f32
  std::vector<uint32_t> table_rows;
};

// Rows [begin, end): dst = (x0 * cos - x1 * sin, x0 * sin + x1 * cos) per pair, in f32, each product
// rounded before the sum (as the separate steps computed it, so that f32 results are PyTorch's bit for
// bit); bf16 values are widened exactly and the results rounded once, to nearest even.
void rotary_rows(
    const RotaryRows& rows, const void* src, const float* cos, const float* sin, void* dst, size_t begin, size_t end);

} // namespace executorch::backends::onednn
