// Work oneDNN has no primitive for, run on the calling thread between primitives (the CPU stream
// executes in order and synchronously, so the data is there).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

namespace executorch::backends::onednn {

struct HostLoop {
  enum class Kind : unsigned char {
    Fill, // dst[:] = value
    ZeroFullyMaskedRows, // dst row = 0 where every src entry along the row is -inf
  };
  Kind kind = Kind::Fill;
  float value = 0.0f;
  bool bf16 = false; // Fill: dst holds bf16 (ZeroFullyMaskedRows is f32 only)
  // Rows for ZeroFullyMaskedRows: plain [outer, extent, inner], a row runs along `extent`.
  size_t outer = 0;
  size_t extent = 0;
  size_t inner = 0;
};

// PyTorch's safe softmax returns zeros for a row masked entirely (oneDNN's softmax gives NaN).
inline void zero_fully_masked_rows(const HostLoop& loop, const float* src, float* dst) {
  const float minus_infinity = -std::numeric_limits<float>::infinity();
  for (size_t o = 0; o < loop.outer; ++o) {
    for (size_t i = 0; i < loop.inner; ++i) {
      const size_t base = o * loop.extent * loop.inner + i;
      bool masked = true;
      for (size_t e = 0; masked && e < loop.extent; ++e) {
        masked = src[base + e * loop.inner] == minus_infinity;
      }
      for (size_t e = 0; masked && e < loop.extent; ++e) {
        dst[base + e * loop.inner] = 0.0f;
      }
    }
  }
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

inline void run_host_loop(const HostLoop& loop, const void* src, void* dst, size_t dst_count) {
  switch (loop.kind) {
    case HostLoop::Kind::Fill:
      if (loop.bf16) {
        std::fill_n(static_cast<uint16_t*>(dst), dst_count, to_bf16_bits(loop.value));
      } else {
        std::fill_n(static_cast<float*>(dst), dst_count, loop.value);
      }
      break;
    case HostLoop::Kind::ZeroFullyMaskedRows:
      zero_fully_masked_rows(loop, static_cast<const float*>(src), static_cast<float*>(dst));
      break;
  }
}

} // namespace executorch::backends::onednn
