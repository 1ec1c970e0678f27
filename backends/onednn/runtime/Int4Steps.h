// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// What the int8-unit kernels of Int4VectorMatrix.h share: an int8 row times the packed int4 weights
// (torch's [n, k] layout, two values a byte along k) in steps of 128 values, 64 bytes of weights (a
// cache line), then one step of 64 where k % 128 == 64. A step's bytes make two vectors, the low
// nibbles (k even) and the high ones (k odd), each value plus 8 as an unsigned byte (dpbusd's first
// operand), against the row's values at even k then those at odd k (arrange_for_steps()): lane i of
// the products then holds k in [8i, 8i + 8), and lanes 4s to 4s + 3 hold the step's 32 values of
// segment s. Include in .cpp files only (VectorTargets.h).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "VectorTargets.h"

#define ODNN_AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")))
#define ODNN_AVX2_VNNI __attribute__((target("avx2,fma,avxvnni")))

namespace executorch::backends::onednn {

constexpr size_t kStep = 128;   // values per step
constexpr size_t kSegment = 32; // values per scale at most: a vector's lanes hold whole segments

// k values of a row into `out` in the order the steps read them: per step, its values at even k, then
// those at odd k (a last step of 64: its 32 at even k, then its 32 at odd k). k a multiple of 64.
ODNN_AVX2 void arrange_for_steps(const int8_t* q, size_t k, int8_t* out);

// A row's bytes for the kernels to read, starting on a cache line: a vector's storage is aligned to 16
// bytes, and each 64-byte load that straddles two lines costs two (a decode step of bf16 rows ran 8%
// slower, measured in one process against the aligned copy).
class LineAlignedBytes {
 public:
  // Room for `count` bytes, its old contents lost where it grows.
  int8_t* resize(size_t count) {
    storage_.resize(count + 63);
    const auto misalignment = reinterpret_cast<uintptr_t>(storage_.data()) % 64;
    data_ = storage_.data() + (misalignment == 0 ? 0 : 64 - misalignment);
    return data_;
  }
  const int8_t* data() const {
    return data_;
  }

 private:
  std::vector<int8_t> storage_;
  int8_t* data_ = nullptr;
};

// Weights fetched ahead of the stream the kernels read: a call reads its rows front to back, and rows
// are contiguous. Into L2, 4 KiB ahead, never past the call's last row (the next ones may be another
// thread's). One thread, 1 GiB of weights rotated, group 128: 12.3 GB/s against 8.7 without and 10.5
// into L1 (the header's Xeon).
constexpr size_t kPrefetchBytes = 4096;

inline void fetch_ahead(const uint8_t* at, const uint8_t* last_line) {
  // In integers: the address 4 KiB on may lie past the weights, where a pointer may not point.
  const uintptr_t ahead =
      std::min(reinterpret_cast<uintptr_t>(at) + kPrefetchBytes, reinterpret_cast<uintptr_t>(last_line));
  _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T1);
}

// The start of the last line that rows [0, end) of k values occupy (their start, for less than a line).
inline const uint8_t* last_line_of(size_t k, const uint8_t* weights, size_t end) {
  const size_t bytes = end * (k / 2);
  return weights + (bytes > 64 ? bytes - 64 : 0);
}

// The first min(count, 16) lanes of a 16-lane vector (a mask is a plain integer: no target needed).
inline __mmask16 first_lanes(size_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << count) - 1u);
}

// Each nibble of `bytes` (in its byte's low half) plus 8, in [0, 15]: the nibble masked, xor 8.
ODNN_AVX512_VNNI inline __m512i biased_nibbles_avx512(__m512i bytes) {
  return _mm512_ternarylogic_epi32(bytes, _mm512_set1_epi8(0x0F), _mm512_set1_epi8(0x08), 0x6A); // (a & b) ^ c
}

} // namespace executorch::backends::onednn
