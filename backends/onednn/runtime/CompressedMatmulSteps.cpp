// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// COMPRESSED_MATMUL: rows times weights kept compressed, s4 (two a byte) or s8 [N, K] with scales per
// group of K (f32, or bf16 for s4: GroupScales.h; and s8 zero points), torchao's affine quantization
// as export_llm writes it (ops/affine.py). With `quantize_rows`, each row is first quantized as
// torchao's 8da4w does (int8, asymmetric, per row). The weights are read where the program holds
// them: nothing is unpacked at init.
//
//   quantize_rows, s4, no zero points, one row  the int8-row host kernel (Int4VectorMatrix.h)
//   ... several rows, AMX or VNNI, "fast"       the weights widened to s8 on a grid per column, a
//                                               block of columns at a time, for oneDNN's u8 x s8
//                                               matmul (WidenedInt4Matmul.h), the rows' zero points
//                                               taken off after; K a multiple of 64, groups of 32n
//   ... other K or groups, AMX, "fast"          oneDNN's AMX bf16 matmul of the quantized rows less
//                                               their zero points (exact in bf16) by the weights
//                                               dequantized to bf16, each row's scale a post-op
//   ... several rows, AMX, "exact"              oneDNN's AMX s8 x s4 matmul with per-row src scales,
//                                               then the rows' zero points taken off on the host
//   otherwise, s4, one bf16 row, AVX512-VNNI,   the bf16-row host kernel: the row in two int8 slices
//   "fast"                                      per 32 values (Int4VectorMatrix.h)
//   otherwise, s4, one row                      the f32-row host kernel (a bf16 row widened; rows to
//                                               quantize are quantized and dequantized first)
//   otherwise, s8 without zero points, one row  the f32-row int8 host kernel (Int8VectorMatrix.h)
//   otherwise                                   oneDNN's weight decompression (f32 or bf16 rows, as
//                                               above). Without AMX oneDNN's s8 x s4 matmul is its
//                                               reference kernel (12 ns a product), and on the AMX
//                                               Xeon capped to avx2 an 8da4w prompt ran 1.31x faster
//                                               this way than through the one-row kernel a block of
//                                               columns at a time.
#include <algorithm>
#include <atomic>
#include <vector>

#include <oneapi/dnnl/dnnl_threadpool.h>

#include "CpuIsa.h"
#include "HostLoops.h"
#include "InitError.h"
#include "Int8VectorMatrix.h"
#include "StepBuilders.h"
#include "Threading.h"
#include "WidenedInt4Matmul.h"

namespace executorch::backends::onednn {

namespace {

std::atomic<int> int4_products_setting{static_cast<int>(Int4Products::fast)};

struct CompressedOperands {
  uint32_t src, weights, scales, zero_points; // zero_points: kNoValue when absent
  int64_t rows, k, n, group;
  bool quantize_rows;
  bool bf16_scales; // else f32
};

CompressedOperands read_operands(const StepRecord& step, GraphBuilder& graph) {
  CompressedOperands op{};
  op.src = step.inputs[0];
  op.weights = step.inputs[1];
  op.scales = step.inputs[2];
  op.zero_points = step.has_input(4) ? step.inputs[4] : kNoValue;
  op.group = step.int_scalar("group_size");
  op.quantize_rows = step.has("quantize_rows") && step.int_scalar("quantize_rows") != 0;
  const memory::dims src = graph.dims(op.src);
  const memory::dims weights = graph.dims(op.weights);
  ODNN_CHECK(
      !src.empty() && weights.size() == 2,
      "src %s and weights %s",
      dims_string(src).c_str(),
      dims_string(weights).c_str());
  op.n = weights[0];
  op.k = weights[1];
  op.rows = element_count(src) / src.back();
  ODNN_CHECK(
      src.back() == op.k, "src %s against weights [N, K] %s", dims_string(src).c_str(), dims_string(weights).c_str());
  const DataType weight_type = graph.data_type(op.weights);
  ODNN_CHECK(
      graph.is_constant(op.weights) && (weight_type == DataType::s4 || weight_type == DataType::s8),
      "weights must be an S4 or S8 constant, got %s",
      dtype_name(graph.value(op.weights).dtype));
  ODNN_CHECK(
      op.group > 0 && op.k % op.group == 0,
      "group size %lld does not divide K = %lld",
      (long long)op.group,
      (long long)op.k);
  const memory::dims group_dims{op.n, op.k / op.group};
  const DataType scale_type = graph.data_type(op.scales);
  ODNN_CHECK(
      graph.is_constant(op.scales) && graph.dims(op.scales) == group_dims &&
          (scale_type == DataType::f32 || (scale_type == DataType::bf16 && weight_type == DataType::s4)),
      "scales must be an F32 (or, for S4 weights, BF16) constant %s, got %s %s",
      dims_string(group_dims).c_str(),
      dtype_name(graph.value(op.scales).dtype),
      dims_string(graph.dims(op.scales)).c_str());
  op.bf16_scales = scale_type == DataType::bf16;
  ODNN_CHECK(
      op.zero_points == kNoValue ||
          (graph.is_constant(op.zero_points) && graph.data_type(op.zero_points) == DataType::s8 &&
           graph.dims(op.zero_points) == group_dims),
      "zero points must be an S8 constant %s",
      dims_string(group_dims).c_str());
  if (step.has_input(3)) {
    ODNN_CHECK(
        graph.is_constant(step.inputs[3]) && element_count(graph.dims(step.inputs[3])) == op.n,
        "bias must be a constant of N = %lld values",
        (long long)op.n);
  }
  return op;
}

// The weights [N, K] as oneDNN's {K, N}: K innermost (two s4 values a byte along it), read in place.
memory::desc weights_view(const CompressedOperands& op, DataType type) {
  return memory::desc({op.k, op.n}, type, memory::format_tag::ba);
}

// Per-group scales (and zero points) [N, K / G] as oneDNN's {K / G, N}.
memory::desc group_view(const CompressedOperands& op, DataType type) {
  return memory::desc({op.k / op.group, op.n}, type, memory::format_tag::ba);
}

// The group scales (or zero points) as oneDNN's matmul reads them, {K / G, N} dense (it ignores a
// view's strides) in `type` (bf16 scales become f32), transposed from the program's [N, K / G] into the
// arena on every call. A transposed constant would stay resident beside the bytes the one-row host
// kernels read (1/8 byte a weight: 134 MB on a 1.1B-parameter LLM at group 32) for a copy that costs a
// several-row matmul little.
BufferId transposed_groups(GraphBuilder& graph, const CompressedOperands& op, uint32_t value, DataType type) {
  const DataType stored = graph.data_type(value);
  // One group a row (export_llm's qmode=int8) in the type asked for: [N, 1] is [1, N] already.
  if (op.k == op.group && stored == type) {
    return graph.alias(graph.buffer(value), plain_desc({1, op.n}, type));
  }
  const BufferId transposed = graph.scratch(plain_desc({op.k / op.group, op.n}, type));
  graph.add_reorder(graph.alias(graph.buffer(value), group_view(op, stored)), transposed);
  return transposed;
}

// Rows quantized as torchao does: q (s8, or q + 128 as u8 with `as_u8`) and, per row, the scale (f32)
// and the zero point (s32) in one scratch buffer [2, rows] (scales first, so the front is oneDNN's
// per-row src scales).
struct QuantizedRows {
  BufferId q;
  BufferId params;
};

QuantizedRows add_row_quantization(GraphBuilder& graph, const CompressedOperands& op, BufferId rows, bool as_u8) {
  HostLoop loop;
  loop.kind = HostLoop::Kind::QuantizeRowsAffine;
  loop.outer = static_cast<size_t>(op.rows);
  loop.extent = static_cast<size_t>(op.k);
  loop.u8_rows = as_u8;
  QuantizedRows quantized{
      graph.scratch(plain_desc({op.rows, op.k}, as_u8 ? DataType::u8 : DataType::s8)),
      graph.scratch(plain_desc({2, op.rows}, DataType::f32))};
  graph.add_host_loop(loop, quantized.q, rows, quantized.params);
  return quantized;
}

// One constant per output column: what a row's zero point contributes to it (int4_column_terms).
BufferId column_terms(GraphBuilder& graph, const CompressedOperands& op, Int4MatrixShape shape) {
  const auto terms = graph.derived_floats(op.weights, op.scales, GraphBuilder::Derived::int4_column_terms, [&] {
    std::vector<float> computed(static_cast<size_t>(op.n));
    const auto* weights = static_cast<const uint8_t*>(graph.constant_data(op.weights));
    const GroupScales scales(graph.constant_data(op.scales), op.bf16_scales);
    // Every weight of the program is read here, once per program: on the pool when a graph is built
    // inside execute() (a new prompt length), on this thread at init.
    parallel_chunks(computed.size(), 256, [&](size_t begin, size_t end) {
      int4_column_terms(shape, weights, scales, computed.data(), begin, end);
    });
    return computed;
  });
  return graph.owned_constant(plain_desc({op.n}), terms, 0);
}

// How a matmul's rows carry their per-row quantization: not at all (f32 or bf16 rows that the weights
// are dequantized to), as oneDNN's per-row src scales (s8 rows), or as a scale to multiply each
// result by (bf16 rows holding q less the zero point).
enum class RowScales { none, src, after };

// oneDNN's matmul of `rows` by the weights read in place, their group scales (and zero points) as
// attributes. RowScales::after runs over 3D views {1, rows, .}: oneDNN's brgemm matmul takes a
// {1, rows, 1} post-op operand, while for a 2D {rows, 1} one it picks its reference kernel.
void add_weights_matmul(
    const StepRecord& step,
    GraphBuilder& graph,
    const CompressedOperands& op,
    BufferId rows,
    RowScales row_scaling,
    BufferId row_scales,
    BufferId dst) {
  const bool after = row_scaling == RowScales::after;
  const auto viewed = [&](BufferId buffer, int64_t columns) {
    const DataType type = graph.buffer_desc(buffer).get_data_type();
    return after ? graph.alias(buffer, plain_desc({1, op.rows, columns}, type)) : buffer;
  };
  rows = viewed(rows, op.k);
  dst = viewed(dst, op.n);
  const memory::desc& src_desc = graph.buffer_desc(rows);
  const DataType src_type = src_desc.get_data_type();
  const int group_mask = after ? (1 << 1) | (1 << 2) : (1 << 0) | (1 << 1);
  dnnl::primitive_attr attr = GraphBuilder::default_attr();
  attr.set_scales(DNNL_ARG_WEIGHTS, group_mask, {op.group, 1}, DataType::f32);
  if (op.zero_points != kNoValue) {
    attr.set_zero_points(DNNL_ARG_WEIGHTS, group_mask, {op.group, 1}, DataType::s8);
  }
  if (row_scaling == RowScales::src) {
    attr.set_scales(DNNL_ARG_SRC, (1 << 0) | (1 << 1), {1, op.k}, DataType::f32);
  } else {
    attr.set_fpmath_mode(src_type == DataType::bf16 ? dnnl::fpmath_mode::bf16 : dnnl::fpmath_mode::strict, true);
  }
  const memory::desc weights_desc =
      after ? memory::desc({1, op.k, op.n}, graph.data_type(op.weights), memory::format_tag::acb)
            : weights_view(op, graph.data_type(op.weights));
  // After the rows' scales the bias is added by a primitive of its own, so that it is not scaled (as a
  // second post-op, a {1, 1, N} operand, it sends oneDNN to its reference kernel).
  const bool has_bias = step.has_input(3) && !after;
  const memory::desc bias_desc = plain_desc({1, op.n});
  if (after) {
    dnnl::post_ops post_ops;
    post_ops.append_binary(dnnl::algorithm::binary_mul, plain_desc({1, op.rows, 1}));
    attr.set_post_ops(post_ops);
  }
  dnnl::matmul::primitive_desc pd;
  try {
    pd = has_bias ? dnnl::matmul::primitive_desc(
                        graph.engine(), src_desc, weights_desc, bias_desc, graph.buffer_desc(dst), attr)
                  : dnnl::matmul::primitive_desc(graph.engine(), src_desc, weights_desc, graph.buffer_desc(dst), attr);
  } catch (const dnnl::error&) {
    fail(
        runtime::Error::NotSupported,
        "oneDNN has no matmul of %s rows by %s weights in groups of %lld on this CPU",
        src_type == DataType::s8     ? "s8"
        : src_type == DataType::bf16 ? "bf16"
                                     : "f32",
        dtype_name(graph.value(op.weights).dtype),
        static_cast<long long>(op.group));
  }
  ArgList args{
      {DNNL_ARG_SRC, rows},
      {DNNL_ARG_WEIGHTS, graph.input_view(op.weights, weights_desc, weights_desc)},
      {DNNL_ARG_ATTR_SCALES | DNNL_ARG_WEIGHTS, transposed_groups(graph, op, op.scales, DataType::f32)},
      {DNNL_ARG_DST, dst}};
  if (op.zero_points != kNoValue) {
    args.emplace_back(
        DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_WEIGHTS, transposed_groups(graph, op, op.zero_points, DataType::s8));
  }
  if (row_scaling == RowScales::src) {
    args.emplace_back(DNNL_ARG_ATTR_SCALES | DNNL_ARG_SRC, row_scales);
  }
  if (after) {
    args.emplace_back(
        DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, graph.alias(row_scales, plain_desc({1, op.rows, 1})));
  }
  if (has_bias) {
    args.emplace_back(DNNL_ARG_BIAS, graph.input_view(step.inputs[3], bias_desc, bias_desc));
  }
  graph.add_primitive(dnnl::matmul(pd), pd, args);
  if (after && step.has_input(3)) {
    const BufferId result = graph.alias(dst, plain_desc({op.rows, op.n}));
    const dnnl::binary::primitive_desc add(
        graph.engine(),
        dnnl::algorithm::binary_add,
        graph.buffer_desc(result),
        bias_desc,
        graph.buffer_desc(result),
        GraphBuilder::default_attr());
    graph.add_primitive(
        dnnl::binary(add),
        add,
        {{DNNL_ARG_SRC_0, result},
         {DNNL_ARG_SRC_1, graph.input_view(step.inputs[3], bias_desc, bias_desc)},
         {DNNL_ARG_DST, result}});
  }
}

// The step's sizes for the widening (its block width is picked with the primitives).
WidenedInt4Shape widened_shape(const CompressedOperands& op) {
  WidenedInt4Shape shape;
  shape.rows = static_cast<size_t>(op.rows);
  shape.k = static_cast<size_t>(op.k);
  shape.n = static_cast<size_t>(op.n);
  shape.group = static_cast<size_t>(op.group);
  shape.isa = host_row_isa();
  return shape;
}

// Per column, for widening the weights to s8 (Int4Widening.h): its grid s_col, then [n, 2n) its
// zero-point term; none where a group scale is NaN or infinite (the other paths propagate it).
std::shared_ptr<const std::vector<float>> widened_columns(GraphBuilder& graph, const CompressedOperands& op) {
  return graph.derived_floats(op.weights, op.scales, GraphBuilder::Derived::widened_columns, [&] {
    const WidenedInt4Shape shape = widened_shape(op);
    const size_t groups = shape.k / shape.group;
    const GroupScales scales(graph.constant_data(op.scales), op.bf16_scales);
    ScaleRows scale_rows(scales, groups);
    std::vector<float> columns(2 * shape.n);
    for (size_t r = 0; r < shape.n; ++r) {
      if (!widened_column_scale(scale_rows(r), groups, &columns[r])) {
        return std::vector<float>();
      }
    }
    const auto* weights = static_cast<const uint8_t*>(graph.constant_data(op.weights));
    parallel_chunks(shape.n, 256, [&](size_t begin, size_t end) {
      widened_int4_terms(shape, weights, scales, columns.data(), columns.data() + shape.n, begin, end);
    });
    return columns;
  });
}

// The quantized rows (as u8) times the weights widened to s8 on their column grids, for oneDNN's
// u8 x s8 matmul (WidenedInt4Matmul.h), the rows' zero points (and the 128) taken off after.
void add_widened_matmul(
    const StepRecord& step,
    GraphBuilder& graph,
    const CompressedOperands& op,
    const QuantizedRows& quantized,
    const std::shared_ptr<const std::vector<float>>& columns,
    BufferId dst) {
  int threads = 1;
  dnnl_threadpool_interop_get_max_concurrency(&threads);
  const bool bias = step.has_input(3);
  // The layers of one shape run one after another: they share the primitives and the slots' memory
  // objects (pointed at each block as it runs).
  const std::string key = "widened int4 " + std::to_string(op.rows) + "x" + std::to_string(op.k) + "x" +
                          std::to_string(op.n) + "/" + std::to_string(op.group) + (bias ? "+bias" : "") + " on " +
                          std::to_string(threads);
  const auto primitives = std::static_pointer_cast<const WidenedInt4Primitives>(graph.shared_by_steps(
      key, [&] { return make_widened_int4_primitives(graph.engine(), widened_shape(op), bias, threads); }));
  const WidenedInt4Shape& shape = primitives->shape;
  HostLoop loop;
  loop.kind = HostLoop::Kind::WidenedInt4Matmul;
  loop.int4_bf16_scales = op.bf16_scales;
  loop.outer = shape.rows;
  loop.widened_primitives = primitives;
  std::vector<BufferId> more{
      graph.input(op.weights, graph.plain(op.weights)),
      graph.plain_input(op.scales),
      graph.owned_constant(plain_desc({op.n}), columns, 0),
      graph.scratch(plain_desc({static_cast<int64_t>(widened_int4_scratch_bytes(*primitives))}, DataType::u8))};
  if (bias) {
    more.push_back(graph.input_view(step.inputs[3], plain_desc({op.n}), plain_desc({op.n})));
  }
  graph.add_host_loop(loop, dst, quantized.q, quantized.params, more);
  HostLoop zero_points;
  zero_points.kind = HostLoop::Kind::ZeroPointTerms;
  zero_points.outer = shape.rows;
  zero_points.extent = shape.n;
  zero_points.value = 128.0f; // the matmul's rows are q + 128
  graph.add_host_loop(
      zero_points,
      dst,
      kNoBuffer,
      quantized.params,
      {graph.owned_constant(plain_desc({op.n}), columns, static_cast<size_t>(op.n))});
}

// The host kernel for f32 rows takes int4 zero points only (in [-8, 7]).
bool zero_points_fit_int4(GraphBuilder& graph, const CompressedOperands& op) {
  if (op.zero_points == kNoValue) {
    return true;
  }
  const auto* zero_points = static_cast<const int8_t*>(graph.constant_data(op.zero_points));
  const size_t count = static_cast<size_t>(op.n * (op.k / op.group));
  return std::all_of(zero_points, zero_points + count, [](int8_t z) { return z >= -8 && z <= 7; });
}

} // namespace

void build_compressed_matmul(const StepRecord& step, GraphBuilder& graph) {
  const CompressedOperands op = read_operands(step, graph);
  const uint32_t output = step.outputs[0];
  memory::dims out_dims = graph.dims(op.src);
  out_dims.back() = op.n;
  require_same_dims(out_dims, graph.dims(output), "dst dims (src dims, last one N)");
  const bool int8_rows = op.quantize_rows && graph.data_type(op.weights) == DataType::s4 && op.zero_points == kNoValue;
  Int4MatrixShape shape;
  shape.isa = host_row_isa();
  shape.vnni = int8_products_exact();
  shape.n = static_cast<size_t>(op.n);
  shape.k = static_cast<size_t>(op.k);
  shape.group = static_cast<size_t>(op.group);
  // Several rows on the "fast" setting widen the weights to s8 where oneDNN's u8 x s8 matmul sums in
  // int32 (AMX, or VNNI) and a vector widening takes the shape.
  const bool widens_int4 = int8_rows && op.rows > 1 && graph.settings().int4_products == Int4Products::fast &&
                           shape.vnni && shape.isa != RowIsa::scalar && vector_widening(shape.k, shape.group);
  const std::shared_ptr<const std::vector<float>> columns = widens_int4 ? widened_columns(graph, op) : nullptr;
  const bool widened = columns != nullptr && !columns->empty();

  if (int8_rows && (op.rows == 1 || has_amx() || widened)) {
    const BufferId rows = graph.alias(graph.plain_input(op.src, DataType::f32), plain_desc({op.rows, op.k}));
    const QuantizedRows quantized = add_row_quantization(graph, op, rows, widened);
    const BufferId result = graph.define(output, plain_desc(out_dims, DataType::f32));
    const BufferId dst = graph.alias(result, plain_desc({op.rows, op.n}));
    const BufferId row_scales = graph.alias(quantized.params, plain_desc({op.rows, 1}));
    if (widened) {
      add_widened_matmul(step, graph, op, quantized, columns, dst);
      return;
    }
    if (op.rows > 1 && graph.settings().int4_products == Int4Products::fast) {
      HostLoop loop;
      loop.kind = HostLoop::Kind::CenterRowsAffine;
      loop.outer = static_cast<size_t>(op.rows);
      loop.extent = static_cast<size_t>(op.k);
      const BufferId centered = graph.scratch(plain_desc({op.rows, op.k}, DataType::bf16));
      graph.add_host_loop(loop, centered, quantized.q, quantized.params);
      add_weights_matmul(step, graph, op, centered, RowScales::after, row_scales, dst);
      return;
    }
    const BufferId terms = column_terms(graph, op, shape);
    if (op.rows > 1) {
      // oneDNN takes per-row src scales but not per-row zero points (its reference kernel): the
      // product of the raw q, then each row's zero point times the column terms taken off.
      add_weights_matmul(step, graph, op, quantized.q, RowScales::src, row_scales, dst);
      HostLoop loop;
      loop.kind = HostLoop::Kind::ZeroPointTerms;
      loop.outer = static_cast<size_t>(op.rows);
      loop.extent = static_cast<size_t>(op.n);
      graph.add_host_loop(loop, dst, kNoBuffer, quantized.params, {terms});
      return;
    }
    HostLoop loop;
    loop.kind = HostLoop::Kind::Int4VectorMatrix;
    loop.int4_bf16_scales = op.bf16_scales;
    loop.outer = 1;
    loop.int4 = shape;
    loop.int4_bias = step.has_input(3);
    std::vector<BufferId> more{graph.input(op.weights, graph.plain(op.weights)), graph.plain_input(op.scales), terms};
    if (loop.int4_bias) {
      more.push_back(graph.input_view(step.inputs[3], plain_desc({op.n}), plain_desc({op.n})));
    }
    graph.add_host_loop(loop, dst, quantized.q, quantized.params, more);
    return;
  }

  const DataType type = op.quantize_rows ? DataType::f32 : compute_type(step, graph, op.src);
  BufferId rows = graph.alias(graph.plain_input(op.src, type), plain_desc({op.rows, op.k}, type));
  if (op.quantize_rows) { // quantized and dequantized in f32, as the program's ops do
    const QuantizedRows quantized = add_row_quantization(graph, op, rows, false);
    HostLoop loop;
    loop.kind = HostLoop::Kind::DequantizeRowsAffine;
    loop.outer = static_cast<size_t>(op.rows);
    loop.extent = static_cast<size_t>(op.k);
    rows = graph.scratch(plain_desc({op.rows, op.k}));
    graph.add_host_loop(loop, rows, quantized.q, quantized.params);
  }
  const DataType weight_type = graph.data_type(op.weights);
  const bool int4_row = weight_type == DataType::s4 && zero_points_fit_int4(graph, op);
  const bool int8_row = weight_type == DataType::s8 && op.zero_points == kNoValue;
  if (op.rows == 1 && (int4_row || int8_row)) {
    // One row: a host kernel, in f32 (a bf16 row converted exactly, the result rounded to bf16 after);
    // a bf16 row of "fast" int4 products in two int8 slices on the int8 unit, its result in bf16 where
    // the program's is (Int4VectorMatrix.h).
    const bool sliced = int4_row && type == DataType::bf16 && graph.settings().int4_products == Int4Products::fast &&
                        int4_bf16_rows_sliced(shape);
    const BufferId row = type == DataType::f32 ? rows : graph.plain_input(op.src, sliced ? type : DataType::f32);
    HostLoop loop;
    loop.kind = int4_row ? HostLoop::Kind::Int4FloatVectorMatrix : HostLoop::Kind::Int8FloatVectorMatrix;
    loop.int4_bf16_row = sliced;
    loop.int4_bf16_result = sliced && graph.compute_type(output) == DataType::bf16;
    loop.int4_bf16_scales = op.bf16_scales; // only S4 weights have them
    loop.int4 = shape;
    loop.int4_bias = step.has_input(3);
    loop.int4_zero_points = op.zero_points != kNoValue;
    std::vector<BufferId> more{graph.input(op.weights, graph.plain(op.weights)), graph.plain_input(op.scales)};
    if (loop.int4_bias) {
      more.push_back(graph.input_view(step.inputs[3], plain_desc({op.n}), plain_desc({op.n})));
    }
    if (loop.int4_zero_points) {
      more.push_back(graph.plain_input(op.zero_points));
    }
    const DataType result_type = loop.int4_bf16_result ? DataType::bf16 : DataType::f32;
    graph.add_host_loop(loop, graph.define(output, plain_desc(out_dims, result_type)), row, kNoBuffer, more);
    return;
  }
  const DataType result_type = type == DataType::bf16 ? graph.compute_type(output) : DataType::f32;
  const BufferId result = graph.define(output, plain_desc(out_dims, result_type));
  add_weights_matmul(
      step, graph, op, rows, RowScales::none, kNoBuffer, graph.alias(result, plain_desc({op.rows, op.n}, result_type)));
}

void set_int4_products(Int4Products products) noexcept {
  int4_products_setting.store(static_cast<int>(products));
}

Int4Products int4_products() noexcept {
  return static_cast<Int4Products>(int4_products_setting.load());
}

} // namespace executorch::backends::onednn
