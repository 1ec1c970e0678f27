// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// int8 rows times constant int8 weights on a CPU without VNNI, exactly: each (src - zero point) and
// each weight widened to 16 bits, pairs of products added in 32 bits (AVX2's vpmaddwd), so no sum
// saturates where oneDNN's non-VNNI int8 kernels (pairs of u8 x s8 products in 16 bits) would. One
// vpmaddwd makes 16 products where an f32 FMA makes 8, at about the same rate (measured on the Zen 3):
// int8 linear layers ran 1.5-1.8x faster than the f32 computation on dequantized operands it replaces
// (BENCHMARKS.md, "AVX2 without VNNI or bf16").
#pragma once

#include <cstddef>
#include <cstdint>

namespace executorch::backends::onednn {

// The weights [K, N] are packed in oneDNN's BA16a16b2a layout (a reorder at init): blocks of 16
// columns, each the K rows (padded to 32 with zeros: the tag blocks K by 16 pairs) as pairs
// [k / 2][16 columns][2], so one 16-byte load sign-extended holds a pair of rows for 8 columns.
constexpr size_t kExactInt8Columns = 16;
constexpr size_t kExactInt8Depth = 32;
// Beyond this depth an int32 sum of |src - zero point| <= 383 times |weight| <= 128 could overflow.
constexpr size_t kExactInt8MaxDepth = 32768;

inline size_t exact_int8_padded_depth(size_t k) {
  return (k + kExactInt8Depth - 1) / kExactInt8Depth * kExactInt8Depth;
}

// Byte offset of weight (k, column) in the packed layout of depth `padded_k`.
inline size_t exact_int8_packed_offset(size_t k, size_t column, size_t padded_k) {
  return (column / kExactInt8Columns) * padded_k * kExactInt8Columns + (k / 2) * kExactInt8Columns * 2 +
         (column % kExactInt8Columns) * 2 + k % 2;
}

struct ExactInt8MatmulShape {
  size_t rows = 0; // every leading dim of the src folded
  size_t k = 0;
  size_t n = 0;
  bool src_signed = false; // s8 src, else u8
  int32_t src_zero_point = 0;
};

struct ExactInt8MatmulOperands {
  const uint8_t* src = nullptr;    // [rows, k], u8 or s8 bytes
  const int8_t* weights = nullptr; // packed (above)
  const float* scales = nullptr;   // [n]: the src scale times each column's weight scale
  const float* bias = nullptr;     // [n], or none
  float* dst = nullptr;            // [rows, n]
};

// The part of the product one call computes: rows [row_begin, row_end) and the columns of blocks
// [block_begin, block_end) (blocks of kExactInt8Columns).
struct ExactInt8Tile {
  size_t row_begin = 0;
  size_t row_end = 0;
  size_t block_begin = 0;
  size_t block_end = 0;
};

// dst[r, c] = scales[c] * sum over k of (src[r, k] - src_zero_point) * w[k, c] (+ bias[c]), the sum an
// exact integer, for r and c in `tile`. Needs AVX2 (the caller checks) and k <= kExactInt8MaxDepth;
// threads may call it on disjoint tiles.
void exact_int8_matmul(
    const ExactInt8MatmulShape& shape, const ExactInt8MatmulOperands& operands, const ExactInt8Tile& tile);

// Rows a task of the threads takes (CompiledGraph.cpp): tiles of this many rows by consecutive blocks,
// so a thread's rows are widened once for all its blocks, and a tall product (many rows, few columns)
// spreads over the threads as a wide one does.
constexpr size_t kExactInt8TileRows = 64;

} // namespace executorch::backends::onednn
