// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// Host kernels behind the NaN guards: oneDNN (3.2, 3.13.1) loses a NaN in max pooling, max/min reduction, exp,
// hardsigmoid, and relu or clamp fused as a post-op (it computes them with max/min instructions that
// return the bound for a NaN, or clamps exp's argument). A guarded step scans its inputs at execute
// time and, only when one holds a NaN or an infinity, runs these instead or after, as PyTorch does.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "Schema.h"

namespace executorch::backends::onednn {

// Whether values [begin, end) hold a NaN or an infinity: every exponent bit set. Branch-free, so the
// loop vectorizes; f32, or bf16 (the upper half of an f32).
inline bool holds_non_finite(const void* data, bool bf16, size_t begin, size_t end) {
  unsigned found = 0;
  if (bf16) {
    const auto* bits = static_cast<const uint16_t*>(data);
    for (size_t i = begin; i < end; ++i) {
      found |= (bits[i] & 0x7F80u) == 0x7F80u;
    }
  } else {
    const auto* bits = static_cast<const uint32_t*>(data);
    for (size_t i = begin; i < end; ++i) {
      found |= (bits[i] & 0x7F800000u) == 0x7F800000u;
    }
  }
  return found != 0;
}

// dst = NaN where src is NaN (both f32 or both bf16, same layout), values [begin, end).
inline void keep_nan(const void* src, void* dst, bool bf16, size_t begin, size_t end) {
  if (bf16) {
    const auto* x = static_cast<const uint16_t*>(src);
    auto* y = static_cast<uint16_t*>(dst);
    for (size_t i = begin; i < end; ++i) {
      y[i] = (x[i] & 0x7FFFu) > 0x7F80u ? x[i] : y[i];
    }
    return;
  }
  const auto* x = static_cast<const float*>(src);
  auto* y = static_cast<float*>(dst);
  for (size_t i = begin; i < end; ++i) {
    y[i] = std::isnan(x[i]) ? x[i] : y[i];
  }
}

// PyTorch's max pooling of plain f32 planes (N * C of them), up to 3 spatial dims (leading ones 1):
// out[o] = max over in[o * stride - pad + k * dilation] for the k that land inside the input, a NaN
// winning over every number.
struct MaxPoolPlanes {
  size_t planes = 0;
  size_t in[3] = {1, 1, 1};
  size_t out[3] = {1, 1, 1};
  size_t kernel[3] = {1, 1, 1};
  size_t stride[3] = {1, 1, 1};
  size_t dilation[3] = {1, 1, 1}; // 1 = dense
  size_t pad[3] = {0, 0, 0};      // before the first input
};

namespace nan_kernels_detail {
inline float nan_max(float best, float x) {
  return (x > best || std::isnan(x)) && !std::isnan(best) ? x : best;
}
} // namespace nan_kernels_detail

// Planes [begin, end).
inline void max_pool_planes(const MaxPoolPlanes& pool, const float* src, float* dst, size_t begin, size_t end) {
  const size_t in_plane = pool.in[0] * pool.in[1] * pool.in[2];
  const size_t out_plane = pool.out[0] * pool.out[1] * pool.out[2];
  // Input positions of window `o` along `dim`: first + k * dilation for k < kernel, kept when in range.
  const auto inside = [&](size_t dim, size_t o, size_t k, size_t& position) {
    const size_t shifted = o * pool.stride[dim] + k * pool.dilation[dim];
    if (shifted < pool.pad[dim] || shifted - pool.pad[dim] >= pool.in[dim]) {
      return false;
    }
    position = shifted - pool.pad[dim];
    return true;
  };
  for (size_t plane = begin; plane < end; ++plane) {
    const float* x = src + plane * in_plane;
    float* y = dst + plane * out_plane;
    for (size_t od = 0; od < pool.out[0]; ++od) {
      for (size_t oh = 0; oh < pool.out[1]; ++oh) {
        for (size_t ow = 0; ow < pool.out[2]; ++ow) {
          float best = -std::numeric_limits<float>::infinity();
          size_t d, h, w;
          for (size_t kd = 0; kd < pool.kernel[0]; ++kd) {
            if (!inside(0, od, kd, d)) {
              continue;
            }
            for (size_t kh = 0; kh < pool.kernel[1]; ++kh) {
              if (!inside(1, oh, kh, h)) {
                continue;
              }
              for (size_t kw = 0; kw < pool.kernel[2]; ++kw) {
                if (inside(2, ow, kw, w)) {
                  best = nan_kernels_detail::nan_max(best, x[(d * pool.in[1] + h) * pool.in[2] + w]);
                }
              }
            }
          }
          y[(od * pool.out[1] + oh) * pool.out[2] + ow] = best;
        }
      }
    }
  }
}

// Max or min of plain f32 src over the dims where dst's size is 1 (dst keeps src's rank), a NaN
// winning over every number.
struct ExtremumReduction {
  size_t rank = 0;
  size_t src_dims[kMaxRank] = {};
  size_t dst_strides[kMaxRank] = {}; // 0 along a reduced dim
  size_t dst_count = 0;
  bool min = false;
};

inline void reduce_extremum(const ExtremumReduction& reduction, const float* src, float* dst) {
  const float start = reduction.min ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < reduction.dst_count; ++i) {
    dst[i] = start;
  }
  size_t index[kMaxRank] = {};
  size_t total = 1;
  for (size_t d = 0; d < reduction.rank; ++d) {
    total *= reduction.src_dims[d];
  }
  size_t target = 0;
  for (size_t i = 0; i < total; ++i) {
    const float x = reduction.min ? -src[i] : src[i];
    const float best = reduction.min ? -dst[target] : dst[target];
    const float kept = nan_kernels_detail::nan_max(best, x);
    dst[target] = reduction.min ? -kept : kept;
    // Next src index, row-major, keeping `target` in step.
    for (size_t d = reduction.rank; d-- > 0;) {
      target += reduction.dst_strides[d];
      if (++index[d] < reduction.src_dims[d]) {
        break;
      }
      target -= index[d] * reduction.dst_strides[d];
      index[d] = 0;
    }
  }
}

} // namespace executorch::backends::onednn
