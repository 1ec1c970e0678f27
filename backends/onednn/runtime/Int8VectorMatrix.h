// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// One f32 row times int8 weights [n, k] with f32 scales per group of k: a decode step of export_llm's
// weight-only int8 linears (qmode=int8, one group a row) and of 8da8w's (rows dequantized first).
// oneDNN 3.13.1's weight decompression ran that shape at a third of the memory bandwidth (BENCHMARKS.md);
// this kernel converts each weight to f32 on the way (a sign extension and a conversion per 16 values
// on AVX-512, per 8 on AVX2), prefetching ahead, and streams the weights once: one thread, n 8192,
// k 2048, 1 GiB of weights rotated, 10-11.5 GB/s of weight bytes on the 2-core AMX Xeon of model 207.
#pragma once

#include <cstddef>
#include <cstdint>

#include "Int4VectorMatrix.h"

namespace executorch::backends::onednn {

struct Int8FloatRowOperands {
  const float* row = nullptr;      // k values
  const int8_t* weights = nullptr; // [n, k], torch's linear layout
  const float* scales = nullptr;   // [n, k / group]
  const float* bias = nullptr;     // [n], or none
  float* dst = nullptr;            // [n]
};

// dst[r] for r in [begin, end): sum over groups g, in order, of scales[r, g] * (sum over k in g of
// row[k] * float(w[r, k])) (+ bias[r]), the inner sums in f32 (in several partial sums on the vector
// paths, added up at the end of each group). The vector paths need `group % 16 == 0` (AVX-512) or
// `group % 8 == 0` (AVX2); other shapes, and `isa` scalar, run the scalar loop. NaN and infinity in the
// row propagate as through the f32 products. The other columns of dst are untouched; threads may call
// it on disjoint ranges at once. `shape.vnni` is not read.
void int8_float_vector_matrix(
    const Int4MatrixShape& shape, const Int8FloatRowOperands& operands, size_t begin, size_t end);

} // namespace executorch::backends::onednn
