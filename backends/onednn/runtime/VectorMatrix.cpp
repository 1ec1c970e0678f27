// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
#include "VectorMatrix.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "HostLoops.h"

#include "VectorTargets.h"

// The AVX-512 and AVX2 kernels (VectorTargets.h) run only where host_row_isa() allows it. The
// weights' type is a template parameter so that the inner loops carry no branch.

namespace executorch::backends::onednn {
namespace {

constexpr size_t kBlock = kVectorMatrixBlock;

template <typename Weight>
float row_value(const VectorMatrixOperands& operands, size_t k) {
  if constexpr (std::is_same_v<Weight, uint16_t>) {
    return from_bf16_bits(static_cast<const uint16_t*>(operands.row)[k]);
  } else {
    return static_cast<const float*>(operands.row)[k];
  }
}

// Where the 16 columns of block `block` start in the packed weights; their rows (pairs of rows) are
// packed_width (2 * packed_width) values apart.
template <typename Weight>
const Weight* block_start(const VectorMatrixShape& shape, const VectorMatrixOperands& operands, size_t block) {
  const size_t per_packed = shape.packed_width / kBlock, values_per_column = shape.paired_rows ? 2 : 1;
  return static_cast<const Weight*>(operands.packed_weights) +
         (block / per_packed) * shape.padded_k() * shape.packed_width +
         (block % per_packed) * kBlock * values_per_column;
}

// Row values k and k + 1 (zero past the row's end), for the weights in pairs of rows.
std::pair<float, float> row_pair(const VectorMatrixShape& shape, const VectorMatrixOperands& operands, size_t k) {
  return {row_value<uint16_t>(operands, k), k + 1 < shape.k ? row_value<uint16_t>(operands, k + 1) : 0.0f};
}

// The columns of block `block` that exist (the last block may be partly padding).
size_t columns_of(const VectorMatrixShape& shape, size_t block) {
  return std::min(kBlock, shape.n - block * kBlock);
}

// Block `block`'s sums plus the bias, into dst as f32 or bf16.
void store_columns(
    const VectorMatrixShape& shape, const VectorMatrixOperands& operands, const float* sums, size_t block) {
  for (size_t c = 0; c < columns_of(shape, block); ++c) {
    const size_t column = block * kBlock + c;
    const float value = operands.bias != nullptr ? sums[c] + operands.bias[column] : sums[c];
    if (shape.dst_bf16) {
      static_cast<uint16_t*>(operands.dst)[column] = to_bf16_bits(value);
    } else {
      static_cast<float*>(operands.dst)[column] = value;
    }
  }
}

template <typename Weight>
ODNN_AVX512 __m512 load16(const Weight* at) {
  if constexpr (std::is_same_v<Weight, uint16_t>) {
    const __m256i half = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));
  } else {
    return _mm512_loadu_ps(at);
  }
}

ODNN_AVX512 void store_block_avx512(
    const VectorMatrixShape& shape, __m512 sum, const VectorMatrixOperands& operands, size_t block) {
  const size_t columns = columns_of(shape, block);
  if (shape.dst_bf16) {
    float sums[kBlock];
    _mm512_storeu_ps(sums, sum);
    store_columns(shape, operands, sums, block);
    return;
  }
  const __mmask16 mask =
      columns == kBlock ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << columns) - 1u);
  if (operands.bias != nullptr) {
    sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(mask, operands.bias + block * kBlock));
  }
  _mm512_mask_storeu_ps(static_cast<float*>(operands.dst) + block * kBlock, mask, sum);
}

// Blocks [begin, end), four at a time (four independent weight streams and FMA chains per thread).
// `steps` adds one step of the sum (a row value, or a pair of them) for the 16 columns at `weights`.
template <typename Weight, typename Steps>
ODNN_AVX512 void walk_blocks_avx512(
    const VectorMatrixShape& shape, const VectorMatrixOperands& operands, size_t begin, size_t end, Steps steps) {
  size_t block = begin;
  for (; block + 4 <= end; block += 4) {
    const Weight* w0 = block_start<Weight>(shape, operands, block);
    const Weight* w1 = block_start<Weight>(shape, operands, block + 1);
    const Weight* w2 = block_start<Weight>(shape, operands, block + 2);
    const Weight* w3 = block_start<Weight>(shape, operands, block + 3);
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps(), s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
    for (size_t step = 0; step < steps.count; ++step) {
      s0 = steps.add(w0, step, s0);
      s1 = steps.add(w1, step, s1);
      s2 = steps.add(w2, step, s2);
      s3 = steps.add(w3, step, s3);
    }
    store_block_avx512(shape, s0, operands, block);
    store_block_avx512(shape, s1, operands, block + 1);
    store_block_avx512(shape, s2, operands, block + 2);
    store_block_avx512(shape, s3, operands, block + 3);
  }
  for (; block < end; ++block) {
    const Weight* w = block_start<Weight>(shape, operands, block);
    __m512 sum = _mm512_setzero_ps();
    for (size_t step = 0; step < steps.count; ++step) {
      sum = steps.add(w, step, sum);
    }
    store_block_avx512(shape, sum, operands, block);
  }
}

// A step per row value: 16 weights of row k.
template <typename Weight>
struct RowSteps {
  const VectorMatrixShape& shape;
  const VectorMatrixOperands& operands;
  size_t count = shape.k;
  ODNN_AVX512 __m512 add(const Weight* weights, size_t k, __m512 sum) const {
    return _mm512_fmadd_ps(
        _mm512_set1_ps(row_value<Weight>(operands, k)), load16(weights + k * shape.packed_width), sum);
  }
};

// bf16 pairs (k even in the low half, k odd in the high half of each 32 bits) as two f32 vectors.
struct PairHalves {
  __m512 even, odd;
};

ODNN_AVX512 PairHalves load16_pairs(const uint16_t* at) {
  const __m512i pairs = _mm512_loadu_si512(at);
  return {
      _mm512_castsi512_ps(_mm512_slli_epi32(pairs, 16)),
      _mm512_castsi512_ps(_mm512_and_si512(pairs, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))))};
}

// A step per pair of row values: 16 pairs of weights of rows 2q and 2q + 1.
struct PairSteps {
  const VectorMatrixShape& shape;
  const VectorMatrixOperands& operands;
  size_t count = (shape.k + 1) / 2;
  ODNN_AVX512 __m512 add(const uint16_t* weights, size_t pair, __m512 sum) const {
    const PairHalves halves = load16_pairs(weights + pair * 2 * shape.packed_width);
    const auto [x_even, x_odd] = row_pair(shape, operands, 2 * pair);
    return _mm512_fmadd_ps(
        _mm512_set1_ps(x_odd), halves.odd, _mm512_fmadd_ps(_mm512_set1_ps(x_even), halves.even, sum));
  }
};

template <typename Weight>
ODNN_AVX512 void blocks_avx512(
    const VectorMatrixShape& shape, const VectorMatrixOperands& operands, size_t begin, size_t end) {
  walk_blocks_avx512<Weight>(shape, operands, begin, end, RowSteps<Weight>{shape, operands});
}

template <typename Weight>
ODNN_AVX2 __m256 load8(const Weight* at) {
  if constexpr (std::is_same_v<Weight, uint16_t>) {
    const __m128i half = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(half), 16));
  } else {
    return _mm256_loadu_ps(at);
  }
}

ODNN_AVX2 void store_block_avx2(
    const VectorMatrixShape& shape, __m256 low, __m256 high, const VectorMatrixOperands& operands, size_t block) {
  float sums[kBlock];
  _mm256_storeu_ps(sums, low);
  _mm256_storeu_ps(sums + 8, high);
  store_columns(shape, operands, sums, block);
}

// Two blocks at a time: each is two 8-wide halves, so four streams of FMAs as on AVX-512.
template <typename Weight>
ODNN_AVX2 void blocks_avx2(
    const VectorMatrixShape& shape, const VectorMatrixOperands& operands, size_t begin, size_t end) {
  const size_t row_stride = shape.packed_width;
  size_t block = begin;
  for (; block + 2 <= end; block += 2) {
    const Weight* w0 = block_start<Weight>(shape, operands, block);
    const Weight* w1 = block_start<Weight>(shape, operands, block + 1);
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    for (size_t k = 0; k < shape.k; ++k) {
      const __m256 x = _mm256_set1_ps(row_value<Weight>(operands, k));
      const size_t at = k * row_stride;
      s0 = _mm256_fmadd_ps(x, load8(w0 + at), s0);
      s1 = _mm256_fmadd_ps(x, load8(w0 + at + 8), s1);
      s2 = _mm256_fmadd_ps(x, load8(w1 + at), s2);
      s3 = _mm256_fmadd_ps(x, load8(w1 + at + 8), s3);
    }
    store_block_avx2(shape, s0, s1, operands, block);
    store_block_avx2(shape, s2, s3, operands, block + 1);
  }
  if (block < end) {
    const Weight* w = block_start<Weight>(shape, operands, block);
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    for (size_t k = 0; k < shape.k; ++k) {
      const __m256 x = _mm256_set1_ps(row_value<Weight>(operands, k));
      s0 = _mm256_fmadd_ps(x, load8(w + k * row_stride), s0);
      s1 = _mm256_fmadd_ps(x, load8(w + k * row_stride + 8), s1);
    }
    store_block_avx2(shape, s0, s1, operands, block);
  }
}

// Kept for completeness: the builder takes the host path only where AVX2 or AVX-512 runs.
template <typename Weight>
void blocks_scalar(const VectorMatrixShape& shape, const VectorMatrixOperands& operands, size_t begin, size_t end) {
  for (size_t block = begin; block < end; ++block) {
    const Weight* weights = block_start<Weight>(shape, operands, block);
    float sums[kBlock] = {};
    for (size_t k = 0; k < shape.k; ++k) {
      const float x = row_value<Weight>(operands, k);
      for (size_t c = 0; c < kBlock; ++c) {
        const Weight w = weights[k * shape.packed_width + c];
        if constexpr (std::is_same_v<Weight, uint16_t>) {
          sums[c] += x * from_bf16_bits(w);
        } else {
          sums[c] += x * w;
        }
      }
    }
    store_columns(shape, operands, sums, block);
  }
}

ODNN_AVX512 void paired_blocks_avx512(
    const VectorMatrixShape& shape, const VectorMatrixOperands& operands, size_t begin, size_t end) {
  walk_blocks_avx512<uint16_t>(shape, operands, begin, end, PairSteps{shape, operands});
}

// Eight columns' pairs.
ODNN_AVX2 __m256 add_pair_avx2(const uint16_t* at, std::pair<float, float> x, __m256 sum) {
  const __m256i pairs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at));
  const __m256 even = _mm256_castsi256_ps(_mm256_slli_epi32(pairs, 16));
  const __m256 odd = _mm256_castsi256_ps(_mm256_and_si256(pairs, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
  return _mm256_fmadd_ps(_mm256_set1_ps(x.second), odd, _mm256_fmadd_ps(_mm256_set1_ps(x.first), even, sum));
}

ODNN_AVX2 void paired_blocks_avx2(
    const VectorMatrixShape& shape, const VectorMatrixOperands& operands, size_t begin, size_t end) {
  const size_t pair_stride = 2 * shape.packed_width;
  for (size_t block = begin; block < end; ++block) {
    const uint16_t* w = block_start<uint16_t>(shape, operands, block);
    __m256 low = _mm256_setzero_ps(), high = _mm256_setzero_ps();
    for (size_t k = 0; k < shape.k; k += 2) {
      const auto x = row_pair(shape, operands, k);
      low = add_pair_avx2(w + k / 2 * pair_stride, x, low);
      high = add_pair_avx2(w + k / 2 * pair_stride + 16, x, high);
    }
    store_block_avx2(shape, low, high, operands, block);
  }
}

void paired_blocks_scalar(
    const VectorMatrixShape& shape, const VectorMatrixOperands& operands, size_t begin, size_t end) {
  for (size_t block = begin; block < end; ++block) {
    const uint16_t* weights = block_start<uint16_t>(shape, operands, block);
    float sums[kBlock] = {};
    for (size_t k = 0; k < shape.k; k += 2) {
      const auto [even, odd] = row_pair(shape, operands, k);
      const uint16_t* pairs = weights + k / 2 * 2 * shape.packed_width;
      for (size_t c = 0; c < kBlock; ++c) {
        sums[c] += even * from_bf16_bits(pairs[2 * c]);
        sums[c] += odd * from_bf16_bits(pairs[2 * c + 1]);
      }
    }
    store_columns(shape, operands, sums, block);
  }
}

template <typename Weight>
void blocks(const VectorMatrixShape& shape, const VectorMatrixOperands& operands, size_t begin, size_t end) {
  if constexpr (std::is_same_v<Weight, uint16_t>) {
    if (shape.paired_rows) {
      if (shape.isa == RowIsa::avx512) {
        paired_blocks_avx512(shape, operands, begin, end);
      } else if (shape.isa == RowIsa::avx2) {
        paired_blocks_avx2(shape, operands, begin, end);
      } else {
        paired_blocks_scalar(shape, operands, begin, end);
      }
      return;
    }
  }
  if (shape.isa == RowIsa::avx512) {
    blocks_avx512<Weight>(shape, operands, begin, end);
  } else if (shape.isa == RowIsa::avx2) {
    blocks_avx2<Weight>(shape, operands, begin, end);
  } else {
    blocks_scalar<Weight>(shape, operands, begin, end);
  }
}

} // namespace

void vector_times_matrix(
    const VectorMatrixShape& shape, const VectorMatrixOperands& operands, size_t begin, size_t end) {
  if (shape.bf16) {
    blocks<uint16_t>(shape, operands, begin, end);
  } else {
    blocks<float>(shape, operands, begin, end);
  }
}

} // namespace executorch::backends::onednn
