// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// REORDER, RESHAPE, CONCAT, PAD: steps that move bytes. A permutation of strided memory and a
// reshape its strides allow are metadata only (a view); other permutations and pads are single
// reorders through a strided or sub-memory view. Each writes its
// output's type, so a REORDER between values of different types is a cast.
#include <algorithm>

#include "InitError.h"
#include "StepBuilders.h"

namespace executorch::backends::onednn {

namespace {

// Where a block of row-major `src_dims` starts, in elements, when its bytes are contiguous there (the
// dims before the first one it cuts are 1 in the block, those after it whole: `x[i]`, `x[:, 2:5]` of
// [1, N, ...]); -1 otherwise.
int64_t contiguous_block_start(const memory::dims& src_dims, const memory::dims& dst_dims, const memory::dims& start) {
  size_t cut = 0;
  while (cut < dst_dims.size() && dst_dims[cut] == 1) {
    ++cut;
  }
  for (size_t d = cut + 1; d < dst_dims.size(); ++d) {
    if (dst_dims[d] != src_dims[d]) {
      return -1;
    }
  }
  const memory::dims strides = row_major_strides(src_dims);
  int64_t element = 0;
  for (size_t d = 0; d < start.size(); ++d) {
    element += start[d] * strides[d];
  }
  return element;
}

} // namespace

// dst dim i = src dim permutation[i]: the src bytes are read through permuted strides so one
// reorder writes the permuted plain dst. With offsets, dst is the block of src starting there: a
// view when its bytes are contiguous in src, else a copy through a sub-memory view. Otherwise it is
// a copy into plain layout.
void build_reorder(const StepRecord& step, GraphBuilder& graph) {
  const uint32_t src = step.inputs[0];
  // An int8 value held in f32 (never permuted or sliced: GraphBuilder.cpp) already holds the numbers it
  // dequantizes to; quantizing into one rounds to its grid, in f32.
  if (graph.holds_dequantized_int8(src) || graph.holds_dequantized_int8(step.outputs[0])) {
    require_same_dims(graph.dims(src), graph.dims(step.outputs[0]), "a reorder of an int8 value held in f32");
  }
  if (graph.holds_dequantized_int8(src)) {
    graph.define_view(step.outputs[0], src, graph.stored(src));
    return;
  }
  if (graph.holds_dequantized_int8(step.outputs[0])) {
    HostLoop loop;
    loop.kind = HostLoop::Kind::Int8Grid;
    loop.int8_grid = dst_int8_grid(step, graph.program_type(step.outputs[0]));
    const memory::desc layout = graph.desc(src);
    graph.add_host_loop(loop, graph.define(step.outputs[0], layout), graph.input(src, layout));
    return;
  }
  const memory::dims src_dims = graph.dims(src);
  const memory::dims dst_dims = graph.dims(step.outputs[0]);
  BufferId source;
  if (step.has("permutation")) {
    const size_t rank = graph.value(src).dims.size();
    const std::vector<int64_t> permutation = step.ints("permutation", rank);
    std::vector<bool> seen(rank, false);
    for (int64_t axis : permutation) {
      ODNN_CHECK(
          axis >= 0 && static_cast<size_t>(axis) < rank && !seen[axis],
          "attribute 'permutation' is not a permutation of %zu dims",
          rank);
      seen[axis] = true;
    }
    const memory::desc view = rank == 0 ? graph.plain(src) : permuted_view(src_dims, permutation, graph.data_type(src));
    ODNN_CHECK(
        view.get_dims() == dst_dims,
        "dst %s is not src %s permuted",
        dims_string(dst_dims).c_str(),
        dims_string(src_dims).c_str());
    const memory::desc stored = graph.stored(src);
    const uint32_t dst = step.outputs[0];
    if (rank == 0) {
      source = graph.buffer(src);
    } else if (is_strided(stored) && graph.data_type(src) == graph.data_type(dst)) {
      graph.define_view(dst, src, permuted(stored, permutation));
      return;
    } else {
      // Blocked (or cast): one reorder from the stored layout into dst's plain bytes, described in
      // src's dim order (dst dim i is src dim permutation[i]).
      const memory::dims dst_strides = row_major_strides(dst_dims);
      memory::dims strides(rank);
      for (size_t i = 0; i < rank; ++i) {
        strides[permutation[i]] = dst_strides[i];
      }
      const BufferId target = graph.define(dst, graph.plain(dst));
      graph.add_reorder(graph.buffer(src), graph.alias(target, memory::desc(src_dims, graph.data_type(dst), strides)));
      return;
    }
  } else if (step.has("offsets")) {
    const size_t rank = graph.value(src).dims.size();
    const std::vector<int64_t> offsets = step.ints("offsets", rank);
    bool inside = dst_dims.size() == rank;
    for (size_t d = 0; inside && d < rank; ++d) {
      inside = offsets[d] >= 0 && offsets[d] + dst_dims[d] <= src_dims[d];
    }
    ODNN_CHECK(
        inside,
        "dst %s at 'offsets' does not lie inside src %s",
        dims_string(dst_dims).c_str(),
        dims_string(src_dims).c_str());
    const memory::dims start(offsets.begin(), offsets.end());
    const int64_t block = contiguous_block_start(src_dims, dst_dims, start);
    const uint32_t dst = step.outputs[0];
    if (block >= 0 && !graph.is_constant(src) && graph.data_type(src) == graph.data_type(dst) &&
        read_quantization(step, graph).empty()) {
      const size_t bytes = static_cast<size_t>(block) * memory::data_type_size(graph.data_type(dst));
      graph.define_as(dst, graph.alias(graph.plain_input(src), graph.plain(dst), bytes));
      return;
    }
    source = graph.alias(graph.plain_input(src), graph.plain(src).submemory_desc(dst_dims, start));
  } else {
    ODNN_CHECK(
        src_dims == dst_dims,
        "a reorder without permutation or offsets keeps dims: src %s, dst %s",
        dims_string(src_dims).c_str(),
        dims_string(dst_dims).c_str());
    source = graph.buffer(src);
  }
  // Quantize (f32 -> u8/s8 with dst scale and zero point) or dequantize (the reverse, src ones).
  const Quantization quantization = read_quantization(step, graph);
  if (quantization.empty()) {
    const uint32_t dst = step.outputs[0];
    const BufferId result = graph.define(dst, graph.plain(dst));
    // Where bf16 is widened (no bf16 instructions) a bf16 value is held in f32: a cast to it from
    // another type still rounds to bf16, through a bf16 copy, as the program asks.
    if (graph.program_type(dst) == DataType::bf16 && graph.data_type(dst) == DataType::f32 &&
        graph.program_type(src) != DataType::bf16) {
      const BufferId rounded = graph.scratch(plain_desc(dst_dims, DataType::bf16));
      graph.add_reorder(source, rounded);
      graph.add_reorder(rounded, result);
      return;
    }
    graph.add_reorder(source, result);
    return;
  }
  // oneDNN 3.2's jit reorder dropped the src zero point when it also changed the layout (u8 NHWC ->
  // f32 NCHW, 1x64x7x7). So the quantization reorder never changes the layout: from strided memory
  // (a convolution's NHWC result) it writes the same strides in the new type, which the next
  // convolution or binary reads as is; from blocked memory it reads a plain copy.
  memory::desc target = graph.plain(step.outputs[0]);
  const bool copy = !step.has("permutation") && !step.has("offsets");
  if (copy && graph.buffer_desc(source) != graph.plain(src)) {
    const memory::desc stored = graph.buffer_desc(source);
    if (is_strided(stored)) {
      target = memory::desc(dst_dims, graph.data_type(step.outputs[0]), stored.get_strides());
    } else {
      source = graph.plain_input(src);
    }
  }
  add_quantizing_reorder(graph, source, graph.define(step.outputs[0], target), quantization);
}

// The output describes the input's bytes with new dims: free when the input's strides allow it
// (plain, or a view whose merged dims are contiguous), else the input is first reordered into plain
// scratch. A reshaped graph output is copied by the generic graph-output rule.
void build_reshape(const StepRecord& step, GraphBuilder& graph) {
  const uint32_t src = step.inputs[0];
  const uint32_t dst = step.outputs[0];
  ODNN_CHECK(
      element_count(graph.value(src).dims) == element_count(graph.value(dst).dims),
      "src %s and dst %s have different element counts",
      dims_string(graph.dims(src)).c_str(),
      dims_string(graph.dims(dst)).c_str());
  const memory::desc stored = graph.stored(src);
  if (is_strided(stored) && graph.data_type(src) == graph.data_type(dst)) {
    const memory::desc view = reshaped(stored, graph.dims(dst));
    if (!view.is_zero()) {
      graph.define_view(dst, src, view);
      return;
    }
  }
  graph.define_as(dst, graph.alias(graph.plain_input(src, graph.data_type(dst)), graph.plain(dst)));
}

// Pieces of at most this many bytes go side by side on the host: oneDNN's concat moves them an
// element at a time (a Llama prompt's rotary pairs, 1x128x32x32x1 twice into x2: 0.77 ms). The
// 128-token 8da4w prompt of BENCHMARKS.md's 1.1B checkpoint took 273 ms without this, 259 with it.
constexpr size_t kInterleaveMaxPieceBytes = 64;

// Whether plain inputs of equal dims, concatenated along `axis`, make pieces that small.
bool interleaves(const StepRecord& step, GraphBuilder& graph, int axis) {
  const memory::dims& first = graph.dims(step.inputs[0]);
  size_t piece = memory::data_type_size(graph.data_type(step.outputs[0]));
  for (size_t d = static_cast<size_t>(axis); d < first.size(); ++d) {
    piece *= static_cast<size_t>(first[d]);
  }
  return step.inputs.size() >= 2 && piece > 0 && piece <= kInterleaveMaxPieceBytes &&
         std::all_of(
             step.inputs.begin(), step.inputs.end(), [&](uint32_t value) { return graph.dims(value) == first; });
}

void add_interleave(const StepRecord& step, GraphBuilder& graph, int axis) {
  const DataType type = graph.data_type(step.outputs[0]);
  const memory::dims& dims = graph.dims(step.inputs[0]);
  HostLoop loop;
  loop.kind = HostLoop::Kind::Interleave;
  loop.outer = 1;
  loop.inner = memory::data_type_size(type);
  for (size_t d = 0; d < dims.size(); ++d) {
    (d < static_cast<size_t>(axis) ? loop.outer : loop.inner) *= static_cast<size_t>(dims[d]);
  }
  loop.extent = step.inputs.size();
  std::vector<BufferId> pieces;
  for (uint32_t value : step.inputs) {
    pieces.push_back(graph.plain_input(value, type));
  }
  const BufferId dst = graph.define(step.outputs[0], plain_desc(graph.dims(step.outputs[0]), type));
  graph.add_host_loop(loop, dst, pieces[0], pieces[1], std::vector<BufferId>(pieces.begin() + 2, pieces.end()));
}

// All-plain or mixed inputs concatenate in plain layout; inputs that all carry blocked layouts are
// passed as they are and oneDNN picks dst's layout.
void build_concat(const StepRecord& step, GraphBuilder& graph) {
  const memory::dims dst = graph.dims(step.outputs[0]);
  const DataType type = graph.data_type(step.outputs[0]);
  const int axis = normalize_axis(step.int_scalar("axis"), dst.size());
  int64_t axis_total = 0;
  bool none_plain = true;
  for (uint32_t value : step.inputs) {
    memory::dims dims = graph.dims(value);
    ODNN_CHECK(dims.size() == dst.size(), "input value %u has rank %zu, dst has %zu", value, dims.size(), dst.size());
    axis_total += dims[axis];
    dims[axis] = dst[axis];
    ODNN_CHECK(
        dims == dst,
        "input value %u with dims %s does not fit dst %s along axis %d",
        value,
        dims_string(graph.dims(value)).c_str(),
        dims_string(dst).c_str(),
        axis);
    const bool blocked_as_is = !graph.is_plain(value) && graph.data_type(value) == type;
    none_plain = none_plain && blocked_as_is;
  }
  ODNN_CHECK(
      axis_total == dst[axis],
      "inputs add up to %lld along axis %d, dst has %lld",
      static_cast<long long>(axis_total),
      axis,
      static_cast<long long>(dst[axis]));
  const bool keep_layouts = none_plain;
  const bool all_plain_as_is = std::all_of(step.inputs.begin(), step.inputs.end(), [&](uint32_t value) {
    return !graph.is_view(value) && graph.desc(value) == plain_desc(graph.dims(value), type);
  });
  if (!keep_layouts && !all_plain_as_is) {
    // Each input reordered straight into its slice of dst: its conversion (type, layout, strides of a
    // view) and the copy in one pass, instead of a converted copy that a concat copies again (a
    // bf16 decode step's KV cache: f32 in, bf16 out).
    const memory::desc dst_desc = plain_desc(dst, type);
    const BufferId target = graph.define(step.outputs[0], dst_desc);
    memory::dims offsets(dst.size(), 0);
    for (uint32_t value : step.inputs) {
      const memory::dims dims = graph.dims(value);
      if (dims[axis] > 0) {
        graph.add_reorder(graph.buffer(value), graph.alias(target, dst_desc.submemory_desc(dims, offsets)));
      }
      offsets[axis] += dims[axis];
    }
    return;
  }
  if (!keep_layouts && interleaves(step, graph, axis)) {
    add_interleave(step, graph, axis);
    return;
  }
  std::vector<memory::desc> descs;
  for (uint32_t value : step.inputs) {
    descs.push_back(keep_layouts ? graph.desc(value) : plain_desc(graph.dims(value), type));
  }
  using Pd = dnnl::concat::primitive_desc;
  const Pd pd = keep_layouts ? Pd(graph.engine(), axis, descs, GraphBuilder::default_attr())
                             : Pd(graph.engine(), plain_desc(dst, type), axis, descs, GraphBuilder::default_attr());
  ArgList args;
  for (size_t i = 0; i < step.inputs.size(); ++i) {
    args.emplace_back(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), graph.input(step.inputs[i], descs[i]));
  }
  args.emplace_back(DNNL_ARG_DST, graph.define(step.outputs[0], pd.dst_desc()));
  graph.add_primitive(dnnl::concat(pd), pd, args);
}

// dst is filled with `value` in execute() (dst may share arena bytes), then src is reordered into
// the sub-memory of dst at offsets pad_front.
void build_pad(const StepRecord& step, GraphBuilder& graph) {
  const uint32_t src = step.inputs[0];
  const size_t rank = graph.value(src).dims.size();
  ODNN_CHECK(rank >= 1, "src must have rank >= 1");
  const memory::dims src_dims = graph.dims(src);
  const memory::dims dst_dims = graph.dims(step.outputs[0]);
  const memory::dims front = spatial_attr(step, "pad_front", rank, 0);
  const memory::dims back = spatial_attr(step, "pad_back", rank, 0);
  bool dims_ok = dst_dims.size() == rank;
  for (size_t d = 0; dims_ok && d < rank; ++d) {
    dims_ok = dst_dims[d] == src_dims[d] + front[d] + back[d];
  }
  ODNN_CHECK(
      dims_ok,
      "dst %s is not src %s padded by pad_front/pad_back",
      dims_string(dst_dims).c_str(),
      dims_string(src_dims).c_str());
  const memory::desc dst_desc = graph.plain(step.outputs[0]);
  const BufferId source = graph.buffer(src);
  const BufferId target = graph.define(step.outputs[0], dst_desc);
  graph.add_fill(target, static_cast<float>(step.float_scalar("value")));
  graph.add_reorder(source, graph.alias(target, dst_desc.submemory_desc(src_dims, front)));
}

// Dynamic int8: src (f32, or converted to it) quantized per row of its last dim on the host, into an
// s8 value of the same dims and the row scales (f32, last dim 1) that a following int8 MATMUL
// multiplies back in as a binary post-op.
void build_quantize_rows(const StepRecord& step, GraphBuilder& graph) {
  const uint32_t src = step.inputs[0];
  const uint32_t quantized = step.outputs[0];
  const uint32_t scales = step.outputs[1];
  const memory::dims dims = graph.dims(src);
  ODNN_CHECK(!dims.empty(), "src must have rank >= 1");
  memory::dims scale_dims = dims;
  scale_dims.back() = 1;
  require_same_dims(dims, graph.dims(quantized), "src and quantized dims");
  require_same_dims(scale_dims, graph.dims(scales), "scales dims (src dims, last one 1)");
  ODNN_CHECK(
      graph.data_type(quantized) == DataType::s8 && graph.data_type(scales) == DataType::f32,
      "outputs must be S8 (quantized) and F32 (scales), got %s and %s",
      dtype_name(graph.value(quantized).dtype),
      dtype_name(graph.value(scales).dtype));
  HostLoop loop;
  loop.kind = HostLoop::Kind::QuantizeRows;
  loop.extent = static_cast<size_t>(dims.back());
  loop.outer = static_cast<size_t>(element_count(dims)) / loop.extent;
  loop.inner = 1;
  const BufferId source = graph.plain_input(src, DataType::f32);
  const BufferId target = graph.define(quantized, plain_desc(dims, DataType::s8));
  graph.add_host_loop(loop, target, source, graph.define(scales, plain_desc(scale_dims)));
}

} // namespace executorch::backends::onednn
