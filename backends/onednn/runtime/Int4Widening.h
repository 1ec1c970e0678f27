// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// int4 weights (Int4VectorMatrix.h's packing) widened to s8 on one scale per column, for AMX's int8
// matmul (WidenedInt4Matmul.h). Each weight q * s_g (q in [-8, 7], s_g its group's scale) is
// rounded to the column's grid s_col = max_g |s_g| * 8 / 127: w8 = round(q * r_g) with
// r_g = s_g / s_col, |r_g| <= 127 / 8, so |w8| <= 127. r_g is held in 16 bits (r_g * 2^11, rounded),
// and w8 = (16 q * r16 + 2^14) >> 15 on every path (AVX-512BW's vpmulhrsw), so a weight's error is
// at most 0.502 s_col: 1/16 of the int4 step of the column's widest group.
#pragma once

#include <cstddef>
#include <cstdint>

#include "GroupScales.h"
#include "RowKernels.h"

namespace executorch::backends::onednn {

struct WidenedInt4Shape {
  size_t rows = 0;
  size_t k = 0; // the weights [n, k / 2] as Int4VectorMatrix.h packs them
  size_t n = 0;
  size_t group = 0;   // values per group scale; divides k
  size_t columns = 0; // per block (the last may be narrower)
  size_t slot_bytes = 0;
  // The vector widening (k % 64 == 0, group % 32 == 0: vector_widening()), else the scalar loop.
  RowIsa isa = RowIsa::scalar;

  size_t blocks() const {
    return (n + columns - 1) / columns;
  }
  size_t block_weight_bytes() const; // a block's s8 weights, rounded up to a cache line
};

// Whether the vector paths take the shape: values in steps of 64, groups of 32n.
inline bool vector_widening(size_t k, size_t group) {
  return k % 64 == 0 && group % 32 == 0;
}

// The column's grid s_col (above) from its `groups` scales; 1 for a column of zero scales. False when
// a scale is NaN or infinite (the weights then take a path that propagates them), or the largest is
// below about 1e-35 (its ratios would overflow).
bool widened_column_scale(const float* scales, size_t groups, float* column_scale);

// Rows [begin, end) of the int4 weights widened to s8 [end - begin, k] at `out`.
void widen_int4_rows(
    const WidenedInt4Shape& shape,
    const uint8_t* weights,
    const GroupScales& scales,
    const float* column_scales,
    size_t begin,
    size_t end,
    int8_t* out);

// terms[r] for r in [begin, end) = s_col * (sum of row r's widened weights): what a row's zero point
// contributes to column r, on the widened weights the matmul multiplies. Threads may call it on
// disjoint ranges at once.
void widened_int4_terms(
    const WidenedInt4Shape& shape,
    const uint8_t* weights,
    const GroupScales& scales,
    const float* column_scales,
    float* terms,
    size_t begin,
    size_t end);

} // namespace executorch::backends::onednn
