// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
#include "VectorMatrix.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

// Compiled for AVX-512 and for AVX2 with FMA while the library targets baseline x86-64 (as in
// RowKernels.cpp); each runs only where host_row_isa() allows it.
#define ODNN_AVX512 __attribute__((target("avx512f")))
#define ODNN_AVX2 __attribute__((target("avx2,fma")))

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized" // GCC 12's own AVX-512 intrinsics (GCC bug 105593)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace executorch::backends::onednn {
namespace {

constexpr size_t kBlock = kVectorMatrixBlock;

// The columns of block `block` that exist (the last block may be partly padding).
size_t columns_of(const VectorMatrixShape& shape, size_t block) {
  return std::min(kBlock, shape.n - block * kBlock);
}

// The first `columns` sums of block `block`, plus the bias.
void store_columns(const VectorMatrixOperands& operands, const float* sums, size_t block, size_t columns) {
  for (size_t c = 0; c < columns; ++c) {
    const size_t column = block * kBlock + c;
    operands.dst[column] = operands.bias != nullptr ? sums[c] + operands.bias[column] : sums[c];
  }
}

ODNN_AVX512 void store_block_avx512(
    const VectorMatrixShape& shape, __m512 sum, const VectorMatrixOperands& operands, size_t block) {
  const size_t columns = columns_of(shape, block);
  const __mmask16 mask =
      columns == kBlock ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << columns) - 1u);
  if (operands.bias != nullptr) {
    sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(mask, operands.bias + block * kBlock));
  }
  _mm512_mask_storeu_ps(operands.dst + block * kBlock, mask, sum);
}

// Four blocks at a time: four independent weight streams and FMA chains per thread.
ODNN_AVX512 void blocks_avx512(
    const VectorMatrixShape& shape, const VectorMatrixOperands& operands, size_t begin, size_t end) {
  const float* row = operands.row;
  const float* weights = operands.packed_weights;
  const size_t stride = shape.padded_k() * kBlock; // values per block
  size_t block = begin;
  for (; block + 4 <= end; block += 4) {
    const float* w = weights + block * stride;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps(), s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
    for (size_t k = 0; k < shape.k; ++k) {
      const __m512 x = _mm512_set1_ps(row[k]);
      const float* at = w + k * kBlock;
      s0 = _mm512_fmadd_ps(x, _mm512_loadu_ps(at), s0);
      s1 = _mm512_fmadd_ps(x, _mm512_loadu_ps(at + stride), s1);
      s2 = _mm512_fmadd_ps(x, _mm512_loadu_ps(at + 2 * stride), s2);
      s3 = _mm512_fmadd_ps(x, _mm512_loadu_ps(at + 3 * stride), s3);
    }
    store_block_avx512(shape, s0, operands, block);
    store_block_avx512(shape, s1, operands, block + 1);
    store_block_avx512(shape, s2, operands, block + 2);
    store_block_avx512(shape, s3, operands, block + 3);
  }
  for (; block < end; ++block) {
    const float* w = weights + block * stride;
    __m512 sum = _mm512_setzero_ps();
    for (size_t k = 0; k < shape.k; ++k) {
      sum = _mm512_fmadd_ps(_mm512_set1_ps(row[k]), _mm512_loadu_ps(w + k * kBlock), sum);
    }
    store_block_avx512(shape, sum, operands, block);
  }
}

ODNN_AVX2 void store_block_avx2(
    const VectorMatrixShape& shape, __m256 low, __m256 high, const VectorMatrixOperands& operands, size_t block) {
  float sums[kBlock];
  _mm256_storeu_ps(sums, low);
  _mm256_storeu_ps(sums + 8, high);
  store_columns(operands, sums, block, columns_of(shape, block));
}

// Two blocks at a time: each is two 8-wide halves, so four streams of FMAs as on AVX-512.
ODNN_AVX2 void blocks_avx2(
    const VectorMatrixShape& shape, const VectorMatrixOperands& operands, size_t begin, size_t end) {
  const float* row = operands.row;
  const float* weights = operands.packed_weights;
  const size_t stride = shape.padded_k() * kBlock;
  size_t block = begin;
  for (; block + 2 <= end; block += 2) {
    const float* w = weights + block * stride;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    for (size_t k = 0; k < shape.k; ++k) {
      const __m256 x = _mm256_broadcast_ss(row + k);
      const float* at = w + k * kBlock;
      s0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(at), s0);
      s1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(at + 8), s1);
      s2 = _mm256_fmadd_ps(x, _mm256_loadu_ps(at + stride), s2);
      s3 = _mm256_fmadd_ps(x, _mm256_loadu_ps(at + stride + 8), s3);
    }
    store_block_avx2(shape, s0, s1, operands, block);
    store_block_avx2(shape, s2, s3, operands, block + 1);
  }
  if (block < end) {
    const float* w = weights + block * stride;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    for (size_t k = 0; k < shape.k; ++k) {
      const __m256 x = _mm256_broadcast_ss(row + k);
      s0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(w + k * kBlock), s0);
      s1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(w + k * kBlock + 8), s1);
    }
    store_block_avx2(shape, s0, s1, operands, block);
  }
}

// Kept for completeness: the builder takes the host path only where AVX2 or AVX-512 runs.
void blocks_scalar(const VectorMatrixShape& shape, const VectorMatrixOperands& operands, size_t begin, size_t end) {
  const float* row = operands.row;
  const float* weights = operands.packed_weights;
  const size_t stride = shape.padded_k() * kBlock;
  for (size_t block = begin; block < end; ++block) {
    float sums[kBlock] = {};
    for (size_t k = 0; k < shape.k; ++k) {
      for (size_t c = 0; c < kBlock; ++c) {
        sums[c] += row[k] * weights[block * stride + k * kBlock + c];
      }
    }
    store_columns(operands, sums, block, columns_of(shape, block));
  }
}

} // namespace

void vector_times_matrix(
    const VectorMatrixShape& shape, const VectorMatrixOperands& operands, size_t begin, size_t end) {
  if (shape.isa == RowIsa::avx512) {
    blocks_avx512(shape, operands, begin, end);
  } else if (shape.isa == RowIsa::avx2) {
    blocks_avx2(shape, operands, begin, end);
  } else {
    blocks_scalar(shape, operands, begin, end);
  }
}

} // namespace executorch::backends::onednn
