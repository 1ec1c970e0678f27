// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// The bf16 convolution guard's predicate (runtime/ConvolutionGuard.h) against the kernels themselves, on
// the CPU the test runs on: for first-layer shapes, every kernel oneDNN offers runs on an input holding
// infinities (at the corners and edges, where a kernel that reads past a row's end finds the next row's
// values, and inside; in the first and the last channel), with positive weights, and it spreads a NaN
// or an infinity (outside the infinities' windows, or a NaN inside them) exactly when
// spreads_non_finite() flags it. A guard oneDNN no longer needs fails here as
// surely as a kernel the guard misses.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "../../runtime/ConvolutionGuard.h"

namespace executorch::backends::onednn {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Type = memory::data_type;

struct Shape {
  int64_t channels, kernel, stride;
};

constexpr int64_t kSize = 13; // input height and width
constexpr int64_t kOutputChannels = 16;
struct Position {
  int64_t row, column;
};
constexpr Position kInfinities[] = {
    {0, 0}, {0, kSize - 1}, {kSize - 1, 0}, {kSize - 1, kSize - 1}, {6, 5}, {5, kSize - 1}, {7, 0}};

struct Verdict {
  bool spreads = false;
  std::string where;
};

// Runs the kernel `pd` chose on plain f32 data converted to its layouts; judges its plain f32 result.
Verdict run_with_an_infinity(
    const dnnl::engine& engine,
    const dnnl::convolution_forward::primitive_desc& pd,
    const Shape& shape,
    int64_t out_size) {
  const memory::dims src_dims = {1, shape.channels, kSize, kSize};
  std::vector<float> src(shape.channels * kSize * kSize),
      weights(kOutputChannels * shape.channels * shape.kernel * shape.kernel);
  for (size_t i = 0; i < src.size(); ++i) {
    src[i] = 0.25f * static_cast<float>(static_cast<int>(i % 7) - 3);
  }
  for (const Position& at : kInfinities) {
    for (int64_t channel : {int64_t{0}, shape.channels - 1}) {
      src[(channel * kSize + at.row) * kSize + at.column] = std::numeric_limits<float>::infinity();
    }
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    weights[i] = 0.125f * static_cast<float>(1 + i % 5); // positive: a window's infinities add up, never to NaN
  }
  std::vector<float> dst(kOutputChannels * out_size * out_size, 0.0f);
  dnnl::stream stream(engine);
  auto converted = [&](const memory::desc& plain, void* data, const memory::desc& wanted) {
    memory from(plain, engine, data), to(wanted, engine);
    dnnl::reorder(from, to).execute(stream, from, to);
    return to;
  };
  memory kernel_src = converted({src_dims, Type::f32, Tag::nchw}, src.data(), pd.src_desc());
  memory kernel_weights = converted(
      {{kOutputChannels, shape.channels, shape.kernel, shape.kernel}, Type::f32, Tag::oihw},
      weights.data(),
      pd.weights_desc());
  memory kernel_dst(pd.dst_desc(), engine);
  dnnl::convolution_forward(pd).execute(
      stream, {{DNNL_ARG_SRC, kernel_src}, {DNNL_ARG_WEIGHTS, kernel_weights}, {DNNL_ARG_DST, kernel_dst}});
  memory plain_dst({{1, kOutputChannels, out_size, out_size}, Type::f32, Tag::nchw}, engine, dst.data());
  dnnl::reorder(kernel_dst, plain_dst).execute(stream, kernel_dst, plain_dst);
  stream.wait();

  const int64_t padding = shape.kernel / 2;
  auto covers = [&](int64_t out, int64_t in) {
    const int64_t tap = in - (out * shape.stride - padding);
    return tap >= 0 && tap < shape.kernel;
  };
  for (int64_t c = 0; c < kOutputChannels; ++c) {
    for (int64_t y = 0; y < out_size; ++y) {
      for (int64_t x = 0; x < out_size; ++x) {
        const float value = dst[(c * out_size + y) * out_size + x];
        bool in_window = false;
        for (const Position& at : kInfinities) {
          in_window = in_window || (covers(y, at.row) && covers(x, at.column));
        }
        if (in_window ? std::isnan(value) : !std::isfinite(value)) {
          char where[96];
          std::snprintf(
              where,
              sizeof(where),
              "%g at channel %lld, (%lld, %lld), %s the window",
              value,
              static_cast<long long>(c),
              static_cast<long long>(y),
              static_cast<long long>(x),
              in_window ? "inside" : "outside");
          return {true, where};
        }
      }
    }
  }
  return {};
}

// A layout in brief: padded dims, then the inner blocks as axis:size.
std::string layout_of(const memory::desc& desc) {
  std::string text;
  for (const int64_t dim : desc.get_padded_dims()) {
    text += (text.empty() ? "" : "x") + std::to_string(dim);
  }
  const memory::dims blocks = desc.get_inner_blks(), axes = desc.get_inner_idxs();
  for (size_t i = 0; i < blocks.size(); ++i) {
    text += " " + std::to_string(axes[i]) + ":" + std::to_string(blocks[i]);
  }
  return text;
}

// ONEDNN_GUARD_SURVEY=1 prints one line per kernel, matching or not.
TEST(ConvolutionGuard, FlagsExactlyTheBf16KernelsThatSpreadAnInfinity) {
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  const bool survey = std::getenv("ONEDNN_GUARD_SURVEY") != nullptr;
  int kernels = 0;
  for (int64_t channels : {1, 2, 3, 4, 5, 7, 8, 16}) {
    for (int64_t kernel : {1, 3, 5, 7}) {
      for (int64_t stride : {1, 2}) {
        const Shape shape{channels, kernel, stride};
        const int64_t padding = kernel / 2;
        const int64_t out_size = (kSize + 2 * padding - kernel) / stride + 1;
        auto any = [](memory::dims dims) { return memory::desc(dims, Type::bf16, Tag::any); };
        dnnl::convolution_forward::primitive_desc pd;
        try {
          pd = dnnl::convolution_forward::primitive_desc(
              engine,
              dnnl::prop_kind::forward_inference,
              dnnl::algorithm::convolution_direct,
              any({1, channels, kSize, kSize}),
              any({kOutputChannels, channels, kernel, kernel}),
              any({1, kOutputChannels, out_size, out_size}),
              {stride, stride},
              {padding, padding},
              {padding, padding});
        } catch (const dnnl::error&) {
          continue; // no bf16 convolution on this CPU for the shape
        }
        do {
          const Verdict verdict = run_with_an_infinity(engine, pd, shape, out_size);
          if (survey) { // every kernel's facts, to derive the predicate on a new CPU or oneDNN
            std::printf(
                "survey %s ic %lld k %lld s %lld: weights %s; src %s; spreads %d, predicate %d\n",
                pd.impl_info_str(),
                static_cast<long long>(channels),
                static_cast<long long>(kernel),
                static_cast<long long>(stride),
                layout_of(pd.weights_desc()).c_str(),
                layout_of(pd.src_desc()).c_str(),
                verdict.spreads ? 1 : 0,
                spreads_non_finite(pd, 1) ? 1 : 0);
          }
          EXPECT_EQ(verdict.spreads, spreads_non_finite(pd, 1))
              << pd.impl_info_str() << " (weights " << pd.weights_desc().get_inner_idxs().size()
              << " blocked axes) for " << channels << " input channels, kernel " << kernel << ", stride " << stride
              << ": " << (verdict.spreads ? verdict.where : "keeps the infinity in its windows");
          ++kernels;
        } while (pd.next_impl());
      }
    }
  }
  std::printf("%d kernels checked\n", kernels);
}

} // namespace
} // namespace executorch::backends::onednn
