// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// One row times a constant matrix, f32 or bf16: a decode step's linear layers (M = 1), which stream
// their weights from memory once per token. oneDNN 3.13.1 runs M = 1 with brgemm kernels that stream the
// weights at about half the rate a plain FMA loop does (AMD Zen 4, one thread, weights out of cache, Llama
// decode shapes: f32 14-15 against 26-28 GB/s through `brg_matmul:avx2`, its only f32 kernel for M = 1
// even on AVX-512; bf16 10-18 against 20-28 GB/s through `brg_matmul:avx512_core_bf16`; BENCHMARKS.md).
//
// The weights are oneDNN's BA16a<W>b layout of [K, N] (a reorder made once at init): column blocks of
// W (packed_width: 16, or the wider blocks oneDNN packs a program's several-row matmuls in, which a
// dynamic program's one-row graphs then share), each block K rows of W contiguous values, K padded
// with zeros to a multiple of 16. bf16 weights may instead come in pairs of rows (`paired_rows`:
// oneDNN's BA16a<W>b2a, what its bf16 kernels pack for several rows): each block K / 2 rows of W
// pairs (k even, k odd), K padded to a multiple of 32. The kernels work in blocks of 16 columns; each
// thread takes whole ones; within a block the sum runs over k in order, one f32 accumulator per column. In
// bf16 the row and the weights are bf16, the sums f32; a bf16 result is rounded to nearest even at the
// end, as oneDNN's bf16 matmul does. The bias is f32 either way.
#pragma once

#include <cstddef>

#include "RowKernels.h"

namespace executorch::backends::onednn {

constexpr size_t kVectorMatrixBlock = 16; // columns per block the kernels compute

struct VectorMatrixShape {
  RowIsa isa = RowIsa::scalar;              // avx2 or avx512: the host path is taken only with one of them
  size_t k = 0;                             // the row's length, the weights' rows
  size_t n = 0;                             // the weights' columns, the result's length
  bool bf16 = false;                        // row and weights in bf16
  bool dst_bf16 = false;                    // the result in bf16
  size_t packed_width = kVectorMatrixBlock; // columns per block of the packed weights, a multiple of 16
  bool paired_rows = false;                 // bf16 only: BA16a<W>b2a
  size_t blocks() const {
    return (n + kVectorMatrixBlock - 1) / kVectorMatrixBlock;
  }
  size_t padded_k() const {
    const size_t multiple = paired_rows ? 2 * kVectorMatrixBlock : kVectorMatrixBlock;
    return (k + multiple - 1) / multiple * multiple;
  }
};

struct VectorMatrixOperands {
  const void* row = nullptr;            // k values
  const void* packed_weights = nullptr; // BA16a<packed_width>b (or ...b2a)
  const float* bias = nullptr;          // n values, or none
  void* dst = nullptr;                  // n values
};

// dst[n] = sum over k of row[k] * weights[k][n] (+ bias[n]) for the columns of blocks [begin, end).
void vector_times_matrix(
    const VectorMatrixShape& shape, const VectorMatrixOperands& operands, size_t begin, size_t end);

} // namespace executorch::backends::onednn
