// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// bf16 values as raw bits, converted on the host.
#pragma once

#include <cstdint>
#include <cstring>

namespace executorch::backends::onednn {

// The f32 value a bf16 one stands for (exact).
inline float from_bf16_bits(uint16_t bits) {
  const uint32_t widened = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &widened, sizeof(value));
  return value;
}

// Round to nearest even, as oneDNN converts f32 to bf16.
inline uint16_t to_bf16_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if (value != value) {
    return 0x7FC0;
  }
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

} // namespace executorch::backends::onednn
