// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// A linear layer of 32 to 64 f32 rows computed transposed: y^T = W x^T.
//
// oneDNN 3.13.1's AVX-512 brgemm matmul packs constant f32 weights 64 columns to a block and covers
// the rows of x in register blocks of a few rows, which leave 32-64 rows with a short tail block; it
// also reads large packed weights slower than it streams a plain row-major matrix. In the transposed
// product the weights, as PyTorch stores them ([N, K], read in place), are the kernel's rows and the
// 32-64 rows of x its columns: two to four whole vectors. Measured on the model-167 Xeon (two
// threads, C++, the forms alternating; BENCHMARKS.md, "A linear layer of 32 rows, transposed"):
// 32 x 1024 x 4096 with bias and GELU 0.94x the time, 32 x 4096 x 1024 with bias 0.90x, 48 and 64
// rows 0.96-0.98x, weights of 64 MB 0.73-0.81x; 16 rows (one vector) 1.13x and rows that are not a
// multiple of 16 1.2-1.6x slower, weights of 1 MB even: hence the rule in transposes_linear().
#include <string>
#include <vector>

#include "StepBuilders.h"

namespace executorch::backends::onednn {
namespace {

using Pd = dnnl::matmul::primitive_desc;

constexpr int64_t kVectorRows = 16; // f32 lanes of an AVX-512 register
constexpr int64_t kMinRows = 2 * kVectorRows;
constexpr int64_t kMaxRows = 4 * kVectorRows;
constexpr int64_t kMinWeights = int64_t{1} << 20; // 4 MB of f32

// Only the kernel that was measured: on AVX2 the lanes and the blocking differ.
constexpr const char* kMeasuredKernel = "brg_matmul:avx512_core";

// `desc` [d0, d1] as [1, d0, d1]: the same bytes.
memory::desc with_leading_one(const memory::desc& desc) {
  const memory::dims dims = desc.get_dims();
  const memory::dims strides = desc.get_strides();
  return memory::desc({1, dims[0], dims[1]}, desc.get_data_type(), {dims[0] * dims[1], strides[0], strides[1]});
}

// The bias as the first post-op (an add of [1, N, 1]), then the step's own eltwise chain.
PostOps with_row_bias(const PostOps& post_ops, uint32_t bias, int64_t n) {
  const memory::dims bias_dims = {1, n, 1};
  const memory::desc bias_desc = plain_desc(bias_dims, DataType::f32);
  PostOps result;
  result.ops.append_binary(dnnl::algorithm::binary_add, bias_desc);
  result.before_clamps.append_binary(dnnl::algorithm::binary_add, bias_desc);
  result.entries.push_back({true, false, dnnl::algorithm::binary_add, 0.0f, 0.0f});
  result.operands.push_back({0, bias, bias_dims});
  for (size_t i = 0; i < post_ops.entries.size(); ++i) {
    dnnl::algorithm alg;
    float alpha = 0.0f;
    float beta = 0.0f;
    post_ops.ops.get_params_eltwise(static_cast<int>(i), alg, alpha, beta);
    result.ops.append_eltwise(alg, alpha, beta);
    if (i < post_ops.first_clamp) {
      result.before_clamps.append_eltwise(alg, alpha, beta);
    }
    result.entries.push_back(post_ops.entries[i]);
  }
  result.first_clamp = post_ops.first_clamp + 1;
  return result;
}

} // namespace

bool transposes_linear(int64_t rows, int64_t k, int64_t n, const dnnl::primitive_desc_base& chosen) {
  return rows % kVectorRows == 0 && rows >= kMinRows && rows <= kMaxRows && k * n >= kMinWeights &&
         std::string(chosen.impl_info_str()) == kMeasuredKernel;
}

bool add_transposed_linear(
    const StepRecord& step,
    GraphBuilder& graph,
    const memory::desc& weights_view,
    const PostOps& post_ops,
    const dnnl::primitive_desc_base& chosen) {
  const uint32_t x = step.inputs[0];
  const uint32_t output = step.outputs[0];
  const memory::dims x_dims = graph.dims(x);
  const int64_t m = x_dims[0], k = x_dims[1], n = weights_view.get_dims()[1];
  const bool has_bias = step.has_input(2);
  const PostOps ops = has_bias ? with_row_bias(post_ops, step.inputs[2], n) : post_ops;

  // x^T as [1, k, rows]: x's own strided bytes read transposed where it has them (the previous
  // layer's y^T), else x made plain first.
  const std::vector<int64_t> transposed = {0, 2, 1};
  const memory::desc stored_t = strided_operand(graph, x, transposed, DataType::f32);
  const bool as_stored = !stored_t.is_zero();
  const BufferId x_source = as_stored ? graph.buffer(x) : graph.input(x, plain_desc(x_dims, DataType::f32));
  const memory::desc x_t = as_stored ? stored_t : permuted_view({1, m, k}, transposed);
  // A 3-D problem: oneDNN's brgemm matmul adds a bias that varies along the rows only as a binary
  // post-op of one (a [N, 1] bias or a 2-D row operand gives its reference kernel).
  const memory::desc weights = plain_desc({1, n, k}, DataType::f32);
  const memory::desc y_t = plain_desc({1, n, m}, DataType::f32);
  auto make_pd = [&](const dnnl::post_ops& chain) { return Pd(graph.engine(), weights, x_t, y_t, attr_with(chain)); };
  const Pd pd = make_pd(ops.ops);
  if (std::string(pd.impl_info_str()) != chosen.impl_info_str()) {
    return false;
  }
  ArgList args;
  args.emplace_back(
      DNNL_ARG_SRC, graph.input_view(step.inputs[1], with_leading_one(permuted(weights_view, {1, 0})), weights));
  args.emplace_back(DNNL_ARG_WEIGHTS, graph.alias(x_source, x_t));
  add_post_op_args(ops, pd, graph, args);
  // y is kept as computed, [M, N] with strides [1, M]; a reader that wants it plain converts it.
  const memory::desc y = permuted(plain_desc({n, m}, DataType::f32), {1, 0});
  args.emplace_back(DNNL_ARG_DST, graph.alias(graph.define(output, y), y_t));
  add_post_op_primitive(graph, ops, {dnnl::matmul(pd), pd}, args, [&](const dnnl::post_ops& chain) {
    const Pd exact = make_pd(chain);
    return BuiltPrimitive{dnnl::matmul(exact), exact};
  });
  return true;
}

} // namespace executorch::backends::onednn
