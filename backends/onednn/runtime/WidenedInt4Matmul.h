// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// Several int8-quantized rows (an 8da4w prompt) times int4 weights on the CPU's int8 unit (AMX, or
// VNNI, AVX-512 or AVX2): the weights are widened, a block of columns at a time, to s8 on one scale per column
// (Int4Widening.h), and each block is multiplied by oneDNN's u8 x s8 matmul right after, while it is
// still in the core's L2. Each slot (one per pool thread) widens and multiplies its own blocks, its
// matmul running on that thread alone, so a block never leaves the core that wrote it. Nothing is kept
// beyond the program's 4-bit bytes but two floats per column (its scale, its zero-point term) and, in
// the arena, a block of s8 weights per slot.
//
// Single-threaded, 128 x 2048 x 8192 on the AMX Xeon (model 207): 2.2x faster than oneDNN's AMX
// bf16 x s4 matmul (widening: 1 ms of it); 2 x 2048 x 8192: 2.3x. The 1.1B 8da4w LLM's 128-token
// prompt, 2 threads: BENCHMARKS.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <executorch/runtime/core/error.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "Int4Widening.h"

namespace executorch::backends::onednn {

// The oneDNN side, made as the graph is built: the matmul of a block of `columns` (and of the last,
// narrower block), made for one thread, and per slot a stream without a pool and the memory objects
// execute() points at each block.
struct WidenedInt4Primitives {
  struct Block {
    dnnl::matmul matmul;
    size_t columns = 0; // 0: no such block
    size_t scratchpad_bytes = 0;
  };
  enum Arg { kSrc, kWeights, kBias, kSrcScales, kWeightScales, kDst, kScratchpad, kArgCount };
  struct Slot {
    dnnl::stream stream;
    std::vector<dnnl::memory> args[2]; // per Block (full, last), indexed by Arg
  };
  WidenedInt4Shape shape; // with its block width (columns) and slot_bytes
  Block full, last;
  bool bias = false;
  std::vector<Slot> slots;
};

// Picks the shape's block width for `threads` threads (every thread a block at least, a block's
// s8 weights about 512 KiB) and makes the primitives, a slot per thread that has blocks. Throws
// dnnl::error where oneDNN has no such matmul.
std::shared_ptr<WidenedInt4Primitives> make_widened_int4_primitives(
    const dnnl::engine& engine, const WidenedInt4Shape& shape, bool bias, int threads);

struct WidenedInt4Operands {
  const uint8_t* rows = nullptr;        // [rows, k]: the quantized rows plus 128 (u8)
  const float* row_scales = nullptr;    // [rows]
  const uint8_t* weights = nullptr;     // [n, k / 2]
  GroupScales scales;                   // [n, k / group]
  const float* column_scales = nullptr; // [n]
  const float* bias = nullptr;          // [n], when the primitives have one
  uint8_t* scratch = nullptr;           // widened_int4_scratch_bytes(), in the arena
  // [rows, n]: row_scale * s_col * sum (q + 128) * w8 (+ bias); a ZeroPointTerms loop after takes off
  // (zero point + 128) * terms.
  float* dst = nullptr;
};

// The arena bytes the matmul needs: a block of s8 weights and oneDNN's scratchpad per slot.
size_t widened_int4_scratch_bytes(const WidenedInt4Primitives& primitives);

// The matmul: each slot widens its share of the blocks and multiplies them on the calling pool's
// threads. Internal (logged) when oneDNN fails.
runtime::Error widened_int4_matmul(const WidenedInt4Primitives& primitives, const WidenedInt4Operands& operands);

} // namespace executorch::backends::onednn
