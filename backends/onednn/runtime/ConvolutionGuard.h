// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// Some of oneDNN's bf16 convolution kernels multiply inputs outside an output's window by zero
// weights, so an infinity there becomes a NaN where eager PyTorch computes a finite value or an
// infinity. They pair the reduction's values across something other than real input channels:
// - the AVX512-BF16 kernels whose weights pad the input channels to pairs while their src keeps them
//   unpadded (odd channel counts, and for one channel their 1x1 ones): the pair's missing channel is
//   the next pixel's value. The AMX kernels with those weights keep the infinity (they copy src into
//   tiles, which pads the pair with a zero);
// - every kernel whose weights block the output channels but not the input channels, so that the
//   reduction runs over taps x channels and pairs straddle the kernel's taps (3x3 and more): the
//   last tap's partner lies outside the window. That is 3.13.1's brgemm kernel for an odd channel
//   count (weights "Adcb16a") and its AMX kernel for few input channels ("jit:avx10_1_512_amx", named
//   "jit:avx512_core_amx" in oneDNN 3.2, where it also spread them).
// Those are fast for first layers (the AMX one 3-14x the next kernel in 3.2), so they stay the kernel
// for finite inputs and are guarded. test/cpp/ConvolutionGuardTest.cpp runs every kernel oneDNN offers
// for 1-16 input channels, kernels 1x1-7x7, strides 1-2 on the CPU at hand and checks that this
// predicate flags exactly the ones that spread an infinity (oneDNN 3.13.1, 2026-12-04: 200 kernels on
// the AVX512-BF16 Zen 4, 315 on the AMX Xeon). f32 kernels, and the deconvolutions tried, keep NaN
// and infinities.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include <oneapi/dnnl/dnnl.hpp>

namespace executorch::backends::onednn {

// Whether the convolution `pd` chose may turn an infinity outside an output's window into a NaN or an
// infinity there. `input_channel_axis`: of oneDNN's weights dims (2 when grouped, else 1).
inline bool spreads_non_finite(const dnnl::primitive_desc_base& pd, int input_channel_axis) {
  const dnnl::memory::data_type src = pd.src_desc(0).get_data_type();
  if (src != dnnl::memory::data_type::bf16 && src != dnnl::memory::data_type::f16) {
    return false;
  }
  const dnnl::memory::desc weights = pd.weights_desc(0);
  const std::string implementation = pd.impl_info_str();
  const dnnl::memory::dims dims = weights.get_dims();
  // Weights padded to pairs of input channels, on a src whose channels are not padded (plain), outside AMX.
  const dnnl::memory::desc src_desc = pd.src_desc(0);
  const bool weights_padded = weights.get_padded_dims()[input_channel_axis] != dims[input_channel_axis];
  const bool amx = implementation.find("amx") != std::string::npos;
  if (weights_padded && src_desc.get_padded_dims()[1] == src_desc.get_dims()[1] && !amx) {
    return true;
  }
  // Pairs across a kernel's taps: weights blocked, but not along the input channels.
  int64_t taps = 1;
  for (size_t axis = input_channel_axis + 1; axis < dims.size(); ++axis) {
    taps *= dims[axis];
  }
  const dnnl::memory::dims blocked_axes = weights.get_inner_idxs();
  const bool channels_unblocked =
      !blocked_axes.empty() &&
      std::find(blocked_axes.begin(), blocked_axes.end(), input_channel_axis) == blocked_axes.end();
  return channels_unblocked && taps > 1;
}

} // namespace executorch::backends::onednn
