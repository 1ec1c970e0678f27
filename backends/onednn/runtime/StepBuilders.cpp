// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
#include "StepBuilders.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "Algorithms.h"
#include "InitError.h"

namespace executorch::backends::onednn {
namespace {

using StepBuilderFn = void (*)(const StepRecord&, GraphBuilder&);

constexpr CodeRow<StepKind, StepBuilderFn> kStepBuilders[] = {
    {StepKind::Convolution, build_convolution},
    {StepKind::Deconvolution, build_deconvolution},
    {StepKind::Matmul, build_matmul},
    {StepKind::Eltwise, build_eltwise},
    {StepKind::Binary, build_binary},
    {StepKind::Pooling, build_pooling},
    {StepKind::Reduction, build_reduction},
    {StepKind::BatchNorm, build_batch_norm},
    {StepKind::LayerNorm, build_layer_norm},
    {StepKind::Softmax, build_softmax},
    {StepKind::Reorder, build_reorder},
    {StepKind::Reshape, build_reshape},
    {StepKind::Concat, build_concat},
    {StepKind::Resampling, build_resampling},
    {StepKind::Pad, build_pad},
    {StepKind::QuantizeRows, build_quantize_rows},
    {StepKind::Attention, build_attention},
    {StepKind::RmsNorm, build_rms_norm},
    {StepKind::AdaptivePooling, build_adaptive_pooling},
    {StepKind::ArgReduction, build_arg_reduction},
    {StepKind::Gather, build_gather},
    {StepKind::HostElementwise, build_host_elementwise},
    {StepKind::IndexPut, build_index_put},
    {StepKind::CompressedMatmul, build_compressed_matmul},
    {StepKind::CachedAttention, build_cached_attention},
    {StepKind::Rotary, build_rotary},
};
static_assert(covers_codes(kStepBuilders, 1, kNumStepKinds), "one builder per StepKind (code 0 is unused)");

} // namespace

void build_step(const StepRecord& step, GraphBuilder& graph) {
  lookup_code(kStepBuilders, static_cast<int64_t>(step.kind), "step kind")(step, graph);
}

memory::dims fold_into_rows(const memory::dims& dims) {
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < dims.size(); ++d) {
    rows *= dims[d];
  }
  return {1, rows, dims.back()};
}

bool folds_into_rows(const memory::dims& dims, const memory::dims& dst) {
  const auto leading = [](const memory::dims& d) { return memory::dims(d.begin(), d.end() - 1); };
  const memory::dims operand = leading(left_pad(dims, dst.size()));
  return operand == leading(dst) || std::all_of(operand.begin(), operand.end(), [](int64_t d) { return d == 1; });
}

PostOps read_post_ops(
    const StepRecord& step,
    GraphBuilder& graph,
    size_t first_operand_slot,
    const memory::dims& dst_dims,
    bool fold_rows) {
  const memory::dims dst = fold_rows ? fold_into_rows(dst_dims) : dst_dims;
  PostOps result;
  if (!step.has("post_ops")) {
    return result;
  }
  const std::vector<int64_t> entries = step.ints("post_ops");
  ODNN_CHECK(entries.size() % 2 == 0, "attribute 'post_ops' must have an even number of entries");
  const size_t count = entries.size() / 2;
  const std::vector<double> params = step.floats("post_op_params", 2 * count);
  const auto is_clamp = [&](size_t i) {
    const int64_t code = entries[2 * i + 1];
    return entries[2 * i] == static_cast<int64_t>(PostOpKind::Eltwise) &&
           (code == static_cast<int64_t>(EltwiseAlg::Clip) ||
            (code == static_cast<int64_t>(EltwiseAlg::Relu) && params[2 * i] == 0.0));
  };
  result.first_clamp = count;
  for (size_t i = count; i-- > 0;) {
    result.first_clamp = is_clamp(i) ? i : result.first_clamp;
  }
  size_t slot = first_operand_slot;
  for (size_t i = 0; i < count; ++i) {
    const int64_t kind = entries[2 * i];
    const int64_t code = entries[2 * i + 1];
    if (kind == static_cast<int64_t>(PostOpKind::Eltwise)) {
      const EltwiseImplementation& eltwise = lookup_code(kEltwiseImplementations, code, "post-op eltwise alg");
      ODNN_CHECK(
          !eltwise.on_host,
          "post-op %zu: eltwise alg %lld runs on the host, never as a post-op",
          i,
          static_cast<long long>(code));
      const algorithm alg = eltwise.onednn;
      const auto alpha = static_cast<float>(params[2 * i]);
      const auto beta = static_cast<float>(params[2 * i + 1]);
      result.ops.append_eltwise(alg, alpha, beta);
      if (i < result.first_clamp) {
        result.before_clamps.append_eltwise(alg, alpha, beta);
      }
      // relu's alpha is its negative slope: a clamp is relu with alpha 0 or clip.
      const bool clamp = is_clamp(i);
      result.entries.push_back(
          {false,
           clamp,
           alg,
           clamp && alg == algorithm::eltwise_relu ? 0.0f : alpha,
           clamp && alg == algorithm::eltwise_relu ? std::numeric_limits<float>::infinity() : beta});
      continue;
    }
    ODNN_CHECK(
        kind == static_cast<int64_t>(PostOpKind::Binary),
        "post-op %zu: unknown kind %lld",
        i,
        static_cast<long long>(kind));
    const uint32_t value = step.inputs[slot++];
    const memory::dims padded = left_pad(graph.dims(value), dst_dims.size());
    ODNN_CHECK(
        broadcasts_to(padded, dst_dims) && (!fold_rows || folds_into_rows(padded, dst_dims)),
        "post-op %zu: operand value %u with dims %s does not broadcast to dst %s",
        i,
        value,
        dims_string(graph.dims(value)).c_str(),
        dims_string(dst_dims).c_str());
    const memory::dims dims = fold_rows ? fold_into_rows(padded) : padded;
    // Full-size operands follow dst's layout (`any` resolves to it); broadcast ones are plain. Each
    // keeps its own type (oneDNN converts), so an f32 residual is not rounded to bf16 first.
    const DataType type = graph.compute_type(value);
    const memory::desc desc = dims == dst ? any_desc(dims, type) : plain_desc(dims, type);
    const algorithm alg = lookup_code(kBinaryAlgorithms, code, "post-op binary alg");
    result.ops.append_binary(alg, desc);
    if (i < result.first_clamp) {
      result.before_clamps.append_binary(alg, desc);
    }
    result.entries.push_back({true, false, alg, 0.0f, 0.0f});
    result.operands.push_back({static_cast<int>(i), value, dims});
  }
  return result;
}

HostLoop::Int8Grid dst_int8_grid(const StepRecord& step, DataType type) {
  const double scale = step.float_scalar("dst_scale");
  ODNN_CHECK(std::isfinite(scale) && scale > 0.0, "attribute 'dst_scale' holds a scale %g", scale);
  const int64_t zero_point = step.has("dst_zero_point") ? step.int_scalar("dst_zero_point") : 0;
  const int64_t lowest = type == DataType::u8 ? 0 : -128;
  const int64_t highest = type == DataType::u8 ? 255 : 127;
  ODNN_CHECK(
      zero_point >= lowest && zero_point <= highest,
      "attribute 'dst_zero_point' = %lld lies outside the int8 result's range",
      static_cast<long long>(zero_point));
  HostLoop::Int8Grid grid;
  // As torch's quantize_per_tensor: the value times the f32 reciprocal of the scale, rounded.
  grid.reciprocal = static_cast<float>(1.0 / scale);
  grid.lowest = static_cast<float>(lowest - zero_point);
  grid.highest = static_cast<float>(highest - zero_point);
  grid.scale = static_cast<float>(scale);
  return grid;
}

void append_int8_rounding(PostOps& post_ops, const HostLoop::Int8Grid& grid) {
  post_ops.ends_on_int8_grid = true;
  post_ops.int8_grid = grid;
  // The clip is no clamp of the program's (PostOps::Entry::clamp): what a NaN becomes is the int8
  // conversion's to decide, so no NaN guard is added for it.
  const PostOps::Entry steps[PostOps::kInt8GridEntries] = {
      {false, false, algorithm::eltwise_linear, grid.reciprocal, 0.0f},
      {false, false, algorithm::eltwise_round, 0.0f, 0.0f},
      {false, false, algorithm::eltwise_clip, grid.lowest, grid.highest},
      {false, false, algorithm::eltwise_linear, grid.scale, 0.0f},
  };
  const bool no_clamp = post_ops.first_clamp == post_ops.entries.size();
  for (const PostOps::Entry& entry : steps) {
    post_ops.ops.append_eltwise(entry.alg, entry.alpha, entry.beta);
    if (no_clamp) {
      post_ops.before_clamps.append_eltwise(entry.alg, entry.alpha, entry.beta);
    }
    post_ops.entries.push_back(entry);
  }
  if (no_clamp) {
    post_ops.first_clamp = post_ops.entries.size();
  }
}

namespace {

// Plain where there is no `pd` or it runs without its post-ops (add_post_ops_in_place applies them).
void append_post_op_args(
    const PostOps& post_ops, const dnnl::primitive_desc_base* pd, GraphBuilder& graph, ArgList& args) {
  for (const PostOps::Operand& entry : post_ops.operands) {
    const int arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(entry.post_op_index) | DNNL_ARG_SRC_1;
    memory::desc wanted = pd != nullptr ? pd->query_md(dnnl::query::exec_arg_md, arg) : memory::desc();
    if (wanted.is_zero()) {
      wanted = plain_desc(entry.dims, graph.compute_type(entry.value));
    }
    args.emplace_back(arg, operand(graph, entry.value, entry.dims, wanted));
  }
}

} // namespace

void add_post_op_args(
    const PostOps& post_ops, const dnnl::primitive_desc_base& pd, GraphBuilder& graph, ArgList& args) {
  append_post_op_args(post_ops, &pd, graph, args);
}

void add_plain_post_op_args(const PostOps& post_ops, GraphBuilder& graph, ArgList& args) {
  append_post_op_args(post_ops, nullptr, graph, args);
}

dnnl::primitive_attr attr_with(const dnnl::post_ops& ops) {
  dnnl::primitive_attr attr = GraphBuilder::default_attr();
  attr.set_post_ops(ops);
  return attr;
}

bool is_reference_kernel(const dnnl::primitive_desc_base& pd) {
  return std::string(pd.impl_info_str()).rfind("ref", 0) == 0;
}

BufferId arg_of(const ArgList& args, int arg) {
  const auto found = std::find_if(args.begin(), args.end(), [arg](const auto& entry) { return entry.first == arg; });
  return found == args.end() ? kNoBuffer : found->second;
}

BufferId required_arg(const ArgList& args, int arg) {
  const BufferId buffer = arg_of(args, arg);
  ODNN_CHECK(buffer != kNoBuffer, "a primitive with post-ops lacks argument %d (internal error)", arg);
  return buffer;
}

bool fused_activation_is_slow(dnnl::primitive::kind product, dnnl::algorithm alg) {
  if (host_row_isa() != RowIsa::avx2) {
    return false;
  }
  if (product == dnnl::primitive::kind::matmul) {
    return alg == dnnl::algorithm::eltwise_gelu_erf || alg == dnnl::algorithm::eltwise_gelu_tanh;
  }
  return product == dnnl::primitive::kind::convolution && alg == dnnl::algorithm::eltwise_swish;
}

std::optional<Activation> host_activation(dnnl::algorithm alg, DataType type, size_t values) {
  const bool host_type = type == DataType::f32 || type == DataType::bf16;
  if (host_type && host_row_isa() == RowIsa::avx2) {
    if (alg == dnnl::algorithm::eltwise_gelu_tanh) {
      return Activation::gelu_tanh;
    }
    if (alg == dnnl::algorithm::eltwise_swish) {
      return Activation::swish;
    }
  }
  if (!host_type || values > kHostElementwiseValues || host_row_isa() == RowIsa::scalar) {
    return std::nullopt;
  }
  switch (alg) {
    case dnnl::algorithm::eltwise_logistic:
      return Activation::logistic;
    case dnnl::algorithm::eltwise_swish:
      return Activation::swish;
    case dnnl::algorithm::eltwise_hardsigmoid:
      return Activation::hardsigmoid;
    case dnnl::algorithm::eltwise_hardswish:
      return Activation::hardswish;
    case dnnl::algorithm::eltwise_gelu_erf:
      return host_row_isa() == RowIsa::avx2 ? std::optional(Activation::gelu_erf) : std::nullopt;
    default:
      return std::nullopt;
  }
}

HostLoop activation_loop(Activation activation, DataType type, float alpha, float beta) {
  HostLoop loop;
  loop.kind = HostLoop::Kind::Activation;
  loop.isa = host_row_isa();
  loop.bf16 = type == DataType::bf16;
  loop.activation = activation;
  loop.value = alpha;
  loop.upper = beta;
  return loop;
}

void add_post_ops_in_place(GraphBuilder& graph, const PostOps& post_ops, const ArgList& args, size_t first) {
  const BufferId dst = required_arg(args, DNNL_ARG_DST);
  const memory::desc dst_desc = graph.buffer_desc(dst);
  const size_t grid_from = post_ops.entries.size() - (post_ops.ends_on_int8_grid ? PostOps::kInt8GridEntries : 0);
  for (size_t i = first; i < post_ops.entries.size(); ++i) {
    if (i == grid_from) {
      HostLoop loop;
      loop.kind = HostLoop::Kind::Int8Grid;
      loop.int8_grid = post_ops.int8_grid;
      graph.add_host_loop(loop, dst, dst);
      return;
    }
    const PostOps::Entry& entry = post_ops.entries[i];
    const memory::desc plain = plain_desc(dst_desc.get_dims(), dst_desc.get_data_type());
    const size_t values = plain.get_size() / memory::data_type_size(dst_desc.get_data_type());
    const bool unpadded = dst_desc.get_size() == plain.get_size();
    const std::optional<Activation> activation =
        entry.binary || !unpadded ? std::nullopt : host_activation(entry.alg, dst_desc.get_data_type(), values);
    if (activation) {
      graph.add_host_loop(activation_loop(*activation, dst_desc.get_data_type(), entry.alpha, entry.beta), dst, dst);
    } else if (entry.clamp) {
      HostLoop loop;
      loop.kind = HostLoop::Kind::Clamp;
      loop.value = entry.alpha;
      loop.upper = entry.beta;
      loop.bf16 = dst_desc.get_data_type() == DataType::bf16;
      graph.add_host_loop(loop, dst, dst);
    } else if (!entry.binary) {
      const dnnl::eltwise_forward::primitive_desc pd(
          graph.engine(),
          dnnl::prop_kind::forward_inference,
          entry.alg,
          dst_desc,
          dst_desc,
          entry.alpha,
          entry.beta,
          GraphBuilder::default_attr());
      graph.add_primitive(dnnl::eltwise_forward(pd), pd, {{DNNL_ARG_SRC, dst}, {DNNL_ARG_DST, dst}});
    } else {
      const BufferId operand = required_arg(args, DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i)) | DNNL_ARG_SRC_1);
      const dnnl::binary::primitive_desc pd(
          graph.engine(), entry.alg, dst_desc, graph.buffer_desc(operand), dst_desc, GraphBuilder::default_attr());
      graph.add_primitive(
          dnnl::binary(pd), pd, {{DNNL_ARG_SRC_0, dst}, {DNNL_ARG_SRC_1, operand}, {DNNL_ARG_DST, dst}});
    }
  }
}

namespace {

// Whether the clamps of `post_ops` need the NaN-keeping path: oneDNN turns a NaN into the bound.
bool clamps_guarded(GraphBuilder& graph, const PostOps& post_ops, const ArgList& args) {
  const memory::desc dst_desc = graph.buffer_desc(required_arg(args, DNNL_ARG_DST));
  const DataType type = dst_desc.get_data_type();
  // A clamp on the host also clamps the zeros padding a blocked dst, which must stay zero.
  const bool padded = dst_desc.get_size() != plain_desc(dst_desc.get_dims(), type).get_size();
  const bool keeps_padding =
      std::all_of(post_ops.entries.begin(), post_ops.entries.end(), [](const PostOps::Entry& entry) {
        return !entry.clamp || (entry.alpha <= 0.0f && entry.beta >= 0.0f);
      });
  return post_ops.first_clamp < post_ops.entries.size() && (type == DataType::f32 || type == DataType::bf16) &&
         !(padded && !keeps_padding);
}

// `fast`, skipped when a graph input or a constant holds a NaN or an infinity; then `remake`'s
// kernel up to the first clamp (when `guard_clamps`, else with every post-op) on `exact_args`, and the
// rest of the chain in place on the dst of `args`.
void add_exact_branch(
    GraphBuilder& graph,
    const PostOps& post_ops,
    const std::function<void()>& fast,
    const ArgList& args,
    const ArgList& exact_args,
    const std::function<BuiltPrimitive(const dnnl::post_ops&)>& remake,
    bool guard_clamps) {
  const size_t exact_until = guard_clamps ? post_ops.first_clamp : post_ops.entries.size();
  const BuiltPrimitive before_clamp = remake(guard_clamps ? post_ops.before_clamps : post_ops.ops);
  graph.add_non_finite_branch(fast, [&]() {
    graph.add_primitive(before_clamp.first, before_clamp.second, exact_args);
    // The rest of the chain, in place on dst: clamps on the host, the others as primitives.
    add_post_ops_in_place(graph, post_ops, args, exact_until);
  });
}

} // namespace

void add_post_op_primitive(
    GraphBuilder& graph,
    const PostOps& post_ops,
    const BuiltPrimitive& built,
    const ArgList& args,
    const std::function<BuiltPrimitive(const dnnl::post_ops&)>& remake,
    const ArgList* exact_args) {
  const auto record = [&]() { graph.add_primitive(built.first, built.second, args); };
  const bool guard_clamps = clamps_guarded(graph, post_ops, args);
  if (!guard_clamps && exact_args == nullptr) {
    record();
    return;
  }
  add_exact_branch(graph, post_ops, record, args, exact_args != nullptr ? *exact_args : args, remake, guard_clamps);
}

void add_guarded_steps(
    GraphBuilder& graph,
    const PostOps& post_ops,
    const std::function<void()>& fast,
    const ArgList& args,
    const std::function<BuiltPrimitive(const dnnl::post_ops&)>& remake) {
  add_exact_branch(graph, post_ops, fast, args, args, remake, clamps_guarded(graph, post_ops, args));
}

Quantization read_quantization(const StepRecord& step, GraphBuilder& graph, int weights_mask, int64_t weight_count) {
  Quantization quantization;
  auto add_scales = [&](const char* name, int arg, int mask, int64_t count) {
    if (!step.has(name)) {
      return;
    }
    const std::vector<double> values = step.floats(name, static_cast<size_t>(count));
    std::vector<float> scales(values.begin(), values.end());
    for (float scale : scales) {
      ODNN_CHECK(std::isfinite(scale) && scale > 0.0f, "attribute '%s' holds a scale %g", name, scale);
    }
    const BufferId buffer = graph.owned_constant(plain_desc({count}, DataType::f32), scales.data());
    quantization.args.push_back({DNNL_ARG_ATTR_SCALES | arg, mask, buffer});
  };
  auto add_zero_point = [&](const char* name, int arg) {
    if (!step.has(name)) {
      return;
    }
    const int64_t value = step.int_scalar(name);
    ODNN_CHECK(
        value >= -128 && value <= 255,
        "attribute '%s' = %lld is not an int8 zero point",
        name,
        static_cast<long long>(value));
    const auto zero_point = static_cast<int32_t>(value);
    const BufferId buffer = graph.owned_constant(plain_desc({1}, DataType::s32), &zero_point);
    quantization.args.push_back({DNNL_ARG_ATTR_ZERO_POINTS | arg, 0, buffer});
  };
  add_scales("src_scale", DNNL_ARG_SRC, 0, 1);
  add_zero_point("src_zero_point", DNNL_ARG_SRC);
  if (step.has("weight_scales")) {
    ODNN_CHECK(weight_count > 0, "attribute 'weight_scales' on a step without weights");
    add_scales("weight_scales", DNNL_ARG_WEIGHTS, weights_mask, weight_count);
  }
  add_scales("dst_scale", DNNL_ARG_DST, 0, 1);
  add_zero_point("dst_zero_point", DNNL_ARG_DST);
  return quantization;
}

void Quantization::apply(dnnl::primitive_attr& attr) const {
  for (const Arg& arg : args) {
    if ((arg.arg & DNNL_ARG_ATTR_SCALES) != 0) {
      attr.set_scales_mask(arg.arg & ~DNNL_ARG_ATTR_SCALES, arg.mask);
    } else {
      attr.set_zero_points_mask(arg.arg & ~DNNL_ARG_ATTR_ZERO_POINTS, arg.mask);
    }
  }
}

void Quantization::add_args(ArgList& list) const {
  for (const Arg& arg : args) {
    list.emplace_back(arg.arg, arg.buffer);
  }
}

Quantization Quantization::of(int argument) const {
  Quantization subset;
  for (const Arg& arg : args) {
    if ((arg.arg & ~(DNNL_ARG_ATTR_SCALES | DNNL_ARG_ATTR_ZERO_POINTS)) == argument) {
      subset.args.push_back(arg);
    }
  }
  return subset;
}

void add_quantizing_reorder(
    GraphBuilder& graph, BufferId source, BufferId destination, const Quantization& quantization) {
  dnnl::primitive_attr attr = GraphBuilder::default_attr();
  quantization.apply(attr);
  const dnnl::reorder::primitive_desc pd(
      graph.engine(), graph.buffer_desc(source), graph.engine(), graph.buffer_desc(destination), attr);
  ArgList args{{DNNL_ARG_FROM, source}, {DNNL_ARG_TO, destination}};
  quantization.add_args(args);
  graph.add_primitive(dnnl::reorder(pd), pd, args);
}

BufferId operand(GraphBuilder& graph, uint32_t value, const memory::dims& dims, const memory::desc& wanted) {
  if (graph.dims(value) == dims) {
    return graph.input(value, wanted);
  }
  return graph.input_view(value, plain_desc(dims, graph.data_type(value)), wanted);
}

memory::desc strided_operand(GraphBuilder& graph, uint32_t value, const std::vector<int64_t>& order, DataType type) {
  const memory::desc stored = graph.stored(value);
  if (!is_strided(stored) || stored.get_data_type() != type) {
    return memory::desc();
  }
  memory::dims dims = stored.get_dims();
  memory::dims strides = stored.get_strides();
  while (dims.size() < order.size()) {
    strides.insert(strides.begin(), dims[0] * strides[0]);
    dims.insert(dims.begin(), 1);
  }
  return permuted(memory::desc(dims, type, strides), order);
}

memory::desc permuted_view(const memory::dims& physical, const std::vector<int64_t>& order, DataType type) {
  return permuted(plain_desc(physical, type), order);
}

memory::desc permuted(const memory::desc& desc, const std::vector<int64_t>& order) {
  const memory::dims from_dims = desc.get_dims();
  const memory::dims from_strides = desc.get_strides();
  memory::dims dims(order.size());
  memory::dims strides(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    dims[i] = from_dims[order[i]];
    strides[i] = from_strides[order[i]];
  }
  return canonical(memory::desc(dims, desc.get_data_type(), strides));
}

// Walks both shapes from the innermost dim, one chunk of contiguous-in-memory old dims at a time:
// the new dims covering a chunk get strides within it; a new dim spanning two chunks has none.
memory::desc reshaped(const memory::desc& desc, const memory::dims& dims) {
  const memory::dims old_dims = desc.get_dims();
  const memory::dims old_strides = desc.get_strides();
  if (element_count(old_dims) != element_count(dims) || element_count(dims) == 0) {
    return memory::desc();
  }
  memory::dims strides(dims.size(), 1);
  auto view_d = static_cast<int64_t>(dims.size()) - 1;
  int64_t chunk_stride = old_strides.back();
  int64_t chunk_count = 1;
  int64_t view_count = 1;
  for (auto d = static_cast<int64_t>(old_dims.size()) - 1; d >= 0; --d) {
    chunk_count *= old_dims[d];
    if (d == 0 || (old_dims[d - 1] != 1 && old_strides[d - 1] != chunk_count * chunk_stride)) {
      while (view_d >= 0 && (view_count < chunk_count || dims[view_d] == 1)) {
        strides[view_d] = view_count * chunk_stride;
        view_count *= dims[view_d];
        --view_d;
      }
      if (view_count != chunk_count) {
        return memory::desc();
      }
      if (d > 0) {
        chunk_stride = old_strides[d - 1];
        chunk_count = 1;
        view_count = 1;
      }
    }
  }
  if (view_d != -1) {
    return memory::desc();
  }
  return canonical(memory::desc(dims, desc.get_data_type(), strides));
}

memory::dims spatial_attr(const StepRecord& step, const char* name, size_t count, int64_t minimum) {
  const std::vector<int64_t> values = step.ints(name, count);
  for (int64_t v : values) {
    ODNN_CHECK(
        v >= minimum,
        "attribute '%s' entry %lld must be >= %lld",
        name,
        static_cast<long long>(v),
        static_cast<long long>(minimum));
  }
  return memory::dims(values.begin(), values.end());
}

memory::dims dnnl_dilation(const StepRecord& step, size_t count) {
  memory::dims dilation = spatial_attr(step, "dilation", count, 1);
  for (auto& d : dilation) {
    d -= 1;
  }
  return dilation;
}

int normalize_axis(int64_t axis, size_t rank) {
  const auto signed_rank = static_cast<int64_t>(rank);
  ODNN_CHECK(
      axis >= -signed_rank && axis < signed_rank,
      "axis %lld out of range for rank %zu",
      static_cast<long long>(axis),
      rank);
  return static_cast<int>(axis < 0 ? axis + signed_rank : axis);
}

} // namespace executorch::backends::onednn
