// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// Each test builds a small graph, runs it through the registered backend and compares against
// the reference loops in ReferenceOps.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "../../runtime/Bf16.h"
#include "../../runtime/CpuIsa.h"
#include "BackendHarness.h"
#include "ReferenceOps.h"

namespace onednn_test {
namespace {

int64_t conv_out(int64_t in, int64_t k, int64_t s, int64_t pl, int64_t pr, int64_t d) {
  return (in + pl + pr - d * (k - 1) - 1) / s + 1;
}

std::vector<Attr> conv_attrs(const Conv2dParams& p, int64_t pad_bottom, int64_t pad_right) {
  return {
      ints("strides", {p.stride_h, p.stride_w}),
      ints("padding_l", {p.pad_top, p.pad_left}),
      ints("padding_r", {pad_bottom, pad_right}),
      ints("dilation", {p.dilation_h, p.dilation_w}),
      ints("groups", {p.groups}),
  };
}

// A single CONVOLUTION step on random data, checked against conv2d_ref (+ relu if asked).
void check_conv2d(Conv2dParams p, int64_t pad_bottom, int64_t pad_right, bool relu_post_op) {
  p.oh = conv_out(p.ih, p.kh, p.stride_h, p.pad_top, pad_bottom, p.dilation_h);
  p.ow = conv_out(p.iw, p.kw, p.stride_w, p.pad_left, pad_right, p.dilation_w);
  const auto x = random_values(p.n * p.ic * p.ih * p.iw, 1);
  const auto w = random_values(p.oc * (p.ic / p.groups) * p.kh * p.kw, 2);
  const auto bias = random_values(p.oc, 3);
  Model model;
  const uint32_t src = model.input({p.n, p.ic, p.ih, p.iw});
  const uint32_t weights = model.constant({p.oc, p.ic / p.groups, p.kh, p.kw}, w);
  const uint32_t b = model.constant({p.oc}, bias);
  const uint32_t dst = model.value({p.n, p.oc, p.oh, p.ow});
  auto attrs = conv_attrs(p, pad_bottom, pad_right);
  if (relu_post_op) {
    attrs.push_back(ints("post_ops", {code_of(PostOpKind::Eltwise), code_of(EltwiseAlg::Relu)}));
    attrs.push_back(floats("post_op_params", {0.0, 0.0}));
  }
  model.payload.step(Kind::Convolution, {src, weights, b}, {dst}, attrs);
  model.output(dst, {p.n, p.oc, p.oh, p.ow});
  const auto outputs = run_model(model, {x});
  ASSERT_EQ(outputs.size(), 1u);
  auto expected = conv2d_ref(p, x, w, bias);
  if (relu_post_op) {
    expected = relu_ref(expected);
  }
  expect_close(outputs[0], expected, "conv2d");
}

TEST(OpCorrectness, Conv2dWithBiasReluPostOpAndAsymmetricPaddingMatchesReference) {
  Conv2dParams p{};
  p.n = 2, p.ic = 4, p.ih = 9, p.iw = 8, p.oc = 6, p.kh = 3, p.kw = 3;
  p.stride_h = 2, p.stride_w = 1, p.pad_top = 1, p.pad_left = 1;
  check_conv2d(p, 0, 2, true);
}

TEST(OpCorrectness, GroupedDilatedConv2dMatchesReference) {
  Conv2dParams p{};
  p.n = 1, p.ic = 8, p.ih = 10, p.iw = 10, p.oc = 12, p.kh = 3, p.kw = 3;
  p.pad_top = 2, p.pad_left = 2, p.dilation_h = 2, p.dilation_w = 2, p.groups = 2;
  check_conv2d(p, 2, 2, false);
}

TEST(OpCorrectness, DepthwiseConv2dMatchesReference) {
  Conv2dParams p{};
  p.n = 1, p.ic = 16, p.ih = 7, p.iw = 7, p.oc = 16, p.kh = 3, p.kw = 3;
  p.pad_top = 1, p.pad_left = 1, p.groups = 16;
  check_conv2d(p, 1, 1, true);
}

// conv -> relu -> conv, with the layouts the plan gives the two intermediates and the output
// (0 native, 1 plain): the runtime must honour each and convert where needed.
void check_conv_relu_conv_chain(uint8_t conv_layout, uint8_t relu_layout, uint8_t dst_layout) {
  Conv2dParams first{};
  first.n = 1, first.ic = 16, first.ih = 12, first.iw = 12, first.oc = 32, first.kh = 3, first.kw = 3;
  first.pad_top = 1, first.pad_left = 1, first.oh = 12, first.ow = 12;
  Conv2dParams second = first;
  second.ic = 32, second.oc = 16, second.kh = 1, second.kw = 1, second.pad_top = 0, second.pad_left = 0;
  const auto x = random_values(16 * 12 * 12, 4);
  const auto w1 = random_values(32 * 16 * 9, 5);
  const auto w2 = random_values(16 * 32, 6);
  Model model;
  const uint32_t src = model.input({1, 16, 12, 12});
  const uint32_t k1 = model.constant({32, 16, 3, 3}, w1);
  const uint32_t k2 = model.constant({16, 32, 1, 1}, w2);
  const uint32_t a = model.value({1, 32, 12, 12});
  const uint32_t r = model.value({1, 32, 12, 12});
  const uint32_t dst = model.value({1, 16, 12, 12});
  model.payload.set_layout(a, conv_layout);
  model.payload.set_layout(r, relu_layout);
  model.payload.set_layout(dst, dst_layout);
  model.payload.step(Kind::Convolution, {src, k1, kNoValue}, {a}, conv_attrs(first, 1, 1));
  model.payload.step(Kind::Eltwise, {a}, {r}, {alg(EltwiseAlg::Relu), floats("alpha", {0}), floats("beta", {0})});
  model.payload.step(Kind::Convolution, {r, k2, kNoValue}, {dst}, conv_attrs(second, 0, 0));
  model.output(dst, {1, 16, 12, 12});
  const auto outputs = run_model(model, {x});
  ASSERT_EQ(outputs.size(), 1u);
  const auto expected = conv2d_ref(second, relu_ref(conv2d_ref(first, x, w1, {})), w2, {});
  const std::string what = "conv -> relu -> conv, layouts " + std::to_string(conv_layout) + "/" +
                           std::to_string(relu_layout) + "/" + std::to_string(dst_layout);
  expect_close(outputs[0], expected, what);
}

TEST(OpCorrectness, ConvReluConvChainThroughIntermediateMatchesReference) {
  check_conv_relu_conv_chain(0, 0, 0);
}

TEST(OpCorrectness, ConvReluConvChainMatchesReferenceInEveryPlannedLayout) {
  for (uint8_t conv_layout = 0; conv_layout < 2; ++conv_layout) {
    for (uint8_t relu_layout = 0; relu_layout < 2; ++relu_layout) {
      for (uint8_t dst_layout = 0; dst_layout < 2; ++dst_layout) {
        check_conv_relu_conv_chain(conv_layout, relu_layout, dst_layout);
      }
    }
  }
}

TEST(OpCorrectness, ConvWithResidualAddPostOpMatchesReference) {
  Conv2dParams p{};
  p.n = 1, p.ic = 8, p.ih = 6, p.iw = 6, p.oc = 8, p.kh = 3, p.kw = 3, p.pad_top = 1, p.pad_left = 1;
  p.oh = 6, p.ow = 6;
  const auto x = random_values(8 * 36, 7);
  const auto w = random_values(8 * 8 * 9, 8);
  const auto residual = random_values(8 * 36, 9);
  Model model;
  const uint32_t src = model.input({1, 8, 6, 6});
  const uint32_t res = model.input({1, 8, 6, 6});
  const uint32_t weights = model.constant({8, 8, 3, 3}, w);
  const uint32_t dst = model.value({1, 8, 6, 6});
  auto attrs = conv_attrs(p, 1, 1);
  attrs.push_back(ints(
      "post_ops",
      {code_of(PostOpKind::Binary), code_of(BinaryAlg::Add), code_of(PostOpKind::Eltwise), code_of(EltwiseAlg::Relu)}));
  attrs.push_back(floats("post_op_params", {0, 0, 0, 0}));
  model.payload.step(Kind::Convolution, {src, weights, kNoValue, res}, {dst}, attrs);
  model.output(dst, {1, 8, 6, 6});
  const auto outputs = run_model(model, {x, residual});
  ASSERT_EQ(outputs.size(), 1u);
  auto expected = conv2d_ref(p, x, w, {});
  for (size_t i = 0; i < expected.size(); ++i) {
    expected[i] = std::max(expected[i] + residual[i], 0.0f);
  }
  expect_close(outputs[0], expected, "conv + residual -> relu");
}

TEST(OpCorrectness, GroupedStridedDeconv2dMatchesReference) {
  // conv_transpose2d(4 -> 6, k=3, stride 2, padding 1, output_padding 1, groups 2)
  Conv2dParams p{};
  p.n = 1, p.ic = 4, p.ih = 5, p.iw = 4, p.oc = 6, p.kh = 3, p.kw = 3;
  p.stride_h = 2, p.stride_w = 2, p.pad_top = 1, p.pad_left = 1, p.groups = 2;
  p.oh = (5 - 1) * 2 - 2 + 2 + 1 + 1, p.ow = (4 - 1) * 2 - 2 + 2 + 1 + 1;
  const auto x = random_values(4 * 5 * 4, 10);
  const auto w = random_values(4 * 3 * 9, 11);
  const auto bias = random_values(6, 12);
  Model model;
  const uint32_t src = model.input({1, 4, 5, 4});
  const uint32_t weights = model.constant({4, 3, 3, 3}, w);
  const uint32_t b = model.constant({6}, bias);
  const uint32_t dst = model.value({1, 6, p.oh, p.ow});
  model.payload.step(Kind::Deconvolution, {src, weights, b}, {dst}, conv_attrs(p, 0, 0));
  model.output(dst, {1, 6, p.oh, p.ow});
  const auto outputs = run_model(model, {x});
  ASSERT_EQ(outputs.size(), 1u);
  expect_close(outputs[0], deconv2d_ref(p, x, w, bias), "deconv2d");
}

// Static int8: quantize (REORDER with a dst scale and zero point) -> int8 CONVOLUTION (u8 src, s8
// weights with per-channel scales, relu, requantized to u8) -> dequantize (REORDER with src ones),
// against the same arithmetic on the host. oneDNN may round the requantized value to the other
// neighbour at a tie, so the result is held to one output quantization step.
TEST(OpCorrectness, Int8ConvolutionWithFusedRequantizationMatchesQuantizedReference) {
  Conv2dParams p{};
  p.n = 1, p.ic = 2, p.ih = p.iw = 5, p.oc = 3, p.kh = p.kw = 3;
  p.pad_top = p.pad_left = 1;
  p.oh = p.ow = 5;
  const float x_scale = 0.02f, y_scale = 0.015f;
  const int64_t x_zero = 120, y_zero = 7;
  const std::vector<double> w_scales = {0.01, 0.02, 0.005};
  const auto x = random_values(p.n * p.ic * p.ih * p.iw, 21);
  const auto w_real = random_values(p.oc * p.ic * p.kh * p.kw, 22);
  const auto bias = random_values(p.oc, 23);
  const size_t per_channel = w_real.size() / p.oc;
  std::vector<uint8_t> w_bytes(w_real.size());
  std::vector<float> w_dequantized(w_real.size());
  for (size_t i = 0; i < w_real.size(); ++i) {
    const double scale = w_scales[i / per_channel];
    const auto q = static_cast<int8_t>(std::lround(std::clamp(w_real[i] / scale, -127.0, 127.0)));
    w_bytes[i] = static_cast<uint8_t>(q);
    w_dequantized[i] = static_cast<float>(q * scale);
  }
  auto quantize = [](float v, float scale, int64_t zero) {
    return std::clamp(std::nearbyint(v / scale) + static_cast<float>(zero), 0.0f, 255.0f);
  };
  std::vector<float> x_dequantized(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    x_dequantized[i] = (quantize(x[i], x_scale, x_zero) - x_zero) * x_scale;
  }
  std::vector<float> expected = relu_ref(conv2d_ref(p, x_dequantized, w_dequantized, bias));
  for (float& v : expected) {
    v = (quantize(v, y_scale, y_zero) - y_zero) * y_scale;
  }

  Model model;
  model.data.add("int8_weights", w_bytes);
  const uint32_t src = model.input({1, 2, 5, 5});
  const uint32_t x_q = model.payload.value({1, 2, 5, 5}, "", /*U8*/ 5);
  const uint32_t weights = model.payload.value({3, 2, 3, 3}, "int8_weights", /*S8*/ 4);
  const uint32_t b = model.constant({3}, bias);
  const uint32_t y_q = model.payload.value({1, 3, 5, 5}, "", 5);
  const uint32_t dst = model.value({1, 3, 5, 5});
  model.payload.step(Kind::Reorder, {src}, {x_q}, {floats("dst_scale", {x_scale}), ints("dst_zero_point", {x_zero})});
  auto attrs = conv_attrs(p, 1, 1);
  attrs.push_back(ints("post_ops", {code_of(PostOpKind::Eltwise), code_of(EltwiseAlg::Relu)}));
  attrs.push_back(floats("post_op_params", {0.0, 0.0}));
  attrs.push_back(floats("src_scale", {x_scale}));
  attrs.push_back(ints("src_zero_point", {x_zero}));
  attrs.push_back(floats("weight_scales", w_scales));
  attrs.push_back(floats("dst_scale", {y_scale}));
  attrs.push_back(ints("dst_zero_point", {y_zero}));
  model.payload.step(Kind::Convolution, {x_q, weights, b}, {y_q}, attrs);
  model.payload.step(Kind::Reorder, {y_q}, {dst}, {floats("src_scale", {y_scale}), ints("src_zero_point", {y_zero})});
  model.output(dst, {1, 3, 5, 5});
  const auto outputs = run_model(model, {x});
  ASSERT_EQ(outputs.size(), 1u);
  ASSERT_EQ(outputs[0].size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_LE(std::fabs(outputs[0][i] - expected[i]), y_scale * 1.001f)
        << "element " << i << ": got " << outputs[0][i] << ", expected " << expected[i];
  }
}

TEST(OpCorrectness, MatmulWithConstantTransposedWeightsAndBiasMatchesReference) {
  const auto a = random_values(2 * 3 * 8, 13);
  const auto b = random_values(5 * 8, 14);
  const auto bias = random_values(5, 15);
  Model model;
  const uint32_t src = model.input({2, 3, 8});
  const uint32_t weights = model.constant({5, 8}, b);
  const uint32_t bi = model.constant({5}, bias);
  const uint32_t dst = model.value({2, 3, 5});
  model.payload.step(Kind::Matmul, {src, weights, bi}, {dst}, {ints("transpose_b", {1})});
  model.output(dst, {2, 3, 5});
  const auto outputs = run_model(model, {a});
  ASSERT_EQ(outputs.size(), 1u);
  expect_close(outputs[0], matmul_ref(a, b, bias, 2, 1, 3, 8, 5, true), "linear");
}

// 1 to 5 rows of a graph with more weights than the caches hold (33.6 MB): decode-sized linear
// layers take narrower weight blocks (1-2 rows, 3-4 rows) than larger ones; N is not a multiple of
// the blocks.
TEST(OpCorrectness, LinearWithFewRowsMatchesReference) {
  const int64_t k = 2048, n = 4100;
  const auto b = random_values(n * k, 16);
  const auto bias = random_values(n, 17);
  for (int64_t rows = 1; rows <= 5; ++rows) {
    const auto a = random_values(rows * k, 18 + static_cast<uint32_t>(rows));
    Model model;
    const uint32_t src = model.input({1, rows, k});
    const uint32_t weights = model.constant({n, k}, b);
    const uint32_t bi = model.constant({n}, bias);
    const uint32_t dst = model.value({1, rows, n});
    model.payload.step(Kind::Matmul, {src, weights, bi}, {dst}, {ints("transpose_b", {1})});
    model.output(dst, {1, rows, n});
    const auto outputs = run_model(model, {a});
    ASSERT_EQ(outputs.size(), 1u);
    expect_close(outputs[0], matmul_ref(a, b, bias, 1, 1, rows, k, n, true), "rows " + std::to_string(rows));
  }
}

// Two linear layers of 16 to 64 rows with 4 MB of weights each: where the runtime computes them
// transposed (TransposedLinear.cpp: 32, 48 and 64 rows on AVX-512), the second reads the first's
// transposed result as it is and the caller gets the second's made plain; the other row counts
// take the plain product. Every count must match the reference.
TEST(OpCorrectness, ChainedLinearLayersOfTensOfRowsMatchReference) {
  const int64_t k = 1024, hidden = 1040, n = 1016;
  const auto w1 = random_values(hidden * k, 61);
  const auto bias1 = random_values(hidden, 62);
  const auto w2 = random_values(n * hidden, 63);
  for (int64_t rows : {16, 32, 40, 48, 64}) {
    const auto a = random_values(rows * k, 64 + static_cast<uint32_t>(rows));
    Model model;
    const uint32_t src = model.input({rows, k});
    const uint32_t first = model.value({rows, hidden});
    const uint32_t second = model.value({rows, n});
    model.payload.step(
        Kind::Matmul,
        {src, model.constant({hidden, k}, w1), model.constant({hidden}, bias1)},
        {first},
        {ints("transpose_b", {1})});
    model.payload.step(Kind::Matmul, {first, model.constant({n, hidden}, w2)}, {second}, {ints("transpose_b", {1})});
    model.output(second, {rows, n});
    const auto outputs = run_model(model, {a});
    ASSERT_EQ(outputs.size(), 1u);
    const auto hidden_ref = matmul_ref(a, w1, bias1, 1, 1, rows, k, hidden, true);
    expect_close(
        outputs[0], matmul_ref(hidden_ref, w2, {}, 1, 1, rows, hidden, n, true), "rows " + std::to_string(rows));
  }
}

// QUANTIZE_ROWS, then an int8 MATMUL whose first post-ops multiply the row scales back in and add
// the bias: the dynamic int8 linear layer of FORMAT.md, against the same roundings done here.
TEST(OpCorrectness, DynamicInt8LinearQuantizesEachRowAtRunTime) {
  const int64_t rows = 4, k = 8, n = 3;
  auto a = random_values(rows * k, 31);
  for (int64_t j = 0; j < k; ++j) {
    a[2 * k + j] *= 1000.0f; // one row far larger than the others keeps its own scale
  }
  const auto w_real = random_values(n * k, 32);
  const auto bias = random_values(n, 33);
  std::vector<double> w_scales(n);
  std::vector<uint8_t> w_bytes(w_real.size());
  for (int64_t c = 0; c < n; ++c) {
    double max_abs = 0.0;
    for (int64_t j = 0; j < k; ++j) {
      max_abs = std::max(max_abs, std::fabs(double(w_real[c * k + j])));
    }
    w_scales[c] = max_abs / 127.0;
    for (int64_t j = 0; j < k; ++j) {
      w_bytes[c * k + j] = static_cast<uint8_t>(static_cast<int8_t>(std::lround(w_real[c * k + j] / w_scales[c])));
    }
  }
  std::vector<float> expected(rows * n);
  for (int64_t r = 0; r < rows; ++r) {
    float max_abs = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      max_abs = std::max(max_abs, std::fabs(a[r * k + j]));
    }
    const float scale = max_abs / 127.0f;
    for (int64_t c = 0; c < n; ++c) {
      double sum = 0.0;
      for (int64_t j = 0; j < k; ++j) {
        const float q = std::nearbyint(a[r * k + j] * (1.0f / scale));
        sum += q * static_cast<int8_t>(w_bytes[c * k + j]);
      }
      expected[r * n + c] = static_cast<float>(sum * w_scales[c] * scale + bias[c]);
    }
  }

  Model model;
  model.data.add("int8_weights", w_bytes);
  const uint32_t src = model.input({rows, k});
  const uint32_t quantized = model.payload.value({rows, k}, "", /*S8*/ 4);
  const uint32_t scales = model.payload.value({rows, 1});
  const uint32_t weights = model.payload.value({n, k}, "int8_weights", /*S8*/ 4);
  const uint32_t b = model.constant({n}, bias);
  const uint32_t dst = model.value({rows, n});
  model.payload.step(Kind::QuantizeRows, {src}, {quantized, scales});
  model.payload.step(
      Kind::Matmul,
      {quantized, weights, kNoValue, scales, b},
      {dst},
      {ints("transpose_b", {1}),
       floats("weight_scales", w_scales),
       ints(
           "post_ops",
           {code_of(PostOpKind::Binary),
            code_of(BinaryAlg::Mul),
            code_of(PostOpKind::Binary),
            code_of(BinaryAlg::Add)}),
       floats("post_op_params", {0, 0, 0, 0})});
  model.output(dst, {rows, n});
  const auto outputs = run_model(model, {a});
  ASSERT_EQ(outputs.size(), 1u);
  ASSERT_EQ(outputs[0].size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(outputs[0][i], expected[i], 1e-5f * std::max(1.0f, std::fabs(expected[i]))) << "element " << i;
  }
}

TEST(OpCorrectness, BatchedMatmulOfTwoActivationsBroadcastsAndTransposes) {
  const auto a = random_values(3 * 4 * 6, 16);
  const auto b = random_values(3 * 5 * 6, 17);
  Model model;
  const uint32_t lhs = model.input({3, 4, 6});
  const uint32_t rhs = model.input({3, 5, 6});
  const uint32_t dst = model.value({3, 4, 5});
  model.payload.step(Kind::Matmul, {lhs, rhs}, {dst}, {ints("transpose_b", {1})});
  model.output(dst, {3, 4, 5});
  const auto outputs = run_model(model, {a, b});
  ASSERT_EQ(outputs.size(), 1u);
  expect_close(outputs[0], matmul_ref(a, b, {}, 3, 3, 4, 6, 5, true), "q @ k^T");

  Model broadcast;
  const uint32_t l2 = broadcast.input({3, 4, 6});
  const uint32_t r2 = broadcast.input({6, 5});
  const uint32_t d2 = broadcast.value({3, 4, 5});
  broadcast.payload.step(Kind::Matmul, {l2, r2, kNoValue}, {d2}, {ints("transpose_b", {0})});
  broadcast.output(d2, {3, 4, 5});
  const auto b2 = random_values(30, 18);
  const auto out2 = run_model(broadcast, {a, b2});
  ASSERT_EQ(out2.size(), 1u);
  expect_close(out2[0], matmul_ref(a, b2, {}, 3, 1, 4, 6, 5, false), "batched @ shared");
}

TEST(OpCorrectness, EltwiseAlgorithmsMatchReference) {
  struct Case {
    const char* name;
    EltwiseAlg alg;
    double alpha, beta;
    std::function<double(double)> fn;
  };
  const std::vector<Case> cases = {
      {"relu(leaky)", EltwiseAlg::Relu, 0.1, 0, [](double x) { return x > 0 ? x : 0.1 * x; }},
      {"clip", EltwiseAlg::Clip, -0.5, 0.25, [](double x) { return std::min(std::max(x, -0.5), 0.25); }},
      {"gelu_erf", EltwiseAlg::GeluErf, 0, 0, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
      {"gelu_tanh",
       EltwiseAlg::GeluTanh,
       0,
       0,
       [](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }},
      {"swish", EltwiseAlg::Swish, 1.0, 0, [](double x) { return x / (1 + std::exp(-x)); }},
      {"logistic", EltwiseAlg::Logistic, 0, 0, [](double x) { return 1 / (1 + std::exp(-x)); }},
      {"tanh", EltwiseAlg::Tanh, 0, 0, [](double x) { return std::tanh(x); }},
      {"hardswish",
       EltwiseAlg::Hardswish,
       1.0 / 6,
       0.5,
       [](double x) { return x * std::min(std::max(x / 6 + 0.5, 0.0), 1.0); }},
      {"hardsigmoid",
       EltwiseAlg::Hardsigmoid,
       1.0 / 6,
       0.5,
       [](double x) { return std::min(std::max(x / 6 + 0.5, 0.0), 1.0); }},
      {"elu", EltwiseAlg::Elu, 1.0, 0, [](double x) { return x > 0 ? x : std::exp(x) - 1; }},
      {"exp", EltwiseAlg::Exp, 0, 0, [](double x) { return std::exp(x); }},
      {"abs", EltwiseAlg::Abs, 0, 0, [](double x) { return std::fabs(x); }},
      {"linear", EltwiseAlg::Linear, 2.0, -1.0, [](double x) { return 2 * x - 1; }},
      {"square", EltwiseAlg::Square, 0, 0, [](double x) { return x * x; }},
      // Host loops (no oneDNN algorithm):
      {"round (half to even)", EltwiseAlg::Round, 0, 0, [](double x) { return std::nearbyint(x); }},
      {"floor", EltwiseAlg::Floor, 0, 0, [](double x) { return std::floor(x); }},
      {"ceil", EltwiseAlg::Ceil, 0, 0, [](double x) { return std::ceil(x); }},
      {"trunc", EltwiseAlg::Trunc, 0, 0, [](double x) { return std::trunc(x); }},
      {"log1p", EltwiseAlg::Log1p, 0, 0, [](double x) { return std::log1p(x); }}, // of |x| (defined there)
  };
  auto x = random_values(2 * 3 * 7, 19);
  for (float& v : x) {
    v *= 4; // values across several integers for the rounding algorithms
  }
  x[0] = 2.5f; // a tie: rounds to even
  x[1] = -0.5f;
  std::vector<float> magnitudes(x.size());
  std::transform(x.begin(), x.end(), magnitudes.begin(), [](float v) { return std::fabs(v); });
  for (const Case& c : cases) {
    Model model;
    const uint32_t src = model.input({2, 3, 7});
    const uint32_t dst = model.value({2, 3, 7});
    model.payload.step(Kind::Eltwise, {src}, {dst}, {alg(c.alg), floats("alpha", {c.alpha}), floats("beta", {c.beta})});
    model.output(dst, {2, 3, 7});
    const std::vector<float>& input = c.alg == EltwiseAlg::Log1p ? magnitudes : x;
    const auto outputs = run_model(model, {input});
    ASSERT_EQ(outputs.size(), 1u) << c.name;
    std::vector<float> expected;
    for (float v : input) {
      expected.push_back(static_cast<float>(c.fn(v)));
    }
    expect_close(outputs[0], expected, c.name);
  }
}

TEST(OpCorrectness, ReluAndClipKeepNanAndInfinities) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    const char* name;
    EltwiseAlg alg;
    double alpha, beta;
    float lower, upper;
  };
  const std::vector<Case> cases = {
      {"relu", EltwiseAlg::Relu, 0, 0, 0.0f, inf},
      {"clip", EltwiseAlg::Clip, -0.5, 0.25, -0.5f, 0.25f},
      {"clip without bounds", EltwiseAlg::Clip, -INFINITY, INFINITY, -inf, inf},
  };
  auto x = random_values(3 * 37, 23); // past one 16-value vector, with a tail
  x[0] = nan;
  x[5] = inf;
  x[40] = -inf;
  x[110] = nan;
  for (const Case& c : cases) {
    Model model;
    const uint32_t src = model.input({3, 37});
    const uint32_t dst = model.value({3, 37});
    model.payload.step(Kind::Eltwise, {src}, {dst}, {alg(c.alg), floats("alpha", {c.alpha}), floats("beta", {c.beta})});
    model.output(dst, {3, 37});
    const auto outputs = run_model(model, {x});
    ASSERT_EQ(outputs.size(), 1u) << c.name;
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(x[i])) {
        EXPECT_TRUE(std::isnan(outputs[0][i])) << c.name << " at " << i;
      } else {
        EXPECT_EQ(outputs[0][i], std::min(std::max(x[i], c.lower), c.upper)) << c.name << " at " << i;
      }
    }
  }
}

TEST(OpCorrectness, BinaryBroadcastsLowerRankSecondOperand) {
  const auto a = random_values(2 * 3 * 4 * 5, 20);
  const auto b = random_values(3 * 1 * 5, 21);
  Model model;
  const uint32_t src0 = model.input({2, 3, 4, 5});
  const uint32_t src1 = model.input({3, 1, 5});
  const uint32_t dst = model.value({2, 3, 4, 5});
  model.payload.step(Kind::Binary, {src0, src1}, {dst}, {alg(BinaryAlg::Sub)});
  model.output(dst, {2, 3, 4, 5});
  const auto outputs = run_model(model, {a, b});
  ASSERT_EQ(outputs.size(), 1u);
  const auto expected = broadcast_ref(a, {2, 3, 4, 5}, b, {1, 3, 1, 5}, [](float x, float y) { return x - y; });
  expect_close(outputs[0], expected, "a - broadcast(b)");
}

// The binaries the host computes, each with the one IEEE f32 operation it stands for.
struct IeeeBinary {
  BinaryAlg alg;
  float (*op)(float, float);
};
const IeeeBinary kIeeeBinaries[] = {
    {BinaryAlg::Add, [](float x, float y) { return x + y; }},
    {BinaryAlg::Sub, [](float x, float y) { return x - y; }},
    {BinaryAlg::Mul, [](float x, float y) { return x * y; }},
    {BinaryAlg::Div, [](float x, float y) { return x / y; }},
};

// One BINARY step of `op` on [1, 1, count] operands of the given dtypes (0: f32), src1 as [count]
// where `src1_flat`.
struct BinaryTypes {
  uint8_t src0 = 0, src1 = 0, dst = 0;
};
Model binary_model(BinaryAlg op, int64_t count, BinaryTypes types = {}, bool src1_flat = false) {
  Model model;
  const uint32_t src0 = model.input({1, 1, count}, types.src0);
  const uint32_t src1 = src1_flat ? model.input({count}, types.src1) : model.input({1, 1, count}, types.src1);
  const uint32_t dst = model.value({1, 1, count}, types.dst);
  model.payload.step(Kind::Binary, {src0, src1}, {dst}, {alg(op)});
  model.output(dst, {1, 1, count});
  return model;
}

// Up to 16384 values (a decode step's residual adds and gate products) a same-shaped f32 binary runs
// on the host, beyond it in oneDNN: both give each value's one IEEE operation, specials included.
TEST(OpCorrectness, SameShapeBinariesGiveTheIeeeResultOnEitherSideOfTheHostLimit) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const IeeeBinary& c : kIeeeBinaries) {
    for (const int64_t count : {7, 2048, 16384, 16385}) {
      auto a = random_values(static_cast<size_t>(count), 30);
      auto b = random_values(static_cast<size_t>(count), 31);
      a[0] = nan, b[1] = inf, a[2] = -inf, b[3] = 0.0f, a[4] = -0.0f, b[5] = nan, a[6] = 1e38f, b[6] = 1e38f;
      Model model = binary_model(c.alg, count);
      const auto outputs = run_model(model, {a, b});
      ASSERT_EQ(outputs.size(), 1u);
      for (size_t i = 0; i < a.size(); ++i) {
        const float want = c.op(a[i], b[i]);
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(outputs[0][i])) << "alg " << code_of(c.alg) << " count " << count << " at " << i;
        } else {
          EXPECT_EQ(std::signbit(outputs[0][i]), std::signbit(want)) << "alg " << code_of(c.alg) << " at " << i;
          EXPECT_EQ(outputs[0][i], want) << "alg " << code_of(c.alg) << " count " << count << " at " << i;
        }
      }
    }
  }
}

// A second operand of fewer dims and as many values ([160] + [1, 1, 160]) is viewed at the result's
// rank, on the host and past its limit in oneDNN alike.
TEST(OpCorrectness, ALowerRankSecondOperandOfAsManyValuesIsViewedAtTheResultsRank) {
  for (const IeeeBinary& c : kIeeeBinaries) {
    for (const int64_t count : {160, 16385}) {
      const auto a = random_values(static_cast<size_t>(count), 34);
      const auto b = random_values(static_cast<size_t>(count), 35);
      Model model = binary_model(c.alg, count, {}, true);
      const auto outputs = run_model(model, {a, b});
      ASSERT_EQ(outputs.size(), 1u) << "alg " << code_of(c.alg) << " count " << count;
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(outputs[0][i], c.op(a[i], b[i])) << "alg " << code_of(c.alg) << " count " << count << " at " << i;
      }
    }
  }
}

using executorch::backends::onednn::from_bf16_bits;
using executorch::backends::onednn::to_bf16_bits;
constexpr auto kBf16 = static_cast<uint8_t>(executorch::backends::onednn::DType::BF16);

namespace bf16_bytes {
std::vector<uint8_t> of(const std::vector<uint16_t>& bits) {
  std::vector<uint8_t> out(bits.size() * 2);
  std::memcpy(out.data(), bits.data(), out.size());
  return out;
}
std::vector<uint16_t> bits(const std::vector<uint8_t>& bytes) {
  std::vector<uint16_t> out(bytes.size() / 2);
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}
// Whether a value is subnormal: oneDNN's bf16 kernels on AVX512-BF16 CPUs read such inputs as zero and
// write such results as zero (the conversion instructions' DAZ and FTZ); the host and PyTorch keep them.
bool subnormal(float value) {
  return value != 0.0f && std::fabs(value) < std::numeric_limits<float>::min();
}
} // namespace bf16_bytes

// bf16 binaries of same-shaped operands run on the host up to kHostElementwiseValues values (with
// AVX2 or AVX-512): each value widened, the one f32 operation, rounded to nearest even, as PyTorch
// computes them, and as oneDNN's primitive does past the limit but for subnormals.
TEST(OpCorrectness, SameShapeBf16BinariesRoundTheF32ResultOnEitherSideOfTheHostLimit) {
  for (const IeeeBinary& c : kIeeeBinaries) {
    for (const int64_t count : {7, 2048, 16384, 16385}) {
      std::vector<uint16_t> a(static_cast<size_t>(count)), b(static_cast<size_t>(count));
      for (size_t i = 0; i < a.size(); ++i) {
        a[i] = static_cast<uint16_t>(i * 7919 + 13); // every pattern: NaNs, infinities, subnormals
        b[i] = static_cast<uint16_t>(i * 104729 + 5);
      }
      Model model = binary_model(c.alg, count, {kBf16, kBf16, kBf16});
      const auto outputs = run_model_bytes(model, {bf16_bytes::of(a), bf16_bytes::of(b)});
      ASSERT_EQ(outputs.size(), 1u);
      const std::vector<uint16_t> got = bf16_bytes::bits(outputs[0]);
      for (size_t i = 0; i < a.size(); ++i) {
        const float want = c.op(from_bf16_bits(a[i]), from_bf16_bits(b[i]));
        const std::string where =
            "alg " + std::to_string(code_of(c.alg)) + " count " + std::to_string(count) + " at " + std::to_string(i);
        const bool host = count <= 16384;
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(from_bf16_bits(got[i]))) << where;
        } else if (
            host || !(bf16_bytes::subnormal(from_bf16_bits(a[i])) || bf16_bytes::subnormal(from_bf16_bits(b[i])) ||
                      bf16_bytes::subnormal(from_bf16_bits(to_bf16_bits(want))))) {
          EXPECT_EQ(got[i], to_bf16_bits(want)) << where;
        }
      }
    }
  }
}

// A same-shaped binary whose operands differ in type takes src1 in the result's type first, on the
// host up to kHostElementwiseValues values as in oneDNN past them: an f32 result (the residual add of
// an f32 stream and a bf16 layer output) is each value's one IEEE operation on the widened src1; a bf16
// one rounds an f32 src1, operates and rounds again. Past the limit on a CPU without bf16 instructions
// the step computes in f32 (GraphBuilder::widens_bf16): the f32 src1 as it is, one rounding.
TEST(OpCorrectness, SameShapeBinariesOfMixedTypesConvertSrc1ToTheResultsType) {
  for (const IeeeBinary& c : kIeeeBinaries) {
    for (const int64_t count : {7, 2048, 16384, 16385}) {
      const auto wide = random_values(static_cast<size_t>(count), 32);
      std::vector<uint16_t> narrow(static_cast<size_t>(count));
      for (size_t i = 0; i < narrow.size(); ++i) {
        narrow[i] = to_bf16_bits(wide[(i * 7) % narrow.size()] + 0.5f);
      }
      std::vector<uint8_t> wide_bytes(wide.size() * 4);
      std::memcpy(wide_bytes.data(), wide.data(), wide_bytes.size());
      for (const bool bf16_result : {false, true}) {
        // src0 and dst in the result's type, src1 in the other.
        const uint8_t result_type = bf16_result ? kBf16 : uint8_t{0};
        const uint8_t other_type = bf16_result ? uint8_t{0} : kBf16;
        Model model = binary_model(c.alg, count, {result_type, other_type, result_type});
        const std::vector<uint8_t> narrow_bytes = bf16_bytes::of(narrow);
        const auto outputs =
            run_model_bytes(model, {bf16_result ? narrow_bytes : wide_bytes, bf16_result ? wide_bytes : narrow_bytes});
        ASSERT_EQ(outputs.size(), 1u);
        for (size_t i = 0; i < narrow.size(); ++i) {
          const std::string where = "alg " + std::to_string(code_of(c.alg)) + " count " + std::to_string(count) +
                                    (bf16_result ? " bf16" : " f32") + " at " + std::to_string(i);
          if (bf16_result) {
            const bool in_f32 = count > 16384 && !executorch::backends::onednn::has_bf16_instructions();
            const float src1 = in_f32 ? wide[i] : from_bf16_bits(to_bf16_bits(wide[i]));
            const float want = c.op(from_bf16_bits(narrow[i]), src1);
            EXPECT_EQ(bf16_bytes::bits(outputs[0])[i], to_bf16_bits(want)) << where;
          } else {
            float got;
            std::memcpy(&got, outputs[0].data() + 4 * i, sizeof(got));
            EXPECT_EQ(got, c.op(wide[i], from_bf16_bits(narrow[i]))) << where;
          }
        }
      }
    }
  }
}

// bf16 sigmoid-family steps run on the host up to kHostElementwiseValues values (with AVX2 or
// AVX-512), in oneDNN past them: either way within one bf16 step of the exact value.
TEST(OpCorrectness, Bf16SigmoidFamilyIsWithinOneBf16StepOnEitherSideOfTheHostLimit) {
  struct Case {
    EltwiseAlg alg;
    double alpha, beta;
    double (*exact)(double x);
  };
  const Case cases[] = {
      {EltwiseAlg::Swish, 1.0, 0, [](double x) { return x / (1 + std::exp(-x)); }},
      {EltwiseAlg::Logistic, 0, 0, [](double x) { return 1 / (1 + std::exp(-x)); }},
      {EltwiseAlg::Hardswish, 1.0 / 6, 0.5, [](double x) { return x * std::min(std::max(x / 6 + 0.5, 0.0), 1.0); }},
      {EltwiseAlg::Hardsigmoid, 1.0 / 6, 0.5, [](double x) { return std::min(std::max(x / 6 + 0.5, 0.0), 1.0); }},
  };
  for (const Case& c : cases) {
    for (const int64_t count : {7, 8192, 16384, 16385}) {
      const auto values = random_values(static_cast<size_t>(count), 33);
      std::vector<uint16_t> x(values.size());
      for (size_t i = 0; i < x.size(); ++i) {
        x[i] = to_bf16_bits(12.0f * values[i]); // well past the sigmoid's bend on both sides
      }
      Model model;
      const uint32_t src = model.input({1, 1, count}, kBf16);
      const uint32_t dst = model.value({1, 1, count}, kBf16);
      model.payload.step(
          Kind::Eltwise, {src}, {dst}, {alg(c.alg), floats("alpha", {c.alpha}), floats("beta", {c.beta})});
      model.output(dst, {1, 1, count});
      const auto outputs = run_model_bytes(model, {bf16_bytes::of(x)});
      ASSERT_EQ(outputs.size(), 1u);
      const std::vector<uint16_t> got = bf16_bytes::bits(outputs[0]);
      for (size_t i = 0; i < x.size(); ++i) {
        const double want = c.exact(from_bf16_bits(x[i]));
        // One step of bf16's 8 significant bits at |want|, and an absolute floor for results near zero.
        const double step = std::max(std::fabs(want) / 128.0, 1e-6);
        EXPECT_NEAR(from_bf16_bits(got[i]), want, step)
            << "alg " << code_of(c.alg) << " count " << count << " of " << from_bf16_bits(x[i]);
      }
    }
  }
}

// A reorder between types of one plain shape, up to kHostElementwiseValues values, converts on the
// host: bf16 -> f32 exactly, f32 -> bf16 to nearest even, as PyTorch converts, and as oneDNN's reorder
// does past the limit but for subnormals.
TEST(OpCorrectness, TypeConversionsRoundToNearestEvenOnEitherSideOfTheHostLimit) {
  for (const int64_t count : {7, 2048, 16384, 16385}) {
    std::vector<uint32_t> wide(static_cast<size_t>(count));
    std::vector<uint16_t> narrow(static_cast<size_t>(count));
    for (size_t i = 0; i < wide.size(); ++i) {
      // Every high half; low halves below, at and above the tie, even and odd.
      wide[i] = (static_cast<uint32_t>(i * 7919 + 13) << 16) | (i % 3 == 0 ? 0x8000u : (i * 2654435761u) & 0xFFFFu);
      narrow[i] = static_cast<uint16_t>(i * 104729 + 5);
    }
    std::vector<uint8_t> wide_bytes(wide.size() * 4);
    std::memcpy(wide_bytes.data(), wide.data(), wide_bytes.size());
    for (const bool to_bf16 : {true, false}) {
      Model model;
      const uint32_t src = model.input({1, 1, count}, to_bf16 ? uint8_t{0} : kBf16);
      const uint32_t dst = model.value({1, 1, count}, to_bf16 ? kBf16 : uint8_t{0});
      model.payload.step(Kind::Reorder, {src}, {dst});
      model.output(dst, {1, 1, count});
      const auto outputs = run_model_bytes(model, {to_bf16 ? wide_bytes : bf16_bytes::of(narrow)});
      ASSERT_EQ(outputs.size(), 1u);
      for (size_t i = 0; i < wide.size(); ++i) {
        const std::string where = std::string(to_bf16 ? "f32 -> bf16" : "bf16 -> f32") + " count " +
                                  std::to_string(count) + " at " + std::to_string(i);
        if (to_bf16) {
          float value;
          std::memcpy(&value, &wide[i], sizeof(value));
          const uint16_t got = bf16_bytes::bits(outputs[0])[i];
          if (std::isnan(value)) {
            EXPECT_TRUE(std::isnan(from_bf16_bits(got))) << where;
          } else if (count <= 16384 || !bf16_bytes::subnormal(value)) {
            EXPECT_EQ(got, to_bf16_bits(value)) << where;
          }
        } else {
          float got;
          std::memcpy(&got, outputs[0].data() + 4 * i, sizeof(got));
          const float want = from_bf16_bits(narrow[i]);
          EXPECT_TRUE(std::memcmp(&got, &want, sizeof(got)) == 0 || (std::isnan(got) && std::isnan(want))) << where;
        }
      }
    }
  }
}

// A graph input handed on as an output (the rotary tables a decoder layer's delegate passes to the
// next) is copied as it is, whatever its bytes.
TEST(OpCorrectness, AnInputHandedOnAsAnOutputIsCopiedByteForByte) {
  for (const uint8_t dtype : {uint8_t{0}, kBf16}) {
    const size_t bytes_per_value = dtype == kBf16 ? 2 : 4;
    std::vector<uint8_t> x(5 * 32 * bytes_per_value);
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<uint8_t>(i * 37 + 11); // every pattern, NaNs and subnormals among them
    }
    Model model;
    const uint32_t src = model.input({5, 32}, dtype);
    const uint32_t viewed = model.value({1, 5, 1, 32}, dtype);
    model.payload.step(Kind::Reshape, {src}, {viewed});
    model.output(viewed, {1, 5, 1, 32});
    const auto outputs = run_model_bytes(model, {x});
    ASSERT_EQ(outputs.size(), 1u);
    EXPECT_EQ(outputs[0], x) << "dtype " << int{dtype};
  }
}

TEST(OpCorrectness, PoolingMaxAndAverageMatchReference) {
  Conv2dParams p{};
  p.n = 1, p.ic = 3, p.ih = 7, p.iw = 6, p.kh = 3, p.kw = 2, p.stride_h = 2, p.stride_w = 2;
  p.pad_top = 1, p.pad_left = 1;
  p.oh = conv_out(7, 3, 2, 1, 1, 1), p.ow = conv_out(6, 2, 2, 1, 1, 1);
  const auto x = random_values(3 * 7 * 6, 22);
  const std::pair<PoolingAlg, PoolRef> kinds[] = {
      {PoolingAlg::Max, PoolRef::Max},
      {PoolingAlg::AvgIncludePadding, PoolRef::AvgInclude},
      {PoolingAlg::AvgExcludePadding, PoolRef::AvgExclude}};
  for (const auto& [pooling, ref] : kinds) {
    Model model;
    const uint32_t src = model.input({1, 3, 7, 6});
    const uint32_t dst = model.value({1, 3, p.oh, p.ow});
    model.payload.step(
        Kind::Pooling,
        {src},
        {dst},
        {alg(pooling),
         ints("kernel", {3, 2}),
         ints("strides", {2, 2}),
         ints("padding_l", {1, 1}),
         ints("padding_r", {1, 1}),
         ints("dilation", {1, 1})});
    model.output(dst, {1, 3, p.oh, p.ow});
    const auto outputs = run_model(model, {x});
    ASSERT_EQ(outputs.size(), 1u);
    expect_close(outputs[0], pool2d_ref(p, ref, x), "pooling alg " + std::to_string(code_of(pooling)));
  }
}

// Windows [floor(o * i / out), ceil((o + 1) * i / out)) of unequal sizes, as PyTorch's adaptive pooling.
TEST(OpCorrectness, AdaptivePoolingTakesUnevenWindowsAndPropagatesNan) {
  const int64_t h = 5, w = 7, oh = 3, ow = 4;
  auto x = random_values(2 * h * w, 31);
  x[h * w + 3] = std::numeric_limits<float>::quiet_NaN(); // plane 1, row 0, column 3
  for (const PoolingAlg pooling : {PoolingAlg::Max, PoolingAlg::AvgExcludePadding}) {
    Model model;
    const uint32_t src = model.input({1, 2, h, w});
    const uint32_t dst = model.value({1, 2, oh, ow});
    model.payload.step(Kind::AdaptivePooling, {src}, {dst}, {alg(pooling)});
    model.output(dst, {1, 2, oh, ow});
    const auto outputs = run_model(model, {x});
    ASSERT_EQ(outputs.size(), 1u);
    for (int64_t plane = 0; plane < 2; ++plane) {
      for (int64_t i = 0; i < oh; ++i) {
        for (int64_t j = 0; j < ow; ++j) {
          const int64_t h0 = i * h / oh, h1 = ((i + 1) * h + oh - 1) / oh;
          const int64_t w0 = j * w / ow, w1 = ((j + 1) * w + ow - 1) / ow;
          double sum = 0, max = -INFINITY;
          bool nan = false;
          for (int64_t r = h0; r < h1; ++r) {
            for (int64_t c = w0; c < w1; ++c) {
              const float v = x[(plane * h + r) * w + c];
              nan = nan || std::isnan(v);
              sum += v;
              max = std::max<double>(max, v);
            }
          }
          const float got = outputs[0][(plane * oh + i) * ow + j];
          if (nan) {
            EXPECT_TRUE(std::isnan(got)) << "alg " << code_of(pooling) << " at " << plane << "," << i << "," << j;
            continue;
          }
          const double expected = pooling == PoolingAlg::Max ? max : sum / static_cast<double>((h1 - h0) * (w1 - w0));
          EXPECT_NEAR(got, expected, 1e-5) << "alg " << code_of(pooling) << " at " << plane << "," << i << "," << j;
        }
      }
    }
  }
}

TEST(OpCorrectness, AdaptivePoolingRefusesAveragesCountingPadding) {
  Model model;
  const uint32_t src = model.input({1, 2, 5, 7});
  const uint32_t dst = model.value({1, 2, 3, 4});
  model.payload.step(Kind::AdaptivePooling, {src}, {dst}, {alg(PoolingAlg::AvgIncludePadding)});
  model.output(dst, {1, 2, 3, 4});
  EXPECT_EQ(init_error(model.payload.build(), &model.data), Error::InvalidProgram);
}

TEST(OpCorrectness, SoftmaxAndLogSoftmaxMatchReference) {
  const std::vector<int64_t> dims = {2, 5, 3};
  const auto x = random_values(30, 23);
  for (const auto& [axis, log] : {std::pair<int, int>{1, 0}, {-1, 1}}) {
    Model model;
    const uint32_t src = model.input(dims);
    const uint32_t dst = model.value(dims);
    model.payload.step(Kind::Softmax, {src}, {dst}, {ints("axis", {axis}), ints("log", {log})});
    model.output(dst, dims);
    const auto outputs = run_model(model, {x});
    ASSERT_EQ(outputs.size(), 1u);
    expect_close(
        outputs[0], softmax_ref(x, dims, axis < 0 ? axis + 3 : axis, log != 0), log ? "log_softmax" : "softmax");
  }
}

TEST(OpCorrectness, SoftmaxZeroesFullyMaskedRowsOnRequest) {
  // Rows along axis 1 of [2, 4, 3]: (0, *, 1) is all -inf and must come out as zeros.
  const std::vector<int64_t> dims = {2, 4, 3};
  auto x = random_values(24, 31);
  const float minus_infinity = -std::numeric_limits<float>::infinity();
  for (int e = 0; e < 4; ++e) {
    x[e * 3 + 1] = minus_infinity;
  }
  x[12 + 2 * 3 + 0] = minus_infinity; // a partly masked row stays a softmax
  Model model;
  const uint32_t src = model.input(dims);
  const uint32_t dst = model.value(dims);
  model.payload.step(
      Kind::Softmax, {src}, {dst}, {ints("axis", {1}), ints("log", {0}), ints("zero_fully_masked_rows", {1})});
  model.output(dst, dims);
  const auto outputs = run_model(model, {x});
  ASSERT_EQ(outputs.size(), 1u);
  auto expected = softmax_ref(x, dims, 1, false);
  for (int e = 0; e < 4; ++e) {
    expected[e * 3 + 1] = 0.0f;
  }
  expect_close(outputs[0], expected, "softmax with fully masked rows zeroed");
}

// x / sqrt(mean(x^2) + eps) * weight per row of the last dim, in double.
std::vector<float> rms_norm_ref(
    const std::vector<float>& x, size_t width, const std::vector<float>& weight, double eps) {
  std::vector<float> out(x.size());
  for (size_t row = 0; row < x.size() / width; ++row) {
    double squares = 0.0;
    for (size_t e = 0; e < width; ++e) {
      squares += static_cast<double>(x[row * width + e]) * x[row * width + e];
    }
    const double scale = 1.0 / std::sqrt(squares / width + eps);
    for (size_t e = 0; e < width; ++e) {
      out[row * width + e] = static_cast<float>(x[row * width + e] * scale * weight[e]);
    }
  }
  return out;
}

TEST(OpCorrectness, RmsNormMatchesReferenceWithAndWithoutWeight) {
  const std::vector<int64_t> dims = {2, 3, 37}; // 37: two vectors and a tail of 5
  const auto x = random_values(2 * 3 * 37, 51);
  const auto weight = random_values(37, 52);
  for (bool weighted : {true, false}) {
    Model model;
    const uint32_t src = model.input(dims);
    std::vector<uint32_t> inputs = {src};
    if (weighted) {
      inputs.push_back(model.constant({1, 1, 37}, weight));
    }
    const uint32_t dst = model.value(dims);
    model.payload.step(Kind::RmsNorm, inputs, {dst}, {floats("eps", {1e-5})});
    model.output(dst, dims);
    const auto outputs = run_model(model, {x});
    ASSERT_EQ(outputs.size(), 1u);
    expect_close(
        outputs[0],
        rms_norm_ref(x, 37, weighted ? weight : std::vector<float>(37, 1.0f), 1e-5),
        weighted ? "rms norm with weight" : "rms norm");
  }
}

// Stored through a volatile, so that the compiler cannot fuse the product into the sum that reads it.
float unfused_product(float a, float b) {
  volatile float rounded = a * b;
  return rounded;
}

// Interleaved rotary embedding of x [..., P, 2] with tables broadcasting (left-padded with 1s) to x's
// dims without the last, as the unfused graph computes it: each product rounded, then subtracted or added.
std::vector<float> rotary_ref(
    const std::vector<float>& x,
    const std::vector<int64_t>& dims,
    const std::vector<float>& cos,
    const std::vector<float>& sin,
    std::vector<int64_t> table_dims) {
  const std::vector<int64_t> rows(dims.begin(), dims.end() - 1);
  table_dims.insert(table_dims.begin(), rows.size() - table_dims.size(), 1);
  std::vector<float> out(x.size());
  for (size_t pair = 0; pair < x.size() / 2; ++pair) {
    size_t rest = pair, entry = 0, table_stride = 1;
    for (size_t axis = rows.size(); axis-- > 0;) {
      const size_t coordinate = rest % static_cast<size_t>(rows[axis]);
      rest /= static_cast<size_t>(rows[axis]);
      entry += (table_dims[axis] == 1 ? 0 : coordinate) * table_stride;
      table_stride *= static_cast<size_t>(table_dims[axis]);
    }
    const float x0 = x[2 * pair], x1 = x[2 * pair + 1];
    out[2 * pair] = unfused_product(x0, cos[entry]) - unfused_product(x1, sin[entry]);
    out[2 * pair + 1] = unfused_product(x0, sin[entry]) + unfused_product(x1, cos[entry]);
  }
  return out;
}

void expect_same_bits(const std::vector<float>& actual, const std::vector<float>& expected, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what << ": element count differs";
  size_t differing = 0, first = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (std::memcmp(&actual[i], &expected[i], sizeof(float)) != 0 && differing++ == 0) {
      first = i;
    }
  }
  EXPECT_EQ(differing, 0u) << what << ": element " << first << " is " << actual[first] << ", expected "
                           << expected[first];
}

TEST(OpCorrectness, RotaryMatchesTheUnfusedStepsBitForBitForEachTableBroadcast) {
  // x [batch, positions, heads, pairs, 2]; tables per position (over the heads, at every rank the
  // exporters write), per position and head, one row for all, and per batch and position over rows
  // enough for several of the thread pool's chunks.
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{1, 3, 4, 8, 2}, {1, 3, 1, 8}},
      {{1, 3, 4, 8, 2}, {3, 1, 8}},
      {{1, 3, 4, 8, 2}, {1, 3, 4, 8}},
      {{1, 3, 4, 8, 2}, {8}},
      {{2, 40, 16, 8, 2}, {2, 40, 1, 8}},
  };
  for (const auto& [dims, table_dims] : cases) {
    const auto x = random_values(element_count(dims), 61);
    const auto cos = random_values(element_count(table_dims), 62);
    const auto sin = random_values(element_count(table_dims), 63);
    for (const bool tables_are_constants : {false, true}) {
      Model model;
      const uint32_t src = model.input(dims);
      const uint32_t cos_table = tables_are_constants ? model.constant(table_dims, cos) : model.input(table_dims);
      const uint32_t sin_table = tables_are_constants ? model.constant(table_dims, sin) : model.input(table_dims);
      const uint32_t dst = model.value(dims);
      model.payload.step(Kind::Rotary, {src, cos_table, sin_table}, {dst});
      model.output(dst, dims);
      const auto outputs = tables_are_constants ? run_model(model, {x}) : run_model(model, {x, cos, sin});
      ASSERT_EQ(outputs.size(), 1u);
      expect_same_bits(
          outputs[0],
          rotary_ref(x, dims, cos, sin, table_dims),
          "rotary of " + std::to_string(element_count(dims)) + " values, tables of " +
              std::to_string(table_dims.size()) + " dims and " + std::to_string(element_count(table_dims)) + " values" +
              (tables_are_constants ? " (constants)" : " (inputs)"));
    }
  }
}

TEST(OpCorrectness, Bf16RotaryRoundsTheF32ResultOnce) {
  // Whether this CPU computes bf16 steps in bf16 or widens them to f32, the pairs are widened exactly,
  // rotated in f32 and rounded once.
  const std::vector<int64_t> dims = {1, 3, 4, 8, 2}, table_dims = {1, 3, 1, 8};
  std::vector<uint16_t> x_bits;
  std::vector<float> x;
  for (const float value : random_values(element_count(dims), 64)) {
    x_bits.push_back(executorch::backends::onednn::to_bf16_bits(value * 4.0f));
    x.push_back(executorch::backends::onednn::from_bf16_bits(x_bits.back()));
  }
  const auto cos = random_values(element_count(table_dims), 65);
  const auto sin = random_values(element_count(table_dims), 66);
  Model model;
  const uint32_t src = model.input(dims, kBf16);
  const uint32_t cos_table = model.input(table_dims);
  const uint32_t sin_table = model.input(table_dims);
  const uint32_t dst = model.value(dims, kBf16);
  model.payload.step(Kind::Rotary, {src, cos_table, sin_table}, {dst});
  model.output(dst, dims);
  const auto outputs = run_model_bytes(model, {to_bytes(x_bits), to_bytes(cos), to_bytes(sin)});
  ASSERT_EQ(outputs.size(), 1u);
  const auto got = from_bytes<uint16_t>(outputs[0]);
  const auto want = rotary_ref(x, dims, cos, sin, table_dims);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i], executorch::backends::onednn::to_bf16_bits(want[i]))
        << "bf16 rotary value " << i << ", f32 " << want[i];
  }
}

TEST(OpCorrectness, ReorderWithPermutationMatchesReference) {
  const std::vector<int64_t> dims = {2, 3, 4, 5};
  const std::vector<int64_t> permutation = {0, 2, 3, 1};
  const auto x = random_values(120, 24);
  Model model;
  const uint32_t src = model.input(dims);
  const uint32_t dst = model.value({2, 4, 5, 3});
  model.payload.step(Kind::Reorder, {src}, {dst}, {ints("permutation", permutation)});
  model.output(dst, {2, 4, 5, 3});
  const auto outputs = run_model(model, {x});
  ASSERT_EQ(outputs.size(), 1u);
  expect_close(outputs[0], permute_ref(x, dims, permutation), "permute");
}

TEST(OpCorrectness, PermuteViewIsCopiedForConsumersThatTakePlainAndForOutputs) {
  // input -> permute (a view) -> relu -> output 0; the view -> output 1; the view -> reshape that its
  // strides do not allow (a copy) -> output 2; permute of the view (still a view) -> output 3.
  const std::vector<int64_t> dims = {2, 3, 4};
  const auto x = random_values(24, 29);
  Model model;
  const uint32_t src = model.input(dims);
  const uint32_t permuted = model.value({2, 4, 3});
  const uint32_t activated = model.value({2, 4, 3});
  const uint32_t merged = model.value({8, 3});
  const uint32_t back = model.value({2, 3, 4});
  model.payload.step(Kind::Reorder, {src}, {permuted}, {ints("permutation", {0, 2, 1})});
  model.payload.step(
      Kind::Eltwise, {permuted}, {activated}, {alg(EltwiseAlg::Relu), floats("alpha", {0}), floats("beta", {0})});
  model.payload.step(Kind::Reshape, {permuted}, {merged});
  model.payload.step(Kind::Reorder, {permuted}, {back}, {ints("permutation", {0, 2, 1})});
  model.output(activated, {2, 4, 3});
  model.output(permuted, {2, 4, 3});
  model.output(merged, {8, 3});
  model.output(back, {2, 3, 4});
  const auto outputs = run_model(model, {x});
  ASSERT_EQ(outputs.size(), 4u);
  const auto expected = permute_ref(x, dims, {0, 2, 1});
  expect_close(outputs[0], relu_ref(expected), "relu(permute(x))");
  expect_close(outputs[1], expected, "permute(x)");
  expect_close(outputs[2], expected, "reshape(permute(x))");
  expect_close(outputs[3], x, "permute(permute(x))");
}

TEST(OpCorrectness, ReshapeAliasesPlainInputAndCopiesIntoGraphOutputs) {
  // input -> reshape (alias) -> relu -> output 0; relu -> reshape -> output 1 (copied).
  const auto x = random_values(12, 25);
  Model model;
  const uint32_t src = model.input({2, 6});
  const uint32_t reshaped = model.value({3, 4});
  const uint32_t activated = model.value({3, 4});
  const uint32_t flat = model.value({12});
  model.payload.step(Kind::Reshape, {src}, {reshaped});
  model.payload.step(
      Kind::Eltwise, {reshaped}, {activated}, {alg(EltwiseAlg::Relu), floats("alpha", {0}), floats("beta", {0})});
  model.payload.step(Kind::Reshape, {activated}, {flat});
  model.output(activated, {3, 4});
  model.output(flat, {12});
  const auto outputs = run_model(model, {x});
  ASSERT_EQ(outputs.size(), 2u);
  expect_close(outputs[0], relu_ref(x), "relu(reshape(x))");
  expect_close(outputs[1], relu_ref(x), "reshape(relu(reshape(x)))");
}

TEST(OpCorrectness, ReshapeOfBlockedConvOutputIsReorderedToPlainFirst) {
  Conv2dParams p{};
  p.n = 1, p.ic = 16, p.ih = 4, p.iw = 4, p.oc = 16, p.kh = 1, p.kw = 1, p.oh = 4, p.ow = 4;
  const auto x = random_values(256, 26);
  const auto w = random_values(256, 27);
  Model model;
  const uint32_t src = model.input({1, 16, 4, 4});
  const uint32_t weights = model.constant({16, 16, 1, 1}, w);
  const uint32_t conv = model.value({1, 16, 4, 4});
  const uint32_t flat = model.value({1, 256});
  model.payload.step(Kind::Convolution, {src, weights}, {conv}, conv_attrs(p, 0, 0));
  model.payload.step(Kind::Reshape, {conv}, {flat});
  model.output(flat, {1, 256});
  const auto outputs = run_model(model, {x});
  ASSERT_EQ(outputs.size(), 1u);
  expect_close(outputs[0], conv2d_ref(p, x, w, {}), "flatten(conv(x))");
}

TEST(OpCorrectness, PadFillsValueAroundTheInput) {
  const auto x = random_values(6, 28);
  Model model;
  const uint32_t src = model.input({1, 2, 3});
  const uint32_t dst = model.value({1, 3, 6});
  model.payload.step(
      Kind::Pad, {src}, {dst}, {ints("pad_front", {0, 1, 2}), ints("pad_back", {0, 0, 1}), floats("value", {0.5})});
  model.output(dst, {1, 3, 6});
  const auto outputs = run_model(model, {x});
  ASSERT_EQ(outputs.size(), 1u);
  std::vector<float> expected(18, 0.5f);
  for (int c = 0; c < 2; ++c) {
    for (int w = 0; w < 3; ++w) {
      expected[(c + 1) * 6 + w + 2] = x[c * 3 + w];
    }
  }
  expect_close(outputs[0], expected, "pad");
}

TEST(OpCorrectness, ConcatOfAPermuteViewReordersEachInputIntoItsSlice) {
  // cat(permute(a) [2, 4, 3], b [2, 4, 2], axis -1): the view is not plain, so each input is reordered
  // straight into its slice of the result (no converted copy first).
  const std::vector<int64_t> a_dims = {2, 3, 4};
  const auto a = random_values(24, 33);
  const auto b = random_values(16, 34);
  Model model;
  const uint32_t x = model.input(a_dims);
  const uint32_t y = model.input({2, 4, 2});
  const uint32_t permuted = model.value({2, 4, 3});
  const uint32_t cat = model.value({2, 4, 5});
  model.payload.step(Kind::Reorder, {x}, {permuted}, {ints("permutation", {0, 2, 1})});
  model.payload.step(Kind::Concat, {permuted, y}, {cat}, {ints("axis", {-1})});
  model.output(cat, {2, 4, 5});
  const auto outputs = run_model(model, {a, b});
  ASSERT_EQ(outputs.size(), 1u);
  const auto a_permuted = permute_ref(a, a_dims, {0, 2, 1});
  std::vector<float> expected;
  for (int row = 0; row < 8; ++row) {
    expected.insert(expected.end(), a_permuted.begin() + row * 3, a_permuted.begin() + row * 3 + 3);
    expected.insert(expected.end(), b.begin() + row * 2, b.begin() + row * 2 + 2);
  }
  expect_close(outputs[0], expected, "cat(permute(a), b)");
}

TEST(OpCorrectness, ConcatAndLayerNormMatchReference) {
  const auto a = random_values(2 * 3, 29);
  const auto b = random_values(2 * 5, 30);
  const auto gamma = random_values(8, 31);
  const auto beta = random_values(8, 32);
  Model model;
  const uint32_t x = model.input({2, 3});
  const uint32_t y = model.input({2, 5});
  const uint32_t scale = model.constant({8}, gamma);
  const uint32_t shift = model.constant({8}, beta);
  const uint32_t cat = model.value({2, 8});
  const uint32_t norm = model.value({2, 8});
  model.payload.step(Kind::Concat, {x, y}, {cat}, {ints("axis", {-1})});
  model.payload.step(Kind::LayerNorm, {cat, scale, shift}, {norm}, {floats("eps", {1e-5})});
  model.output(norm, {2, 8});
  const auto outputs = run_model(model, {a, b});
  ASSERT_EQ(outputs.size(), 1u);
  std::vector<float> expected;
  for (int row = 0; row < 2; ++row) {
    std::vector<double> v(a.begin() + row * 3, a.begin() + row * 3 + 3);
    v.insert(v.end(), b.begin() + row * 5, b.begin() + row * 5 + 5);
    double mean = 0, var = 0;
    for (double e : v)
      mean += e / 8;
    for (double e : v)
      var += (e - mean) * (e - mean) / 8;
    for (int i = 0; i < 8; ++i) {
      expected.push_back(static_cast<float>((v[i] - mean) / std::sqrt(var + 1e-5) * gamma[i] + beta[i]));
    }
  }
  expect_close(outputs[0], expected, "layer_norm(cat(a, b))");
}

} // namespace
} // namespace onednn_test

namespace onednn_test {
namespace {

// conv (blocked output) -> batch norm -> {mean over H,W ; nearest 2x upsample}: the layout-agnostic
// steps consume oneDNN's blocked layout directly.
TEST(OpCorrectness, NormalizationReductionAndResamplingOnBlockedConvOutputMatchReference) {
  Conv2dParams p{};
  p.n = 1, p.ic = 16, p.ih = 4, p.iw = 4, p.oc = 16, p.kh = 1, p.kw = 1, p.oh = 4, p.ow = 4;
  const auto x = random_values(256, 40);
  const auto w = random_values(256, 41);
  const auto mean = random_values(16, 42);
  auto var = random_values(16, 43);
  for (float& v : var)
    v = v * v + 0.5f;
  const auto gamma = random_values(16, 44);
  const auto beta = random_values(16, 45);
  Model model;
  const uint32_t src = model.input({1, 16, 4, 4});
  const uint32_t weights = model.constant({16, 16, 1, 1}, w);
  const uint32_t m = model.constant({16}, mean);
  const uint32_t v = model.constant({16}, var);
  const uint32_t g = model.constant({16}, gamma);
  const uint32_t b = model.constant({16}, beta);
  const uint32_t conv = model.value({1, 16, 4, 4});
  const uint32_t norm = model.value({1, 16, 4, 4});
  const uint32_t pooled = model.value({1, 16, 1, 1});
  const uint32_t upsampled = model.value({1, 16, 8, 8});
  model.payload.step(Kind::Convolution, {src, weights, kNoValue}, {conv}, conv_attrs(p, 0, 0));
  model.payload.step(Kind::BatchNorm, {conv, m, v, g, b}, {norm}, {floats("eps", {1e-5})});
  model.payload.step(Kind::Reduction, {norm}, {pooled}, {alg(ReductionAlg::Mean)});
  model.payload.step(Kind::Resampling, {norm}, {upsampled}, {alg(ResamplingAlg::Nearest)});
  model.output(pooled, {1, 16, 1, 1});
  model.output(upsampled, {1, 16, 8, 8});
  const auto outputs = run_model(model, {x});
  ASSERT_EQ(outputs.size(), 2u);
  auto normalized = conv2d_ref(p, x, w, {});
  for (size_t i = 0; i < normalized.size(); ++i) {
    const size_t c = i / 16;
    normalized[i] = (normalized[i] - mean[c]) / std::sqrt(var[c] + 1e-5f) * gamma[c] + beta[c];
  }
  std::vector<float> expected_mean(16, 0.0f);
  std::vector<float> expected_up(16 * 64);
  for (size_t c = 0; c < 16; ++c) {
    for (size_t i = 0; i < 16; ++i)
      expected_mean[c] += normalized[c * 16 + i] / 16;
    for (size_t y = 0; y < 8; ++y)
      for (size_t xx = 0; xx < 8; ++xx)
        expected_up[c * 64 + y * 8 + xx] = normalized[c * 16 + (y / 2) * 4 + xx / 2];
  }
  expect_close(outputs[0], expected_mean, "mean(batch_norm(conv(x)))");
  expect_close(outputs[1], expected_up, "upsample_nearest2x(batch_norm(conv(x)))");
}

} // namespace
} // namespace onednn_test
