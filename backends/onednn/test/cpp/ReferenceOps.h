// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// Straightforward reference loops (PyTorch semantics, NCHW, row-major) to check the backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace onednn_test {

struct Conv2dParams {
  int64_t n, ic, ih, iw, oc, kh, kw;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0; // padding_l; padding_r follows from the output size
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
  int64_t oh, ow;
};

// weights [OC, IC/g, kh, kw]; bias [OC] or empty.
std::vector<float> conv2d_ref(
    const Conv2dParams& p, const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& bias);

// conv_transpose2d; weights [IC, OC/g, kh, kw]; pad_top/pad_left = PyTorch padding.
std::vector<float> deconv2d_ref(
    const Conv2dParams& p, const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& bias);

// a [batch, M, K] x b [batch_b (1 or batch), K, N] (or [.., N, K] with transpose_b) + bias[N].
std::vector<float> matmul_ref(
    const std::vector<float>& a,
    const std::vector<float>& b,
    const std::vector<float>& bias,
    int64_t batch,
    int64_t batch_b,
    int64_t m,
    int64_t k,
    int64_t n,
    bool transpose_b);

// Elementwise src0 op src1 with numpy broadcasting (dims of equal rank).
template <typename Op>
std::vector<float> broadcast_ref(
    const std::vector<float>& a,
    const std::vector<int64_t>& a_dims,
    const std::vector<float>& b,
    const std::vector<int64_t>& b_dims,
    Op op);

// 2-D pooling; max ignores padding, avg divides by the kernel size (include) or valid count.
enum class PoolRef { Max, AvgInclude, AvgExclude };
std::vector<float> pool2d_ref(const Conv2dParams& p, PoolRef kind, const std::vector<float>& x);

std::vector<float> softmax_ref(const std::vector<float>& x, const std::vector<int64_t>& dims, int axis, bool log);

std::vector<float> permute_ref(
    const std::vector<float>& x, const std::vector<int64_t>& dims, const std::vector<int64_t>& permutation);

std::vector<float> relu_ref(std::vector<float> x);

// ---- template definitions ----

inline std::vector<int64_t> row_major(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t d = dims.size(); d-- > 1;) {
    strides[d - 1] = strides[d] * dims[d];
  }
  return strides;
}

template <typename Op>
std::vector<float> broadcast_ref(
    const std::vector<float>& a,
    const std::vector<int64_t>& a_dims,
    const std::vector<float>& b,
    const std::vector<int64_t>& b_dims,
    Op op) {
  const auto a_strides = row_major(a_dims);
  const auto b_strides = row_major(b_dims);
  std::vector<float> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    int64_t rest = static_cast<int64_t>(i);
    int64_t b_index = 0;
    for (size_t d = 0; d < a_dims.size(); ++d) {
      const int64_t coordinate = rest / a_strides[d];
      rest %= a_strides[d];
      b_index += (b_dims[d] == 1 ? 0 : coordinate) * b_strides[d];
    }
    out[i] = op(a[i], b[b_index]);
  }
  return out;
}

} // namespace onednn_test
