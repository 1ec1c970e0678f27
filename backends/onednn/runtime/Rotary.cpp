// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
#include "Rotary.h"

#include "Bf16.h"

namespace executorch::backends::onednn {
namespace {

// No product is fused into the sum: baseline x86-64 has no FMA, and CMake compiles this file with
// -ffp-contract=off for builds that pass -march.
template <typename Load, typename Store>
void rotate(
    const RotaryRows& rows, const float* cos, const float* sin, size_t begin, size_t end, Load load, Store store) {
  for (size_t r = begin; r < end; ++r) {
    const float* c = cos + static_cast<size_t>(rows.table_rows[r]) * rows.pairs;
    const float* s = sin + static_cast<size_t>(rows.table_rows[r]) * rows.pairs;
    const size_t first = 2 * r * rows.pairs;
    for (size_t p = 0; p < rows.pairs; ++p) {
      const float x0 = load(first + 2 * p), x1 = load(first + 2 * p + 1);
      const float real0 = x0 * c[p], real1 = x1 * s[p];
      const float imag0 = x0 * s[p], imag1 = x1 * c[p];
      store(first + 2 * p, real0 - real1);
      store(first + 2 * p + 1, imag0 + imag1);
    }
  }
}

} // namespace

void rotary_rows(
    const RotaryRows& rows, const void* src, const float* cos, const float* sin, void* dst, size_t begin, size_t end) {
  if (rows.bf16) {
    const auto* in = static_cast<const uint16_t*>(src);
    auto* out = static_cast<uint16_t*>(dst);
    rotate(
        rows,
        cos,
        sin,
        begin,
        end,
        [&](size_t i) { return from_bf16_bits(in[i]); },
        [&](size_t i, float v) { out[i] = to_bf16_bits(v); });
    return;
  }
  const auto* in = static_cast<const float*>(src);
  auto* out = static_cast<float*>(dst);
  rotate(rows, cos, sin, begin, end, [&](size_t i) { return in[i]; }, [&](size_t i, float v) { out[i] = v; });
}

} // namespace executorch::backends::onednn
