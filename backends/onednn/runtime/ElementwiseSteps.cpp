// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// ELTWISE, BINARY, POOLING, REDUCTION, BATCH_NORM, LAYER_NORM, RMS_NORM, SOFTMAX, RESAMPLING. Steps
// that work in any layout read their input as it is and write dst in the same (or oneDNN's matching)
// layout.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>

#include "Algorithms.h"
#include "InitError.h"
#include "StepBuilders.h"

namespace executorch::backends::onednn {
namespace {

using dnnl::prop_kind;

size_t spatial_rank(const memory::dims& src) {
  ODNN_CHECK(
      src.size() >= 3 && src.size() <= 5, "src %s must be [N, C, spatial...] of rank 3..5", dims_string(src).c_str());
  return src.size() - 2;
}

// A per-channel (or per-feature) operand read as a plain 1-D tensor of `count` elements.
BufferId vector_operand(GraphBuilder& graph, uint32_t value, int64_t count, const char* what) {
  ODNN_CHECK(
      element_count(graph.value(value).dims) == count,
      "%s value %u with dims %s must have %lld elements",
      what,
      value,
      dims_string(graph.dims(value)).c_str(),
      static_cast<long long>(count));
  return operand(graph, value, {count}, plain_desc({count}));
}

// Records `fast` (writing `target` from `source`), and, for when a graph input holds a NaN or an
// infinity, `loop` on the host: from plain f32 src to plain f32 dst, with conversions around it as needed.
void add_exact_on_host(
    GraphBuilder& graph, BufferId source, BufferId target, const HostLoop& loop, const std::function<void()>& fast) {
  graph.add_non_finite_branch(fast, [&]() {
    const memory::desc src_desc = graph.buffer_desc(source); // copies: scratch() may move the buffers
    const memory::desc dst_desc = graph.buffer_desc(target);
    const memory::desc src_plain = plain_desc(src_desc.get_dims(), DataType::f32);
    const memory::desc dst_plain = plain_desc(dst_desc.get_dims(), DataType::f32);
    BufferId plain_source = source;
    if (src_desc != src_plain) {
      plain_source = graph.scratch(src_plain);
      graph.add_reorder(source, plain_source);
    }
    const BufferId plain_target = dst_desc == dst_plain ? target : graph.scratch(dst_plain);
    graph.add_host_loop(loop, plain_target, plain_source);
    if (plain_target != target) {
      graph.add_reorder(plain_target, target);
    }
  });
}

} // namespace

namespace {
// An eltwise oneDNN lacks (kEltwiseImplementations): on the host, in f32 (a bf16 value is converted
// around the loop).
void build_host_eltwise(const StepRecord& step, GraphBuilder& graph, HostLoop::Unary unary) {
  const uint32_t src = step.inputs[0];
  const memory::desc plain_f32 = plain_desc(graph.dims(src), DataType::f32);
  HostLoop loop;
  loop.kind = HostLoop::Kind::Unary;
  loop.unary = unary;
  const BufferId source = graph.input(src, plain_f32);
  graph.add_host_loop(loop, graph.define(step.outputs[0], plain_f32), source);
}

// An elementwise host loop, in the input's layout when its buffer holds exactly the values (an
// elementwise step ignores the order), else plain.
void build_host_values_loop(const StepRecord& step, GraphBuilder& graph, HostLoop loop) {
  const uint32_t src = step.inputs[0];
  const DataType type = graph.compute_type(step.outputs[0]) == DataType::bf16 ? DataType::bf16 : DataType::f32;
  const memory::desc plain = plain_desc(graph.dims(src), type);
  const memory::desc stored = graph.desc_as(src, type);
  const memory::desc layout = stored.get_size() == plain.get_size() ? stored : plain; // no padding or gaps
  loop.bf16 = type == DataType::bf16;
  const BufferId source = graph.input(src, layout);
  graph.add_host_loop(loop, graph.define(step.outputs[0], layout), source);
}

// relu and clip (clamp, hardtanh, relu6) on the host, where a NaN stays NaN (clamp_values()).
void build_host_clamp(const StepRecord& step, GraphBuilder& graph, float lower, float upper) {
  HostLoop loop;
  loop.kind = HostLoop::Kind::Clamp;
  loop.value = lower;
  loop.upper = upper;
  build_host_values_loop(step, graph, loop);
}
} // namespace

void build_eltwise(const StepRecord& step, GraphBuilder& graph) {
  const uint32_t src = step.inputs[0];
  require_same_dims(graph.dims(src), graph.dims(step.outputs[0]), "src and dst dims");
  const EltwiseImplementation& eltwise = lookup_code(kEltwiseImplementations, step.int_scalar("alg"), "eltwise alg");
  if (eltwise.on_host) {
    build_host_eltwise(step, graph, eltwise.host);
    return;
  }
  const algorithm alg = eltwise.onednn;
  const auto alpha = static_cast<float>(step.float_scalar("alpha"));
  const auto beta = static_cast<float>(step.float_scalar("beta"));
  if (alg == algorithm::eltwise_relu && alpha == 0.0f) {
    build_host_clamp(step, graph, 0.0f, std::numeric_limits<float>::infinity());
    return;
  }
  if (alg == algorithm::eltwise_clip) {
    build_host_clamp(step, graph, alpha, beta);
    return;
  }
  const auto values = static_cast<size_t>(plain_desc(graph.dims(src)).get_size() / sizeof(float));
  const DataType type = graph.compute_type(step.outputs[0]);
  if (const std::optional<Activation> activation = host_activation(alg, type, values)) {
    build_host_values_loop(step, graph, activation_loop(*activation, type, alpha, beta));
    return;
  }
  const memory::desc layout = graph.desc_as(src, type);
  const dnnl::eltwise_forward::primitive_desc pd(
      graph.engine(), prop_kind::forward_inference, alg, layout, layout, alpha, beta, GraphBuilder::default_attr());
  const BufferId source = graph.input(src, layout);
  const BufferId target = graph.define(step.outputs[0], pd.dst_desc());
  const auto record = [&]() {
    graph.add_primitive(dnnl::eltwise_forward(pd), pd, {{DNNL_ARG_SRC, source}, {DNNL_ARG_DST, target}});
  };
  // oneDNN (3.2, 3.13.1) turns a NaN into inf (exp) or 1 (hardsigmoid): put it back.
  if ((alg != algorithm::eltwise_exp && alg != algorithm::eltwise_hardsigmoid) || pd.dst_desc() != layout) {
    record();
    return;
  }
  graph.add_non_finite_branch(record, [&]() {
    record();
    HostLoop keep;
    keep.kind = HostLoop::Kind::KeepNan;
    keep.bf16 = layout.get_data_type() == DataType::bf16;
    graph.add_host_loop(keep, target, source);
  });
}

namespace {
// f32, or bf16 where the host has vector code for it (binary_values_bf16()). src1 of the other type
// is converted to `layout` first, as oneDNN's binary would take it.
bool is_host_binary(BinaryAlg alg, const memory::desc& layout) {
  const bool exact_op =
      alg == BinaryAlg::Add || alg == BinaryAlg::Sub || alg == BinaryAlg::Mul || alg == BinaryAlg::Div;
  const DataType type = layout.get_data_type();
  const bool host_type = type == DataType::f32 || (type == DataType::bf16 && host_row_isa() != RowIsa::scalar);
  return exact_op && host_type && layout == plain_desc(layout.get_dims(), type) &&
         layout.get_size() <= kHostElementwiseValues * memory::data_type_size(type);
}
} // namespace

void build_binary(const StepRecord& step, GraphBuilder& graph) {
  const uint32_t src0 = step.inputs[0];
  const uint32_t src1 = step.inputs[1];
  const memory::dims dst = graph.dims(step.outputs[0]);
  require_same_dims(graph.dims(src0), dst, "src0 and dst dims");
  const memory::dims src1_dims = left_pad(graph.dims(src1), dst.size());
  ODNN_CHECK(
      graph.dims(src1).size() <= dst.size() && broadcasts_to(src1_dims, dst),
      "src1 %s does not broadcast to dst %s",
      dims_string(graph.dims(src1)).c_str(),
      dims_string(dst).c_str());
  const algorithm alg = lookup_code(kBinaryAlgorithms, step.int_scalar("alg"), "binary alg");
  const memory::desc layout = graph.desc_as(src0, graph.compute_type(step.outputs[0]));
  // A full-size src1 follows src0's layout; a broadcast one is plain, in its own type.
  const memory::desc src1_desc = src1_dims == dst ? layout : plain_desc(src1_dims, graph.compute_type(src1));
  const PostOps post_ops = read_post_ops(step, graph, 2, dst);
  const auto code = static_cast<BinaryAlg>(step.int_scalar("alg")); // a known one: `alg` looked it up
  if (post_ops.entries.empty() && src1_dims == dst && is_host_binary(code, layout)) {
    HostLoop loop;
    loop.kind = HostLoop::Kind::Binary;
    loop.binary = code;
    loop.bf16 = layout.get_data_type() == DataType::bf16;
    loop.isa = host_row_isa();
    const BufferId lhs = graph.input(src0, layout);
    const BufferId rhs = operand(graph, src1, src1_dims, layout); // viewed at dst's rank where it has fewer dims
    graph.add_host_loop(loop, graph.define(step.outputs[0], layout), lhs, rhs);
    return;
  }
  const dnnl::binary::primitive_desc pd(graph.engine(), alg, layout, src1_desc, layout, attr_with(post_ops));
  ArgList args = {
      {DNNL_ARG_SRC_0, graph.input(src0, layout)}, {DNNL_ARG_SRC_1, operand(graph, src1, src1_dims, src1_desc)}};
  add_post_op_args(post_ops, pd, graph, args);
  args.emplace_back(DNNL_ARG_DST, graph.define(step.outputs[0], pd.dst_desc()));
  add_post_op_primitive(graph, post_ops, {dnnl::binary(pd), pd}, args, [&](const dnnl::post_ops& ops) {
    dnnl::primitive_attr exact = attr_with(ops);
    const dnnl::binary::primitive_desc without_clamps(
        graph.engine(), alg, pd.src_desc(0), pd.src_desc(1), pd.dst_desc(), exact);
    return BuiltPrimitive{dnnl::binary(without_clamps), without_clamps};
  });
}

// Whether an average pooling of `src` to `dst` takes each image's every pixel in one window, src f32
// and channels-last (`src_desc`): a global average pooling, which the host computes pixels-first.
bool averages_each_image(
    const memory::dims& src,
    const memory::dims& dst,
    const memory::dims& kernel,
    const memory::dims& padding_l,
    const memory::dims& padding_r,
    const memory::desc& src_desc) {
  for (size_t d = 0; d < kernel.size(); ++d) {
    if (kernel[d] != src[2 + d] || dst[2 + d] != 1 || padding_l[d] != 0 || padding_r[d] != 0) {
      return false;
    }
  }
  return src_desc.get_data_type() == DataType::f32 && src_desc == channels_last_desc(src);
}

void build_pooling(const StepRecord& step, GraphBuilder& graph) {
  const uint32_t src = step.inputs[0];
  const memory::dims dst = graph.dims(step.outputs[0]);
  const size_t spatial = spatial_rank(graph.dims(src));
  const algorithm alg = lookup_code(kPoolingAlgorithms, step.int_scalar("alg"), "pooling alg");
  const DataType type = graph.compute_type(step.outputs[0]);
  const memory::desc src_desc = graph.desc_as(src, type);
  const memory::dims strides = spatial_attr(step, "strides", spatial, 1);
  const memory::dims kernel = spatial_attr(step, "kernel", spatial, 1);
  const memory::dims dilation = dnnl_dilation(step, spatial);
  const memory::dims padding_l = spatial_attr(step, "padding_l", spatial, 0);
  const memory::dims padding_r = spatial_attr(step, "padding_r", spatial, 0);
  if (alg != algorithm::pooling_max &&
      averages_each_image(graph.dims(src), dst, kernel, padding_l, padding_r, src_desc)) {
    HostLoop loop;
    loop.kind = HostLoop::Kind::GlobalAveragePool;
    loop.outer = static_cast<size_t>(dst[0]);
    loop.extent = 1;
    for (size_t d = 0; d < spatial; ++d) {
      loop.extent *= static_cast<size_t>(graph.dims(src)[2 + d]);
    }
    loop.inner = static_cast<size_t>(dst[1]);
    const auto partial_sums = static_cast<int64_t>(loop.outer * mean_chunks(loop.extent, loop.inner) * loop.inner);
    // dst [N, C, 1, 1] as oneDNN's pooling writes it: plain where the layout plan says so, else
    // channels-last like src (the same bytes either way).
    const memory::desc wanted = graph.dst_layout(step.outputs[0], type);
    const BufferId source = graph.input(src, src_desc);
    const BufferId target = graph.define(
        step.outputs[0], wanted.get_format_kind() == memory::format_kind::any ? channels_last_desc(dst) : wanted);
    graph.add_host_loop(loop, target, source, graph.scratch(plain_desc({partial_sums})));
    return;
  }
  const dnnl::pooling_forward::primitive_desc pd(
      graph.engine(),
      prop_kind::forward_inference,
      alg,
      src_desc,
      graph.dst_layout(step.outputs[0], type),
      strides,
      kernel,
      dilation,
      padding_l,
      padding_r,
      GraphBuilder::default_attr());
  const BufferId source = graph.input(src, src_desc);
  const BufferId target = graph.define(step.outputs[0], pd.dst_desc());
  const auto record = [&]() {
    graph.add_primitive(dnnl::pooling_forward(pd), pd, {{DNNL_ARG_SRC, source}, {DNNL_ARG_DST, target}});
  };
  if (alg != algorithm::pooling_max) {
    record();
    return;
  }
  // oneDNN's max pooling (3.2, 3.13.1) loses a NaN: with one in src, PyTorch's windows on the host.
  HostLoop loop;
  loop.kind = HostLoop::Kind::MaxPool;
  MaxPoolPlanes& pool = loop.max_pool;
  pool.planes = static_cast<size_t>(dst[0] * dst[1]);
  for (size_t d = 0; d < spatial; ++d) {
    const size_t slot = 3 - spatial + d;
    pool.in[slot] = static_cast<size_t>(graph.dims(src)[2 + d]);
    pool.out[slot] = static_cast<size_t>(dst[2 + d]);
    pool.kernel[slot] = static_cast<size_t>(kernel[d]);
    pool.stride[slot] = static_cast<size_t>(strides[d]);
    pool.dilation[slot] = static_cast<size_t>(dilation[d] + 1);
    pool.pad[slot] = static_cast<size_t>(padding_l[d]);
  }
  add_exact_on_host(graph, source, target, loop, record);
}

// On the host: oneDNN's pooling takes windows of one size only.
void build_adaptive_pooling(const StepRecord& step, GraphBuilder& graph) {
  const uint32_t src = step.inputs[0];
  const memory::dims in = graph.dims(src);
  const memory::dims out = graph.dims(step.outputs[0]);
  ODNN_CHECK(
      in.size() >= 3 && in.size() <= 5 && out.size() == in.size() && in[0] == out[0] && in[1] == out[1],
      "src %s and dst %s must be [N, C] and the same 1 to 3 spatial dims",
      dims_string(in).c_str(),
      dims_string(out).c_str());
  const auto alg = static_cast<PoolingAlg>(step.int_scalar("alg"));
  ODNN_CHECK(
      alg == PoolingAlg::Max || alg == PoolingAlg::AvgExcludePadding,
      "adaptive pooling alg %lld must be MAX or AVG_EXCLUDE_PADDING",
      static_cast<long long>(alg));
  HostLoop loop;
  loop.kind = HostLoop::Kind::AdaptivePool;
  loop.max = alg == PoolingAlg::Max;
  loop.outer = static_cast<size_t>(in[0] * in[1]);
  const size_t spatial = in.size() - 2;
  for (size_t d = 0; d < spatial; ++d) {
    ODNN_CHECK(
        in[2 + d] > 0 && out[2 + d] > 0,
        "adaptive pooling of %s to %s",
        dims_string(in).c_str(),
        dims_string(out).c_str());
    loop.in[3 - spatial + d] = static_cast<size_t>(in[2 + d]);
    loop.out[3 - spatial + d] = static_cast<size_t>(out[2 + d]);
  }
  const BufferId source = graph.input(src, plain_desc(in, DataType::f32));
  graph.add_host_loop(loop, graph.define(step.outputs[0], plain_desc(out, DataType::f32)), source);
}

void build_reduction(const StepRecord& step, GraphBuilder& graph) {
  const uint32_t src = step.inputs[0];
  const memory::dims src_dims = graph.dims(src);
  const memory::dims dst = graph.dims(step.outputs[0]);
  ODNN_CHECK(
      dst.size() == src_dims.size() && broadcasts_to(dst, src_dims),
      "dst %s must keep the rank of src %s with reduced dims set to 1",
      dims_string(dst).c_str(),
      dims_string(src_dims).c_str());
  const algorithm alg = lookup_code(kReductionAlgorithms, step.int_scalar("alg"), "reduction alg");
  const DataType type = graph.compute_type(step.outputs[0]);
  const memory::desc src_desc = graph.desc_as(src, type);
  const dnnl::reduction::primitive_desc pd(
      graph.engine(), alg, src_desc, graph.dst_layout(step.outputs[0], type), 0.0f, 0.0f, GraphBuilder::default_attr());
  const BufferId source = graph.input(src, src_desc);
  const BufferId target = graph.define(step.outputs[0], pd.dst_desc());
  const auto record = [&]() {
    graph.add_primitive(dnnl::reduction(pd), pd, {{DNNL_ARG_SRC, source}, {DNNL_ARG_DST, target}});
  };
  if ((alg != algorithm::reduction_max && alg != algorithm::reduction_min) || src_dims.size() > kMaxRank) {
    record();
    return;
  }
  // oneDNN's max and min reductions (3.2, 3.13.1) lose a NaN: with one in src, PyTorch's result on the host.
  HostLoop loop;
  loop.kind = HostLoop::Kind::ReduceExtremum;
  ExtremumReduction& reduction = loop.extremum;
  reduction.min = alg == algorithm::reduction_min;
  reduction.rank = src_dims.size();
  reduction.dst_count = static_cast<size_t>(element_count(dst));
  const memory::dims dst_strides = row_major_strides(dst);
  for (size_t d = 0; d < src_dims.size(); ++d) {
    reduction.src_dims[d] = static_cast<size_t>(src_dims[d]);
    reduction.dst_strides[d] = dst[d] == 1 ? 0 : static_cast<size_t>(dst_strides[d]);
  }
  add_exact_on_host(graph, source, target, loop, record);
}

namespace {

// The flags of a normalization whose scale and shift inputs are each optional.
dnnl::normalization_flags normalization_flags(bool has_scale, bool has_shift) {
  auto flags = dnnl::normalization_flags::none;
  if (has_scale) {
    flags |= dnnl::normalization_flags::use_scale;
  }
  if (has_shift) {
    flags |= dnnl::normalization_flags::use_shift;
  }
  return flags;
}

} // namespace

// Inference batch norm with the running statistics (inputs: src, mean, var, [scale], [shift]).
void build_batch_norm(const StepRecord& step, GraphBuilder& graph) {
  const uint32_t src = step.inputs[0];
  const memory::dims src_dims = graph.dims(src);
  require_same_dims(src_dims, graph.dims(step.outputs[0]), "src and dst dims");
  ODNN_CHECK(src_dims.size() >= 2, "src %s must have a channel dim", dims_string(src_dims).c_str());
  const int64_t channels = src_dims[1];
  const bool has_scale = step.has_input(3);
  const bool has_shift = step.has_input(4);
  const auto flags = dnnl::normalization_flags::use_global_stats | normalization_flags(has_scale, has_shift);
  const memory::desc layout = graph.desc_as(src, graph.compute_type(step.outputs[0]));
  const dnnl::batch_normalization_forward::primitive_desc pd(
      graph.engine(),
      prop_kind::forward_inference,
      layout,
      layout,
      static_cast<float>(step.float_scalar("eps")),
      flags,
      GraphBuilder::default_attr());
  ArgList args = {
      {DNNL_ARG_SRC, graph.input(src, layout)},
      {DNNL_ARG_MEAN, vector_operand(graph, step.inputs[1], channels, "mean")},
      {DNNL_ARG_VARIANCE, vector_operand(graph, step.inputs[2], channels, "var")}};
  if (has_scale) {
    args.emplace_back(DNNL_ARG_SCALE, vector_operand(graph, step.inputs[3], channels, "scale"));
  }
  if (has_shift) {
    args.emplace_back(DNNL_ARG_SHIFT, vector_operand(graph, step.inputs[4], channels, "shift"));
  }
  args.emplace_back(DNNL_ARG_DST, graph.define(step.outputs[0], pd.dst_desc()));
  graph.add_primitive(dnnl::batch_normalization_forward(pd), pd, args);
}

// Layer norm over the last dim (inputs: src, [scale], [shift]); plain layout.
void build_layer_norm(const StepRecord& step, GraphBuilder& graph) {
  const uint32_t src = step.inputs[0];
  const memory::dims dims = graph.dims(src);
  require_same_dims(dims, graph.dims(step.outputs[0]), "src and dst dims");
  ODNN_CHECK(dims.size() >= 2, "src %s must have rank >= 2", dims_string(dims).c_str());
  const int64_t features = dims.back();
  const bool has_scale = step.has_input(1);
  const bool has_shift = step.has_input(2);
  const auto flags = normalization_flags(has_scale, has_shift);
  const memory::desc layout = plain_desc(dims, graph.compute_type(step.outputs[0]));
  const dnnl::layer_normalization_forward::primitive_desc pd(
      graph.engine(),
      prop_kind::forward_inference,
      layout,
      layout,
      static_cast<float>(step.float_scalar("eps")),
      flags,
      GraphBuilder::default_attr());
  ArgList args = {{DNNL_ARG_SRC, graph.input(src, layout)}};
  if (has_scale) {
    args.emplace_back(DNNL_ARG_SCALE, vector_operand(graph, step.inputs[1], features, "scale"));
  }
  if (has_shift) {
    args.emplace_back(DNNL_ARG_SHIFT, vector_operand(graph, step.inputs[2], features, "shift"));
  }
  args.emplace_back(DNNL_ARG_DST, graph.define(step.outputs[0], layout));
  graph.add_primitive(dnnl::layer_normalization_forward(pd), pd, args);
}

// On the host (RowKernels.h): oneDNN 3.2's layer normalization always subtracts the mean (3.13's RMS
// mode is not used yet).
void build_rms_norm(const StepRecord& step, GraphBuilder& graph) {
  const uint32_t src = step.inputs[0];
  const memory::dims dims = graph.dims(src);
  require_same_dims(dims, graph.dims(step.outputs[0]), "src and dst dims");
  ODNN_CHECK(!dims.empty() && dims.back() > 0, "src %s must have a last dim", dims_string(dims).c_str());
  const double eps = step.float_scalar("eps");
  ODNN_CHECK(std::isfinite(eps) && eps >= 0.0, "eps %g must be finite and >= 0", eps);
  HostLoop loop;
  loop.kind = HostLoop::Kind::RmsNorm;
  loop.rms_norm.extent = static_cast<size_t>(dims.back());
  loop.rms_norm.rows = static_cast<size_t>(element_count(dims)) / loop.rms_norm.extent;
  loop.rms_norm.eps = static_cast<float>(eps);
  loop.rms_norm.isa = host_row_isa();
  const DataType src_type = graph.data_type(src) == DataType::bf16 ? DataType::bf16 : DataType::f32;
  const DataType dst_type = graph.compute_type(step.outputs[0]);
  loop.rms_norm.src_bf16 = src_type == DataType::bf16;
  loop.rms_norm.dst_bf16 = dst_type == DataType::bf16;
  BufferId weight = kNoBuffer;
  if (step.has_input(1)) {
    const memory::dims weight_dims = graph.dims(step.inputs[1]);
    ODNN_CHECK(
        element_count(weight_dims) == dims.back() && weight_dims.back() == dims.back(),
        "weight %s must hold one value per element of the last dim of %s",
        dims_string(weight_dims).c_str(),
        dims_string(dims).c_str());
    loop.rms_norm.has_weight = true;
    weight = graph.input_view(
        step.inputs[1],
        plain_desc({dims.back()}, graph.data_type(step.inputs[1])),
        plain_desc({dims.back()}, DataType::f32));
  }
  const BufferId source = graph.input(src, plain_desc(dims, src_type));
  graph.add_host_loop(loop, graph.define(step.outputs[0], plain_desc(dims, dst_type)), source, weight);
}

// On the host (Rotary.h): src [..., P, 2] as P pairs per row, the tables [..., P] broadcasting to
// src's dims without the last (left-padded, each dim equal or 1).
void build_rotary(const StepRecord& step, GraphBuilder& graph) {
  const uint32_t src = step.inputs[0], cos = step.inputs[1], sin = step.inputs[2];
  const memory::dims dims = graph.dims(src);
  require_same_dims(dims, graph.dims(step.outputs[0]), "src and dst dims");
  ODNN_CHECK(
      dims.size() >= 2 && dims.back() == 2 && dims[dims.size() - 2] > 0,
      "src %s must hold pairs [..., P, 2]",
      dims_string(dims).c_str());
  const memory::dims rows(dims.begin(), dims.end() - 1);
  const memory::dims table_dims = graph.dims(cos);
  const memory::dims table = left_pad(table_dims, rows.size());
  ODNN_CHECK(
      table_dims == graph.dims(sin) && table_dims.size() <= rows.size() && table.back() == rows.back() &&
          broadcasts_to(table, rows),
      "tables %s and %s must be alike and broadcast to %s",
      dims_string(table_dims).c_str(),
      dims_string(graph.dims(sin)).c_str(),
      dims_string(rows).c_str());
  HostLoop loop;
  loop.kind = HostLoop::Kind::Rotary;
  RotaryRows& rotary = loop.rotary;
  rotary.pairs = static_cast<size_t>(rows.back());
  rotary.rows = static_cast<size_t>(element_count(rows)) / rotary.pairs;
  ODNN_CHECK(
      static_cast<size_t>(element_count(table_dims)) / rotary.pairs <= UINT32_MAX,
      "tables %s have more rows than a 32-bit index holds",
      dims_string(table_dims).c_str());
  // Row r's coordinates (last one first) select the table row through the dims the tables keep.
  rotary.table_rows.resize(rotary.rows);
  for (size_t r = 0; r < rotary.rows; ++r) {
    size_t rest = r, table_row = 0, table_stride = 1;
    for (size_t axis = rows.size() - 1; axis-- > 0;) {
      const size_t size = static_cast<size_t>(rows[axis]), coordinate = rest % size;
      rest /= size;
      if (table[axis] != 1) {
        table_row += coordinate * table_stride;
        table_stride *= size;
      }
    }
    rotary.table_rows[r] = static_cast<uint32_t>(table_row);
  }
  const DataType type = graph.compute_type(step.outputs[0]) == DataType::bf16 ? DataType::bf16 : DataType::f32;
  rotary.bf16 = type == DataType::bf16;
  graph.add_host_loop(
      loop,
      graph.define(step.outputs[0], plain_desc(dims, type)),
      graph.input(src, plain_desc(dims, type)),
      graph.plain_input(cos, DataType::f32),
      {graph.plain_input(sin, DataType::f32)});
}

void build_softmax(const StepRecord& step, GraphBuilder& graph) {
  const uint32_t src = step.inputs[0];
  const memory::dims dims = graph.dims(src);
  require_same_dims(dims, graph.dims(step.outputs[0]), "src and dst dims");
  const int axis = normalize_axis(step.int_scalar("axis"), dims.size());
  const algorithm alg = step.int_scalar("log") != 0 ? algorithm::softmax_log : algorithm::softmax_accurate;
  // The fully-masked-row fix-up reads and writes f32 on the host: such a softmax computes in f32
  // and converts its result when the output is bf16.
  const bool zero_masked_rows = step.has("zero_fully_masked_rows") && step.int_scalar("zero_fully_masked_rows") != 0;
  // On the host, with AVX-512 or one value at a time: oneDNN's AVX2 softmax drops a NaN where
  // PyTorch's row becomes NaN, and its log-softmax gives -inf where a row holding +inf is NaN.
  if (axis + 1 == static_cast<int>(dims.size()) && dims.back() > 0) {
    const DataType src_type = graph.data_type(src) == DataType::bf16 ? DataType::bf16 : DataType::f32;
    const DataType dst_type = graph.compute_type(step.outputs[0]);
    HostLoop loop;
    loop.kind = HostLoop::Kind::Softmax;
    loop.softmax.extent = static_cast<size_t>(dims.back());
    loop.softmax.rows = static_cast<size_t>(element_count(dims)) / loop.softmax.extent;
    loop.softmax.src_bf16 = src_type == DataType::bf16;
    loop.softmax.dst_bf16 = dst_type == DataType::bf16;
    loop.softmax.zero_fully_masked = zero_masked_rows;
    loop.softmax.log = alg == algorithm::softmax_log;
    loop.softmax.isa = host_row_isa();
    const BufferId source = graph.input(src, plain_desc(dims, src_type));
    graph.add_host_loop(loop, graph.define(step.outputs[0], plain_desc(dims, dst_type)), source);
    return;
  }
  const memory::desc output = plain_desc(dims, graph.compute_type(step.outputs[0]));
  const memory::desc layout = zero_masked_rows ? plain_desc(dims) : output;
  const dnnl::softmax_forward::primitive_desc pd(
      graph.engine(), prop_kind::forward_inference, alg, layout, layout, axis, GraphBuilder::default_attr());
  const BufferId source = graph.input(src, layout);
  const BufferId destination = layout == output ? graph.define(step.outputs[0], output) : graph.scratch(layout);
  graph.add_primitive(dnnl::softmax_forward(pd), pd, {{DNNL_ARG_SRC, source}, {DNNL_ARG_DST, destination}});
  if (zero_masked_rows) {
    HostLoop rows;
    rows.kind = HostLoop::Kind::ZeroFullyMaskedRows;
    rows.outer = static_cast<size_t>(element_count(memory::dims(dims.begin(), dims.begin() + axis)));
    rows.extent = static_cast<size_t>(dims[axis]);
    rows.inner = static_cast<size_t>(element_count(memory::dims(dims.begin() + axis + 1, dims.end())));
    graph.add_host_loop(rows, destination, source);
  }
  if (layout != output) {
    graph.add_reorder(destination, graph.define(step.outputs[0], output));
  }
}

void build_resampling(const StepRecord& step, GraphBuilder& graph) {
  const uint32_t src = step.inputs[0];
  const memory::dims src_dims = graph.dims(src);
  const memory::dims dst = graph.dims(step.outputs[0]);
  spatial_rank(src_dims);
  ODNN_CHECK(
      dst.size() == src_dims.size() && dst[0] == src_dims[0] && dst[1] == src_dims[1],
      "dst %s must keep N and C of src %s",
      dims_string(dst).c_str(),
      dims_string(src_dims).c_str());
  const algorithm alg = lookup_code(kResamplingAlgorithms, step.int_scalar("alg"), "resampling alg");
  const DataType type = graph.compute_type(step.outputs[0]);
  const memory::desc src_desc = graph.desc_as(src, type);
  const dnnl::resampling_forward::primitive_desc pd(
      graph.engine(),
      prop_kind::forward_inference,
      alg,
      src_desc,
      graph.dst_layout(step.outputs[0], type),
      GraphBuilder::default_attr());
  graph.add_primitive(
      dnnl::resampling_forward(pd),
      pd,
      {{DNNL_ARG_SRC, graph.input(src, src_desc)}, {DNNL_ARG_DST, graph.define(step.outputs[0], pd.dst_desc())}});
}

} // namespace executorch::backends::onednn
