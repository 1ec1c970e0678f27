// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// ARG_REDUCTION, GATHER, HOST_ELEMENTWISE, INDEX_PUT: the steps that read or write S64 and BOOL values. They
// run on the host (IndexKernels.h) over plain bytes; floating-point data is taken in f32 (bf16 is
// converted around them, exactly: these steps compare, pick and copy values).
#include "Algorithms.h"
#include "InitError.h"
#include "StepBuilders.h"

namespace executorch::backends::onednn {
namespace {

DType dtype_of(GraphBuilder& graph, uint32_t id) {
  return static_cast<DType>(graph.value(id).dtype);
}

// What a HOST_ELEMENTWISE alg takes and writes (FORMAT.md): dtypes are checked by this, per code.
enum class HostOperands : uint8_t {
  Divide,   // two operands of one kind (F32/BF16 or S64), dst of that kind
  Compare,  // two operands of one kind (F32/BF16 or S64), dst BOOL
  Where,    // a BOOL condition, then two operands of one kind, dst of that kind
  Logical,  // two BOOL operands, dst BOOL
  Extremum, // two F32/BF16 operands, dst of that kind
};

constexpr CodeRow<HostElementwiseAlg, HostOperands> kHostElementwiseOperands[] = {
    {HostElementwiseAlg::FloorDivide, HostOperands::Divide},
    {HostElementwiseAlg::TruncDivide, HostOperands::Divide},
    {HostElementwiseAlg::Eq, HostOperands::Compare},
    {HostElementwiseAlg::Ne, HostOperands::Compare},
    {HostElementwiseAlg::Lt, HostOperands::Compare},
    {HostElementwiseAlg::Le, HostOperands::Compare},
    {HostElementwiseAlg::Gt, HostOperands::Compare},
    {HostElementwiseAlg::Ge, HostOperands::Compare},
    {HostElementwiseAlg::Where, HostOperands::Where},
    {HostElementwiseAlg::LogicalAnd, HostOperands::Logical},
    {HostElementwiseAlg::LogicalOr, HostOperands::Logical},
    {HostElementwiseAlg::LogicalXor, HostOperands::Logical},
    {HostElementwiseAlg::Maximum, HostOperands::Extremum},
    {HostElementwiseAlg::Minimum, HostOperands::Extremum},
};
static_assert(covers_codes(kHostElementwiseOperands, 0, kNumHostElementwiseAlgs), "one row per HostElementwiseAlg");

bool is_float(DType dtype) {
  return dtype == DType::F32 || dtype == DType::BF16;
}

void require_dtype(GraphBuilder& graph, uint32_t id, bool ok, const char* role, const char* expected) {
  ODNN_CHECK(ok, "%s (value %u) has dtype %s, expected %s", role, id, dtype_name(graph.value(id).dtype), expected);
}

// [outer, extent, inner] around dim `axis` of `dims`.
void split_at(const memory::dims& dims, size_t axis, size_t& outer, size_t& extent, size_t& inner) {
  outer = 1;
  inner = 1;
  for (size_t d = 0; d < axis; ++d) {
    outer *= static_cast<size_t>(dims[d]);
  }
  for (size_t d = axis + 1; d < dims.size(); ++d) {
    inner *= static_cast<size_t>(dims[d]);
  }
  extent = static_cast<size_t>(dims[axis]);
}

// element_count (Payload.h: refuses absurd sizes) as a size_t.
size_t count_of(const memory::dims& dims) {
  return static_cast<size_t>(element_count(dims));
}

// A float value in plain f32, or an S64/BOOL value as it is (always plain).
BufferId host_operand(GraphBuilder& graph, uint32_t id) {
  return is_float(dtype_of(graph, id)) ? graph.plain_input(id, DataType::f32) : graph.plain_input(id);
}

BufferId host_result(GraphBuilder& graph, uint32_t id) {
  const DataType type = is_float(dtype_of(graph, id)) ? DataType::f32 : graph.data_type(id);
  return graph.define(id, plain_desc(graph.dims(id), type));
}

} // namespace

void build_arg_reduction(const StepRecord& step, GraphBuilder& graph) {
  const uint32_t src = step.inputs[0];
  const uint32_t dst = step.outputs[0];
  require_dtype(graph, src, is_float(dtype_of(graph, src)), "src", "F32 or BF16");
  require_dtype(graph, dst, dtype_of(graph, dst) == DType::S64, "dst", "S64");
  const auto alg = static_cast<ArgReductionAlg>(step.int_scalar("alg"));
  ODNN_CHECK(
      alg == ArgReductionAlg::Max || alg == ArgReductionAlg::Min,
      "arg reduction alg %lld must be MAX (0) or MIN (1)",
      static_cast<long long>(alg));
  const memory::dims src_dims = graph.dims(src);
  const std::vector<int64_t> axis = step.ints("axis");
  ODNN_CHECK(axis.size() <= 1, "axis must hold one dim, or none for all of them");
  HostLoop loop;
  loop.kind = HostLoop::Kind::ArgReduce;
  loop.arg_reduce.min = alg == ArgReductionAlg::Min;
  if (axis.empty()) {
    loop.arg_reduce = {1, count_of(src_dims), 1, loop.arg_reduce.min};
  } else {
    const size_t dim = static_cast<size_t>(normalize_axis(axis[0], src_dims.size()));
    split_at(src_dims, dim, loop.arg_reduce.outer, loop.arg_reduce.extent, loop.arg_reduce.inner);
  }
  ODNN_CHECK(loop.arg_reduce.extent > 0, "src %s is empty", dims_string(src_dims).c_str());
  const memory::dims dst_dims = graph.dims(dst);
  ODNN_CHECK(
      count_of(dst_dims) == loop.arg_reduce.outer * loop.arg_reduce.inner,
      "dst %s must hold one index per reduced row of src %s",
      dims_string(dst_dims).c_str(),
      dims_string(src_dims).c_str());
  const BufferId source = host_operand(graph, src);
  graph.add_host_loop(loop, host_result(graph, dst), source);
}

namespace {

// A quantized embedding: S4 or S8 rows [V, D] with f32 scales (and zero points) [V, D / group_size],
// dequantized into f32 as they are gathered.
void build_compressed_gather(const StepRecord& step, GraphBuilder& graph) {
  const uint32_t data = step.inputs[0];
  const uint32_t indices = step.inputs[1];
  const uint32_t dst = step.outputs[0];
  const DType type = dtype_of(graph, data);
  const memory::dims data_dims = graph.dims(data);
  ODNN_CHECK(
      graph.is_constant(data) && data_dims.size() == 2 && step.int_scalar("axis") == 0,
      "compressed rows must be a constant [V, D] gathered along dim 0");
  require_dtype(graph, indices, dtype_of(graph, indices) == DType::S64, "indices", "S64");
  require_dtype(graph, dst, is_float(dtype_of(graph, dst)), "dst", "F32 or BF16");
  HostLoop loop;
  loop.kind = HostLoop::Kind::Gather;
  loop.gather.outer = 1;
  loop.gather.extent = static_cast<size_t>(data_dims[0]);
  loop.gather.count = count_of(graph.dims(indices));
  loop.gather.bits = type == DType::S4 ? 4 : 8;
  loop.gather.row_values = static_cast<size_t>(data_dims[1]);
  loop.gather.row_bytes = plain_desc({1, data_dims[1]}, graph.data_type(data)).get_size();
  const int64_t group = step.has("group_size") ? step.int_scalar("group_size") : 0;
  ODNN_CHECK(
      group > 0 && data_dims[1] % group == 0,
      "group_size %lld must divide D = %lld",
      (long long)group,
      (long long)data_dims[1]);
  loop.gather.group = static_cast<size_t>(group);
  const memory::dims group_dims{data_dims[0], data_dims[1] / group};
  std::vector<BufferId> more;
  for (size_t slot = 2; slot < 4; ++slot) {
    if (step.has_input(slot)) {
      const uint32_t id = step.inputs[slot];
      ODNN_CHECK(
          graph.is_constant(id) && graph.data_type(id) == DataType::f32 && graph.dims(id) == group_dims,
          "scales and zero points must be F32 constants %s",
          dims_string(group_dims).c_str());
      more.push_back(graph.plain_input(id));
    }
  }
  ODNN_CHECK(step.has_input(2), "compressed rows need their scales");
  memory::dims dst_dims = graph.dims(indices);
  dst_dims.push_back(data_dims[1]);
  ODNN_CHECK(
      count_of(graph.dims(dst)) == count_of(dst_dims),
      "dst %s must hold a row of %lld values per index",
      dims_string(graph.dims(dst)).c_str(),
      (long long)data_dims[1]);
  const BufferId target = graph.define(dst, plain_desc(graph.dims(dst), DataType::f32));
  graph.add_host_loop(loop, target, graph.buffer(data), graph.plain_input(indices), more);
}

} // namespace

void build_gather(const StepRecord& step, GraphBuilder& graph) {
  const uint32_t data = step.inputs[0];
  const uint32_t indices = step.inputs[1];
  const uint32_t dst = step.outputs[0];
  if (dtype_of(graph, data) == DType::S4 || dtype_of(graph, data) == DType::S8) {
    build_compressed_gather(step, graph);
    return;
  }
  ODNN_CHECK(!step.has_input(2), "scales given for rows of %s", dtype_name(graph.value(data).dtype));
  require_dtype(graph, data, is_float(dtype_of(graph, data)), "data", "F32 or BF16");
  require_dtype(graph, indices, dtype_of(graph, indices) == DType::S64, "indices", "S64");
  require_dtype(graph, dst, is_float(dtype_of(graph, dst)), "dst", "F32 or BF16");
  const memory::dims data_dims = graph.dims(data);
  const size_t axis = static_cast<size_t>(normalize_axis(step.int_scalar("axis"), data_dims.size()));
  HostLoop loop;
  loop.kind = HostLoop::Kind::Gather;
  size_t inner = 1;
  split_at(data_dims, axis, loop.gather.outer, loop.gather.extent, inner);
  loop.gather.count = count_of(graph.dims(indices));
  loop.gather.row_bytes = inner * memory::data_type_size(graph.data_type(data));
  const memory::dims dst_dims = graph.dims(dst);
  ODNN_CHECK(
      count_of(dst_dims) == loop.gather.outer * loop.gather.count * inner,
      "dst %s must hold the rows of data %s picked by %zu indices",
      dims_string(dst_dims).c_str(),
      dims_string(data_dims).c_str(),
      loop.gather.count);
  const BufferId source = graph.plain_input(data);
  const BufferId index = graph.plain_input(indices);
  // Rows are copied in the data's type; a dst of the other float type is converted after the step
  // (a bf16 activation gathered into an fp32 delegate output).
  const BufferId target = graph.define(dst, plain_desc(dst_dims, graph.data_type(data)));
  graph.add_host_loop(loop, target, source, index);
}

void build_host_elementwise(const StepRecord& step, GraphBuilder& graph) {
  const int64_t code = step.int_scalar("alg");
  const HostOperands operand_kind = lookup_code(kHostElementwiseOperands, code, "host elementwise alg");
  const auto alg = static_cast<HostElementwiseAlg>(code);
  const bool where = operand_kind == HostOperands::Where;
  const bool divide = operand_kind == HostOperands::Divide;
  const bool logical = operand_kind == HostOperands::Logical;
  const bool extremum = operand_kind == HostOperands::Extremum;
  const size_t operands = where ? 3 : 2;
  ODNN_CHECK(step.inputs.size() == operands && step.has_input(operands - 1), "expects %zu operands", operands);
  const uint32_t dst = step.outputs[0];
  // The values whose dtype must agree: every operand but WHERE's condition, and dst unless compared.
  const uint32_t first = step.inputs[where ? 1 : 0];
  const DType type = dtype_of(graph, first);
  if (logical) {
    require_dtype(graph, first, type == DType::Bool, "operand", "BOOL");
  } else if (extremum) {
    require_dtype(graph, first, is_float(type), "operand", "F32 or BF16");
  } else {
    require_dtype(graph, first, is_float(type) || type == DType::S64, "operand", "F32, BF16 or S64");
  }
  const auto same_kind = [&](uint32_t id) {
    return is_float(type) ? is_float(dtype_of(graph, id)) : dtype_of(graph, id) == type;
  };
  for (size_t k = where ? 1 : 0; k < operands; ++k) {
    require_dtype(graph, step.inputs[k], same_kind(step.inputs[k]), "operand", "the other operand's kind");
  }
  if (where) {
    require_dtype(graph, step.inputs[0], dtype_of(graph, step.inputs[0]) == DType::Bool, "condition", "BOOL");
  }
  if (divide || where || logical || extremum) {
    require_dtype(graph, dst, same_kind(dst), "dst", "the operands' kind");
  } else {
    require_dtype(graph, dst, dtype_of(graph, dst) == DType::Bool, "dst", "BOOL");
  }
  HostLoop loop;
  loop.kind = HostLoop::Kind::Elementwise;
  loop.elementwise.alg = alg;
  loop.elementwise.integer = type == DType::S64;
  const memory::dims dst_dims = graph.dims(dst);
  ODNN_CHECK(dst_dims.size() <= kMaxRank, "dst %s has too many dims", dims_string(dst_dims).c_str());
  loop.elementwise.rank = dst_dims.size();
  for (size_t d = 0; d < dst_dims.size(); ++d) {
    loop.elementwise.dims[d] = static_cast<size_t>(dst_dims[d]);
  }
  BufferId buffers[3] = {kNoBuffer, kNoBuffer, kNoBuffer};
  for (size_t k = 0; k < operands; ++k) {
    const uint32_t id = step.inputs[k];
    const memory::dims dims = left_pad(graph.dims(id), dst_dims.size());
    ODNN_CHECK(
        broadcasts_to(dims, dst_dims),
        "operand %zu %s does not broadcast to dst %s",
        k,
        dims_string(graph.dims(id)).c_str(),
        dims_string(dst_dims).c_str());
    const memory::dims strides = row_major_strides(dims);
    for (size_t d = 0; d < dims.size(); ++d) {
      loop.elementwise.strides[k][d] = dims[d] == 1 ? 0 : static_cast<size_t>(strides[d]);
    }
    buffers[k] = host_operand(graph, id);
  }
  const std::vector<BufferId> more_sources = where ? std::vector<BufferId>{buffers[2]} : std::vector<BufferId>{};
  graph.add_host_loop(loop, host_result(graph, dst), buffers[0], buffers[1], more_sources);
}

void build_index_put(const StepRecord& step, GraphBuilder& graph) {
  const uint32_t x = step.inputs[0];
  const uint32_t values = step.inputs[1];
  const uint32_t dst = step.outputs[0];
  require_dtype(graph, x, is_float(dtype_of(graph, x)), "x", "F32 or BF16");
  require_dtype(graph, values, is_float(dtype_of(graph, values)), "values", "F32 or BF16");
  require_dtype(graph, dst, is_float(dtype_of(graph, dst)), "dst", "F32 or BF16");
  const memory::dims x_dims = graph.dims(x);
  require_same_dims(graph.dims(dst), x_dims, "dst and x");
  // x[:, ..., :, i0, i1, ...] = values: `sliced` whole leading dims, then the indexed ones.
  const int64_t sliced = step.has("sliced") ? step.int_scalar("sliced") : 0;
  const size_t indexed = step.inputs.size() - 2;
  ODNN_CHECK(
      sliced >= 0 && static_cast<size_t>(sliced) + indexed <= x_dims.size(),
      "%lld sliced dims and %zu index tensors for x %s",
      static_cast<long long>(sliced),
      indexed,
      dims_string(x_dims).c_str());
  const auto first = static_cast<size_t>(sliced);
  const memory::dims index_dims = graph.dims(step.inputs[2]);
  std::vector<BufferId> index_buffers;
  HostLoop loop;
  loop.kind = HostLoop::Kind::IndexPut;
  IndexPutLoop& put = loop.index_put;
  const memory::dims x_strides = row_major_strides(x_dims);
  for (size_t k = 0; k < indexed; ++k) {
    const uint32_t id = step.inputs[2 + k];
    require_dtype(graph, id, dtype_of(graph, id) == DType::S64, "indices", "S64");
    require_same_dims(graph.dims(id), index_dims, "index tensors");
    put.sizes[k] = static_cast<size_t>(x_dims[first + k]);
    put.strides[k] = static_cast<size_t>(x_strides[first + k]);
    index_buffers.push_back(graph.plain_input(id));
  }
  put.indexed = indexed;
  put.count = count_of(index_dims);
  put.total = count_of(x_dims);
  put.block = count_of(memory::dims(x_dims.begin() + sliced, x_dims.end()));
  put.inner = count_of(memory::dims(x_dims.begin() + sliced + static_cast<long>(indexed), x_dims.end()));
  put.accumulate = step.int_scalar("accumulate") != 0;
  // The values broadcast over [sliced dims..., index dims..., x's remaining dims].
  memory::dims target(x_dims.begin(), x_dims.begin() + sliced);
  target.insert(target.end(), index_dims.begin(), index_dims.end());
  target.insert(target.end(), x_dims.begin() + sliced + static_cast<long>(indexed), x_dims.end());
  const memory::dims value_dims = left_pad(graph.dims(values), target.size());
  ODNN_CHECK(
      target.size() <= kMaxRank && broadcasts_to(value_dims, target),
      "values %s do not broadcast to the indexed points %s",
      dims_string(graph.dims(values)).c_str(),
      dims_string(target).c_str());
  put.values.rank = target.size();
  const memory::dims value_strides = row_major_strides(value_dims);
  for (size_t d = 0; d < target.size(); ++d) {
    put.values.dims[d] = static_cast<size_t>(target[d]);
    put.values.strides[0][d] = value_dims[d] == 1 ? 0 : static_cast<size_t>(value_strides[d]);
  }
  const BufferId source = host_operand(graph, x);
  const BufferId updates = host_operand(graph, values);
  graph.add_host_loop(loop, host_result(graph, dst), source, updates, index_buffers);
}

} // namespace executorch::backends::onednn
