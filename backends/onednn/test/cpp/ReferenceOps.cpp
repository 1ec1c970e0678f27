// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
#include "ReferenceOps.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace onednn_test {

std::vector<float> conv2d_ref(
    const Conv2dParams& p, const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& bias) {
  const int64_t icg = p.ic / p.groups, ocg = p.oc / p.groups;
  std::vector<float> out(p.n * p.oc * p.oh * p.ow);
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t oc = 0; oc < p.oc; ++oc)
      for (int64_t oh = 0; oh < p.oh; ++oh)
        for (int64_t ow = 0; ow < p.ow; ++ow) {
          const int64_t g = oc / ocg;
          double sum = bias.empty() ? 0.0 : bias[oc];
          for (int64_t c = 0; c < icg; ++c)
            for (int64_t kh = 0; kh < p.kh; ++kh)
              for (int64_t kw = 0; kw < p.kw; ++kw) {
                const int64_t ih = oh * p.stride_h - p.pad_top + kh * p.dilation_h;
                const int64_t iw = ow * p.stride_w - p.pad_left + kw * p.dilation_w;
                if (ih < 0 || ih >= p.ih || iw < 0 || iw >= p.iw)
                  continue;
                sum += double(x[((n * p.ic + g * icg + c) * p.ih + ih) * p.iw + iw]) *
                       w[((oc * icg + c) * p.kh + kh) * p.kw + kw];
              }
          out[((n * p.oc + oc) * p.oh + oh) * p.ow + ow] = static_cast<float>(sum);
        }
  return out;
}

std::vector<float> deconv2d_ref(
    const Conv2dParams& p, const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& bias) {
  const int64_t icg = p.ic / p.groups, ocg = p.oc / p.groups;
  std::vector<double> acc(p.n * p.oc * p.oh * p.ow, 0.0);
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t ic = 0; ic < p.ic; ++ic)
      for (int64_t ih = 0; ih < p.ih; ++ih)
        for (int64_t iw = 0; iw < p.iw; ++iw) {
          const int64_t g = ic / icg;
          for (int64_t o = 0; o < ocg; ++o)
            for (int64_t kh = 0; kh < p.kh; ++kh)
              for (int64_t kw = 0; kw < p.kw; ++kw) {
                const int64_t oh = ih * p.stride_h - p.pad_top + kh * p.dilation_h;
                const int64_t ow = iw * p.stride_w - p.pad_left + kw * p.dilation_w;
                if (oh < 0 || oh >= p.oh || ow < 0 || ow >= p.ow)
                  continue;
                const int64_t oc = g * ocg + o;
                acc[((n * p.oc + oc) * p.oh + oh) * p.ow + ow] +=
                    double(x[((n * p.ic + ic) * p.ih + ih) * p.iw + iw]) * w[((ic * ocg + o) * p.kh + kh) * p.kw + kw];
              }
        }
  std::vector<float> out(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) {
    const int64_t oc = static_cast<int64_t>(i) / (p.oh * p.ow) % p.oc;
    out[i] = static_cast<float>(acc[i] + (bias.empty() ? 0.0 : bias[oc]));
  }
  return out;
}

std::vector<float> matmul_ref(
    const std::vector<float>& a,
    const std::vector<float>& b,
    const std::vector<float>& bias,
    int64_t batch,
    int64_t batch_b,
    int64_t m,
    int64_t k,
    int64_t n,
    bool transpose_b) {
  std::vector<float> out(batch * m * n);
  for (int64_t bi = 0; bi < batch; ++bi) {
    const int64_t bb = batch_b == 1 ? 0 : bi;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = bias.empty() ? 0.0 : bias[j];
        for (int64_t q = 0; q < k; ++q) {
          const float bv = transpose_b ? b[(bb * n + j) * k + q] : b[(bb * k + q) * n + j];
          sum += double(a[(bi * m + i) * k + q]) * bv;
        }
        out[(bi * m + i) * n + j] = static_cast<float>(sum);
      }
  }
  return out;
}

std::vector<float> pool2d_ref(const Conv2dParams& p, PoolRef kind, const std::vector<float>& x) {
  std::vector<float> out(p.n * p.ic * p.oh * p.ow);
  for (int64_t nc = 0; nc < p.n * p.ic; ++nc)
    for (int64_t oh = 0; oh < p.oh; ++oh)
      for (int64_t ow = 0; ow < p.ow; ++ow) {
        double acc = kind == PoolRef::Max ? -std::numeric_limits<double>::infinity() : 0.0;
        int64_t valid = 0;
        for (int64_t kh = 0; kh < p.kh; ++kh)
          for (int64_t kw = 0; kw < p.kw; ++kw) {
            const int64_t ih = oh * p.stride_h - p.pad_top + kh * p.dilation_h;
            const int64_t iw = ow * p.stride_w - p.pad_left + kw * p.dilation_w;
            if (ih < 0 || ih >= p.ih || iw < 0 || iw >= p.iw)
              continue;
            const float v = x[(nc * p.ih + ih) * p.iw + iw];
            acc = kind == PoolRef::Max ? std::max(acc, double(v)) : acc + v;
            ++valid;
          }
        if (kind == PoolRef::AvgInclude)
          acc /= double(p.kh * p.kw);
        if (kind == PoolRef::AvgExclude)
          acc /= double(valid);
        out[(nc * p.oh + oh) * p.ow + ow] = static_cast<float>(acc);
      }
  return out;
}

std::vector<float> softmax_ref(const std::vector<float>& x, const std::vector<int64_t>& dims, int axis, bool log) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d)
    outer *= dims[d];
  for (size_t d = axis + 1; d < dims.size(); ++d)
    inner *= dims[d];
  const int64_t len = dims[axis];
  std::vector<float> out(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t a) { return (o * len + a) * inner + i; };
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t a = 0; a < len; ++a)
        mx = std::max(mx, double(x[at(a)]));
      double sum = 0.0;
      for (int64_t a = 0; a < len; ++a)
        sum += std::exp(x[at(a)] - mx);
      for (int64_t a = 0; a < len; ++a) {
        const double shifted = x[at(a)] - mx;
        out[at(a)] = static_cast<float>(log ? shifted - std::log(sum) : std::exp(shifted) / sum);
      }
    }
  return out;
}

std::vector<float> permute_ref(
    const std::vector<float>& x, const std::vector<int64_t>& dims, const std::vector<int64_t>& permutation) {
  std::vector<int64_t> out_dims;
  for (int64_t axis : permutation)
    out_dims.push_back(dims[axis]);
  const auto in_strides = row_major(dims);
  const auto out_strides = row_major(out_dims);
  std::vector<float> out(x.size());
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t rest = static_cast<int64_t>(i), source = 0;
    for (size_t d = 0; d < out_dims.size(); ++d) {
      source += rest / out_strides[d] * in_strides[permutation[d]];
      rest %= out_strides[d];
    }
    out[i] = x[source];
  }
  return out;
}

std::vector<float> relu_ref(std::vector<float> x) {
  for (float& v : x)
    v = std::max(v, 0.0f);
  return x;
}

} // namespace onednn_test
