// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// CONVOLUTION, DECONVOLUTION and MATMUL: the primitives whose weights oneDNN lays out itself
// (format_tag::any, reordered once at init) and that take post-ops.
#include <algorithm>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "ConvolutionGuard.h"
#include "CpuIsa.h"
#include "ExactInt8Matmul.h"
#include "InitError.h"
#include "RowKernels.h"
#include "StepBuilders.h"
#include "Winograd.h"

namespace executorch::backends::onednn {
namespace {

using dnnl::prop_kind;

// Convolutions and matmuls compute in bf16 when their activation input or output is bf16, or when
// asked to (precision="bf16" between fp32 delegate inputs and outputs, unless GraphBuilder widens
// bf16): oneDNN accumulates in f32 and writes either type. Weights are converted to the compute type once, at init.
// int8 steps (u8/s8 src) compute in their src's type with s8 weights, where that is exact.
DataType weights_type(DataType compute) {
  return is_int8(compute) ? DataType::s8 : compute;
}

// Without VNNI, oneDNN's int8 kernels add pairs of u8 x s8 products in 16 bits, which saturate (its
// s8 x s8 ones shift the src to u8 first: the same). There an int8 step computes as PyTorch's
// reference decomposition does (dequantize, f32 operator, quantize): its src dequantized, its weights
// dequantized once at init, an f32 kernel with the step's bias and post-ops, and its result quantized
// when its output is int8.
bool emulates_int8(GraphBuilder& graph, uint32_t src) {
  return is_int8(graph.program_type(src)) && !int8_products_exact();
}

// The int8 bytes of `source` dequantized by `quantization`'s src scale and zero point into f32 scratch
// in the layout `wanted` (one reorder converts, scales and changes the layout).
BufferId dequantized(
    GraphBuilder& graph, BufferId source, const memory::desc& wanted, const Quantization& quantization) {
  const BufferId real = graph.scratch(wanted);
  add_quantizing_reorder(graph, source, real, quantization.of(DNNL_ARG_SRC));
  return real;
}

// Where an emulated convolution writes its int8 result: plain where the layout plan wants it, else
// channels-last, the layout oneDNN's int8 kernels take (its plain-layout int8 pooling, "simple_nchw",
// took 7.2 ms for ResNet-18's max pool on AVX2, the channels-last JIT kernel 0.2).
memory::desc int8_result_desc(GraphBuilder& graph, uint32_t output) {
  const memory::dims dims = graph.dims(output);
  if (graph.value(output).layout == Layout::Plain || dims.size() < 3) {
    return graph.plain(output);
  }
  return channels_last_desc(dims, graph.data_type(output));
}

// Emulated int8 weights: the s8 constant `value` read through `view` and multiplied by its weight
// scales along `mask` once at init, in layout `wanted`.
BufferId dequantized_weights(
    GraphBuilder& graph,
    uint32_t value,
    const memory::desc& view,
    const memory::desc& wanted,
    const Quantization& quantization,
    int mask) {
  const Quantization scales = quantization.of(DNNL_ARG_WEIGHTS);
  if (scales.empty()) {
    return graph.input_view(value, view, wanted);
  }
  return graph.scaled_constant(value, view, wanted, scales.args.front().buffer, mask);
}

// Without VNNI an int8 matmul with one constant weight matrix (a linear layer, static or dynamic int8)
// runs on the host in exact 16-bit products (ExactInt8Matmul.h) where the CPU has AVX2, faster than the
// dequantized f32 computation that takes the other int8 steps. `a_dims` and `dst` unfolded; `b_view`
// the weights' logical [K, N] (or [1, K, N]).
bool matmul_runs_exact_int8(
    GraphBuilder& graph,
    const StepRecord& step,
    const memory::dims& a_dims,
    const memory::dims& dst,
    bool one_weight_matrix,
    bool bias_per_column) {
  const uint32_t output = step.outputs[0];
  const bool result_ok = is_int8(graph.data_type(output)) || graph.compute_type(output) == DataType::f32;
  return host_row_isa() != RowIsa::scalar && one_weight_matrix && bias_per_column && result_ok &&
         graph.is_constant(step.inputs[1]) && a_dims.back() <= static_cast<int64_t>(kExactInt8MaxDepth) &&
         std::equal(a_dims.begin(), a_dims.end() - 2, dst.begin());
}

// The f32 product gets the step's post-ops in place, then is quantized when the step's output is int8.
// oneDNN's AVX2 binary runs a row operand [.., M, 1] of a 3-D or 4-D dst in its reference kernel: the
// post-ops of a matmul whose batch folds into its rows (fold_batch_into_rows) see [1, rows, N].
void add_exact_int8_matmul(
    const StepRecord& step,
    GraphBuilder& graph,
    const memory::dims& a_dims,
    const memory::desc& b_view,
    const memory::dims& dst,
    bool fold_rows,
    const Quantization& quantization) {
  const uint32_t a = step.inputs[0], output = step.outputs[0];
  const memory::dims& b_dims = b_view.get_dims();
  const memory::dims b_strides = b_view.get_strides();
  const size_t rank = b_dims.size();
  const int64_t k = b_dims[rank - 2], n = b_dims[rank - 1];
  const memory::desc matrix({k, n}, DataType::s8, {b_strides[rank - 2], b_strides[rank - 1]});
  HostLoop loop;
  loop.kind = HostLoop::Kind::ExactInt8Matmul;
  ExactInt8MatmulShape& shape = loop.exact_int8;
  shape.k = static_cast<size_t>(k);
  shape.n = static_cast<size_t>(n);
  shape.rows = static_cast<size_t>(std::accumulate(dst.begin(), dst.end() - 1, int64_t{1}, std::multiplies<>()));
  shape.src_signed = graph.data_type(a) == DataType::s8;
  shape.src_zero_point = step.has("src_zero_point") ? static_cast<int32_t>(step.int_scalar("src_zero_point")) : 0;
  const float src_scale = step.has("src_scale") ? static_cast<float>(step.floats("src_scale", 1)[0]) : 1.0f;
  std::vector<float> scales(shape.n, src_scale);
  if (step.has("weight_scales")) {
    const std::vector<double> weight_scales = step.floats("weight_scales", shape.n);
    for (size_t c = 0; c < shape.n; ++c) {
      scales[c] *= static_cast<float>(weight_scales[c]);
    }
  }
  std::vector<BufferId> sources{graph.owned_constant(plain_desc({n}, DataType::f32), scales.data())};
  if (step.has_input(2)) {
    const memory::dims bias_dims = left_pad(graph.dims(step.inputs[2]), dst.size());
    sources.push_back(operand(graph, step.inputs[2], bias_dims, plain_desc(bias_dims, DataType::f32)));
  }
  const BufferId src = operand(graph, a, a_dims, plain_desc(a_dims, graph.data_type(a)));
  const BufferId packed =
      graph.input_view(step.inputs[1], matrix, memory::desc({k, n}, DataType::s8, memory::format_tag::BA16a16b2a));
  const memory::desc result = plain_desc(dst, DataType::f32);
  const bool quantizes_result = is_int8(graph.data_type(output));
  const BufferId product = quantizes_result ? graph.scratch(result) : graph.define(output, result);
  graph.add_host_loop(loop, product, src, packed, sources);
  const BufferId seen = fold_rows ? graph.alias(product, plain_desc(fold_into_rows(dst), DataType::f32)) : product;
  const PostOps post_ops = read_post_ops(step, graph, 3, dst, fold_rows);
  ArgList args{{DNNL_ARG_DST, seen}};
  add_plain_post_op_args(post_ops, graph, args);
  add_post_ops_in_place(graph, post_ops, args);
  if (quantizes_result) {
    add_quantizing_reorder(graph, product, graph.define(output, graph.plain(output)), quantization.of(DNNL_ARG_DST));
  }
}

struct ConvolutionShape {
  memory::dims src, dst, weights; // weights: oneDNN logical dims ([g,] OC[/g], IC[/g], k...)
  memory::desc weights_view;      // the PyTorch weight bytes described with those dims
  memory::dims strides, dilation, padding_l, padding_r;
  int64_t channels_out = 0;
};

// PyTorch weights: convolution [OC, IC/g, k...]; conv_transpose [IC, OC/g, k...], i.e. physically
// [g, IC/g, OC/g, k...], which oneDNN reads through strides ("giohw"/"iohw") without a copy.
ConvolutionShape read_convolution_shape(const StepRecord& step, GraphBuilder& graph, bool transposed) {
  ConvolutionShape shape;
  shape.src = graph.dims(step.inputs[0]);
  shape.dst = graph.dims(step.outputs[0]);
  const memory::dims torch_weights = graph.dims(step.inputs[1]);
  const size_t rank = shape.src.size();
  ODNN_CHECK(rank >= 3 && rank <= 5, "src must be [N, C, spatial...] of rank 3..5, got %zu", rank);
  ODNN_CHECK(
      shape.dst.size() == rank && torch_weights.size() == rank,
      "src %s, weights %s and dst %s must have the same rank",
      dims_string(shape.src).c_str(),
      dims_string(torch_weights).c_str(),
      dims_string(shape.dst).c_str());
  const size_t spatial = rank - 2;
  shape.strides = spatial_attr(step, "strides", spatial, 1);
  shape.padding_l = spatial_attr(step, "padding_l", spatial, transposed ? INT64_MIN : 0);
  shape.padding_r = spatial_attr(step, "padding_r", spatial, transposed ? INT64_MIN : 0);
  shape.dilation = dnnl_dilation(step, spatial);
  const int64_t groups = step.int_scalar("groups");
  const int64_t ic = shape.src[1];
  const int64_t oc = shape.dst[1];
  shape.channels_out = oc;
  ODNN_CHECK(
      groups >= 1 && ic % groups == 0 && oc % groups == 0,
      "groups %lld must divide input channels %lld and output channels %lld",
      static_cast<long long>(groups),
      static_cast<long long>(ic),
      static_cast<long long>(oc));
  const int64_t expected_0 = transposed ? ic : oc;
  const int64_t expected_1 = transposed ? oc / groups : ic / groups;
  ODNN_CHECK(
      torch_weights[0] == expected_0 && torch_weights[1] == expected_1,
      "weights %s do not match %lld input channels, %lld output channels, %lld groups",
      dims_string(torch_weights).c_str(),
      static_cast<long long>(ic),
      static_cast<long long>(oc),
      static_cast<long long>(groups));
  const memory::dims kernel(torch_weights.begin() + 2, torch_weights.end());

  memory::dims physical;      // the PyTorch bytes, split by group where grouped
  std::vector<int64_t> order; // logical dim i = physical dim order[i]
  if (groups > 1) {
    physical =
        transposed ? memory::dims{groups, ic / groups, oc / groups} : memory::dims{groups, oc / groups, ic / groups};
    order = transposed ? std::vector<int64_t>{0, 2, 1} : std::vector<int64_t>{0, 1, 2};
  } else {
    physical = transposed ? memory::dims{ic, oc} : memory::dims{oc, ic};
    order = transposed ? std::vector<int64_t>{1, 0} : std::vector<int64_t>{0, 1};
  }
  for (int64_t k : kernel) {
    order.push_back(static_cast<int64_t>(physical.size()));
    physical.push_back(k);
  }
  shape.weights_view = permuted_view(physical, order, graph.data_type(step.inputs[1]));
  shape.weights = shape.weights_view.get_dims();
  return shape;
}

using Remake = std::function<BuiltPrimitive(const dnnl::post_ops&)>;

// Fewer output tiles than this and the transformed weights, 4x the layer's, are read from memory for
// little work: ResNet's 512-channel layers at 7x7 (4 tiles) gained 1.04x (2 threads) to 1.17x (one)
// for 28 MB more weights in ResNet-18.
constexpr size_t kWinogradMinTiles = 16;

// The tiles of a 2-D convolution's src and dst (channels-last) for Winograd.
WinogradShape winograd_shape(const ConvolutionShape& shape) {
  WinogradShape tiles;
  tiles.batch = static_cast<size_t>(shape.src[0]);
  tiles.channels = static_cast<size_t>(shape.src[1]);
  tiles.height = static_cast<size_t>(shape.src[2]);
  tiles.width = static_cast<size_t>(shape.src[3]);
  tiles.out_channels = static_cast<size_t>(shape.dst[1]);
  tiles.out_height = static_cast<size_t>(shape.dst[2]);
  tiles.out_width = static_cast<size_t>(shape.dst[3]);
  tiles.pad_top = shape.padding_l[0];
  tiles.pad_left = shape.padding_l[1];
  return tiles;
}

// Whether the f32 2-D convolution `step` reads an image's few channels (at most 4) as they are
// stored, plain, with a stride of 2 or more: on AVX-512 `any` picks a channels-last kernel there, and
// the whole image is copied channels-last first, while the direct kernel for a plain src reads it in
// place and writes its (smaller) result blocked. Zen 4, one thread, 1x3x224x224 with the reorders each
// way: ResNet's 7x7 stem to 64 channels 3.14 -> 2.53 ms, a 3x3 one to 16 channels 0.24 -> 0.16, to 32
// 0.32 -> 0.32; a stride-1 stem would lose (U-Net's at 128x128: 0.31 -> 0.41).
bool reads_image_in_place(const StepRecord& step, GraphBuilder& graph, const ConvolutionShape& shape, DataType type) {
  const uint32_t src = step.inputs[0];
  return host_row_isa() == RowIsa::avx512 && type == DataType::f32 && graph.data_type(src) == DataType::f32 &&
         shape.src.size() == 4 && shape.src[1] <= 4 && step.int_scalar("groups") == 1 && shape.strides[0] >= 2 &&
         shape.strides[1] >= 2 && !graph.is_view(src) && graph.stored(src) == graph.plain(src);
}

// Whether the int8 2-D convolution `step` with a 3x3 kernel reads an image's few channels (at most 4):
// oneDNN 3.13.1 gives it its AMX brgemm kernel, whose tiles are 64 products deep where the image has
// 27, while its AVX512-VNNI direct kernel (`jit_int8`, what 3.2 picked) is 1.3-2.7x faster there: AMX
// Xeon, 2 threads, 3->16 and 3->32 channels at 224x224 with stride 2, 3->32 at 128x128 with stride 1.
// A 7x7 stem has no such kernel and keeps AMX; on CPUs without AMX oneDNN's choice is kept (not measured).
bool prefers_direct_int8_kernel(const StepRecord& step, const ConvolutionShape& shape, DataType type) {
  return is_int8(type) && shape.src.size() == 4 && shape.src[1] <= 4 && step.int_scalar("groups") == 1 &&
         shape.weights.size() == 4 && shape.weights[2] == 3 && shape.weights[3] == 3;
}

// Below this many channels on either side, Winograd loses to oneDNN's AVX-512 direct kernels: its
// transforms cost as much as the products they save. AMX Xeon, 2 threads, one 3x3 convolution + ReLU,
// direct / Winograd: 16->16 at 56x56 and 112x112 0.89x and 0.93x, 16->32 0.98x, 32->16 0.93x; 24->24
// at 56x56 1.12x, 32->32 1.06-1.08x, 64 and more 1.04-2.09x. On AVX2 every multiple of 8 gained.
constexpr int64_t kWinogradMinChannelsAvx512 = 24;

// Whether the Winograd path is wanted for a layer of `shape` on this CPU, as the backend option says.
bool winograd_wanted(const ConvolutionShape& shape, const GraphBuilder& graph) {
  const RowIsa isa = host_row_isa();
  switch (graph.settings().winograd) {
    case WinogradUse::never:
      return false;
    case WinogradUse::always:
      return isa != RowIsa::scalar;
    case WinogradUse::where_faster:
      return isa == RowIsa::avx2 ||
             (isa == RowIsa::avx512 && std::min(shape.src[1], shape.dst[1]) >= kWinogradMinChannelsAvx512);
  }
  return false;
}

// Whether the f32 2-D 3x3 convolution of stride 1 `pd` (an fp32 one, or an int8 one computed in f32
// on a CPU without VNNI) computes through Winograd (Winograd.h): where wanted, with constant weights,
// channel counts that are multiples of the AVX2 width, enough output tiles, and channels-last src and
// dst as oneDNN picks for it (the direct kernel of the guarded path reads and writes the same buffers).
bool computes_by_winograd(
    const StepRecord& step,
    GraphBuilder& graph,
    const ConvolutionShape& shape,
    DataType type,
    const dnnl::primitive_desc& pd) {
  if (shape.src.size() != 4 || step.int_scalar("groups") != 1 || !winograd_wanted(shape, graph)) {
    return false;
  }
  // An emulated int8 convolution reads f32 operands too: its src and weights dequantized; so does a bf16
  // one where bf16 is widened (no bf16 instructions): a bf16 graph input or constant converted to f32.
  const auto f32_operand = [&](uint32_t id) {
    const DataType stored = graph.data_type(id);
    return stored == DataType::f32 || (stored == DataType::bf16 && graph.widens_bf16());
  };
  const bool f32_operands =
      emulates_int8(graph, step.inputs[0]) || (f32_operand(step.inputs[0]) && f32_operand(step.inputs[1]));
  const memory::dims three{3, 3};
  return type == DataType::f32 && f32_operands && pd.dst_desc(0).get_data_type() == DataType::f32 &&
         memory::dims(shape.weights.begin() + 2, shape.weights.end()) == three && shape.strides == memory::dims{1, 1} &&
         shape.dilation == memory::dims{0, 0} && graph.is_constant(step.inputs[1]) &&
         shape.src[1] % kWinogradLanes == 0 && shape.dst[1] % kWinogradLanes == 0 &&
         winograd_shape(shape).tiles() >= kWinogradMinTiles && pd.src_desc(0) == channels_last_desc(shape.src) &&
         pd.dst_desc(0) == channels_last_desc(shape.dst);
}

// The convolution of `args` (the direct kernel's, whose weights it transforms) through Winograd: its
// input tiles, the products, its outputs with the bias, a leading residual add and a ReLU after it
// folded into the output transform, the other post-ops in place; guarded by the direct kernel `remake`.
void add_winograd_convolution(
    GraphBuilder& graph,
    const ConvolutionShape& shape,
    const PostOps& post_ops,
    const ArgList& args,
    const Remake& remake) {
  WinogradShape tiles = winograd_shape(shape);
  const auto points = static_cast<int64_t>(kWinogradPoints);
  const auto count = static_cast<int64_t>(tiles.tiles());
  const memory::desc input_tiles = plain_desc({points, count, shape.src[1]});
  const memory::desc products = plain_desc({points, count, shape.dst[1]});
  const dnnl::matmul::primitive_desc pd(
      graph.engine(),
      input_tiles,
      any_desc({points, shape.src[1], shape.dst[1]}),
      products,
      GraphBuilder::default_attr());
  const BufferId weights = graph.winograd_constant(arg_of(args, DNNL_ARG_WEIGHTS), pd.weights_desc());
  const BufferId transformed = graph.scratch(input_tiles);
  const BufferId multiplied = graph.scratch(products);
  const BufferId dst = arg_of(args, DNNL_ARG_DST);
  size_t fused = 0;
  std::vector<BufferId> residual;
  const std::vector<PostOps::Entry>& entries = post_ops.entries;
  if (!entries.empty() && entries[0].binary && entries[0].alg == dnnl::algorithm::binary_add) {
    const BufferId operand = arg_of(args, DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1);
    if (operand != kNoBuffer && graph.buffer_desc(operand) == graph.buffer_desc(dst)) {
      residual.push_back(operand);
      fused = 1;
    }
  }
  if (fused < entries.size() && entries[fused].clamp && entries[fused].alg == dnnl::algorithm::eltwise_relu) {
    tiles.relu = true;
    ++fused;
  }
  add_guarded_steps(
      graph,
      post_ops,
      [&]() {
        HostLoop input;
        input.kind = HostLoop::Kind::WinogradInput;
        input.winograd = tiles;
        graph.add_host_loop(input, transformed, arg_of(args, DNNL_ARG_SRC));
        graph.add_primitive(
            dnnl::matmul(pd),
            pd,
            {{DNNL_ARG_SRC, transformed}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, multiplied}});
        HostLoop output = input;
        output.kind = HostLoop::Kind::WinogradOutput;
        graph.add_host_loop(output, dst, multiplied, arg_of(args, DNNL_ARG_BIAS), residual);
        add_post_ops_in_place(graph, post_ops, args, fused);
      },
      args,
      remake);
}

// Whether one row in `type` times the constant `weights` giving `output` can run on the host
// (VectorMatrix.h): f32 or bf16 throughout, not quantized, a CPU with AVX2 or more.
bool runs_row_times_matrix(GraphBuilder& graph, DataType type, uint32_t weights, uint32_t output, bool quantized) {
  const DataType result = graph.compute_type(output);
  return !quantized && (type == DataType::f32 || type == DataType::bf16) && weights_type(type) == type &&
         graph.is_constant(weights) && (result == DataType::f32 || result == DataType::bf16) &&
         host_row_isa() != RowIsa::scalar;
}

// The packed layout a one-row graph reads its weights in: BA16a16b (aCB16b16c), or in a program with
// dynamic sizes the layout oneDNN packs the same weights in for its several-row graphs, when that is
// blocks of 16 rows (bf16: 16 pairs of rows) by a multiple of 16 columns (f32 on AVX-512: 64; bf16 on
// AMX: pairs, 32), so that every size shares one packed copy. Fills the shape's packed_width and
// paired_rows.
memory::desc vector_matrix_weights(
    GraphBuilder& graph, const memory::dims& a_dims, const memory::dims& b_dims, VectorMatrixShape& shape) {
  const size_t rank = b_dims.size();
  const DataType type = shape.bf16 ? DataType::bf16 : DataType::f32;
  const memory::desc narrow(b_dims, type, rank == 2 ? memory::format_tag::BA16a16b : memory::format_tag::aCB16b16c);
  if (!graph.sizes_vary()) {
    return narrow;
  }
  memory::dims rows = a_dims, result = a_dims;
  rows[rank - 2] = result[rank - 2] = 2;
  result[rank - 1] = b_dims[rank - 1];
  try {
    const dnnl::matmul::primitive_desc pd(
        graph.engine(), plain_desc(rows, type), any_desc(b_dims, type), plain_desc(result, DataType::f32));
    const memory::desc chosen = pd.weights_desc();
    const memory::dims blocks = chosen.get_inner_blks(), indices = chosen.get_inner_idxs();
    const memory::dims strides = chosen.get_strides();
    const int64_t k_dim = static_cast<int64_t>(rank - 2), n_dim = static_cast<int64_t>(rank - 1);
    const bool paired = blocks.size() == 3 && shape.bf16 && blocks[2] == 2 && indices[2] == k_dim;
    const int64_t width = blocks.size() >= 2 ? blocks[1] : 0, rows_per_block = paired ? 32 : 16;
    const int64_t padded_k = (b_dims[rank - 2] + rows_per_block - 1) / rows_per_block * rows_per_block;
    if (chosen.get_format_kind() == memory::format_kind::blocked && (blocks.size() == 2 || paired) && blocks[0] == 16 &&
        width % 16 == 0 && indices[0] == k_dim && indices[1] == n_dim && strides[rank - 2] == rows_per_block * width &&
        strides[rank - 1] == padded_k * width) {
      shape.packed_width = static_cast<size_t>(width);
      shape.paired_rows = paired;
      return chosen;
    }
  } catch (const dnnl::error&) {
    // No several-row kernel to share a layout with: the narrow one.
  }
  return narrow;
}

// One row times constant weights [K, N] (or [1, K, N]) on the host (VectorMatrix.h), in f32 or bf16
// (`type`), the result's post-ops applied after it; `bias` is kNoBuffer or N f32 values.
void add_vector_matrix_steps(
    GraphBuilder& graph,
    const StepRecord& step,
    DataType type,
    const memory::dims& a_dims,
    const memory::desc& b_view,
    const memory::dims& dst,
    const PostOps& post_ops,
    BufferId bias) {
  const memory::dims& b_dims = b_view.get_dims();
  HostLoop loop;
  loop.kind = HostLoop::Kind::VectorMatrix;
  loop.vector_matrix.isa = host_row_isa();
  loop.vector_matrix.k = static_cast<size_t>(b_dims[b_dims.size() - 2]);
  loop.vector_matrix.n = static_cast<size_t>(b_dims.back());
  loop.vector_matrix.bf16 = type == DataType::bf16;
  const memory::desc packed = vector_matrix_weights(graph, a_dims, b_dims, loop.vector_matrix);
  const DataType result_type = graph.compute_type(step.outputs[0]);
  loop.vector_matrix.dst_bf16 = result_type == DataType::bf16;
  const BufferId row = operand(graph, step.inputs[0], a_dims, plain_desc(a_dims, type));
  const BufferId weights = graph.input_view(step.inputs[1], b_view, packed);
  const BufferId result = graph.define(step.outputs[0], plain_desc(dst, result_type));
  graph.add_host_loop(loop, result, row, weights, bias == kNoBuffer ? std::vector<BufferId>{} : std::vector{bias});
  ArgList args{{DNNL_ARG_DST, result}};
  add_plain_post_op_args(post_ops, graph, args);
  add_post_ops_in_place(graph, post_ops, args);
}

// Whether the convolution `step` of `shape` is one image's pixel times constant weights: a 1x1 kernel
// on a 1x1 image (squeeze-and-excitation's two linear layers), which runs as one row times a matrix on
// the host (VectorMatrix.h). In the network oneDNN's kernel for it took 7-10 us a call, its code and
// weights cold in the caches (EfficientNet-B0's 32 of them; 1.7-2 us each in a loop), XNNPACK's 1-2.
bool is_pixel_times_matrix(
    const StepRecord& step, GraphBuilder& graph, const ConvolutionShape& shape, DataType type, bool quantized) {
  bool single_pixel = shape.src[0] == 1 && step.int_scalar("groups") == 1;
  for (size_t d = 2; d < shape.src.size(); ++d) {
    single_pixel = single_pixel && shape.src[d] == 1 && shape.dst[d] == 1 && shape.weights[d] == 1;
  }
  return single_pixel && runs_row_times_matrix(graph, type, step.inputs[1], step.outputs[0], quantized);
}

void build_convolution_like(const StepRecord& step, GraphBuilder& graph, bool transposed) {
  const ConvolutionShape shape = read_convolution_shape(step, graph, transposed);
  const bool has_bias = step.has_input(2);
  const memory::desc bias_desc = plain_desc({shape.channels_out}); // f32 in every precision
  if (has_bias) {
    const memory::dims bias_dims = graph.dims(step.inputs[2]);
    ODNN_CHECK(
        bias_dims.size() == 1 && bias_dims[0] == shape.channels_out,
        "bias %s must be [%lld]",
        dims_string(bias_dims).c_str(),
        static_cast<long long>(shape.channels_out));
  }
  PostOps post_ops = read_post_ops(step, graph, 3, shape.dst);
  const DataType type = compute_type(step, graph, step.inputs[0]);
  const int64_t groups = step.int_scalar("groups");
  // Per output channel: grouped weights are [g, OC/g, ...], so the mask spans both dims.
  const int weights_mask = groups > 1 ? 0b11 : 0b1;
  const Quantization quantization = read_quantization(step, graph, weights_mask, shape.channels_out);
  const bool emulated = emulates_int8(graph, step.inputs[0]);
  const uint32_t output = step.outputs[0];
  if (graph.holds_dequantized_int8(output)) {
    append_int8_rounding(post_ops, dst_int8_grid(step, graph.program_type(output)));
  }
  // A chain of activations led by one the kernel fuses slowly runs after it, in place on its f32 or
  // bf16 result (not where the kernel itself quantizes the result).
  const bool chain_after = (quantization.empty() || emulated) && !post_ops.entries.empty() &&
                           post_ops.operands.empty() &&
                           fused_activation_is_slow(dnnl::primitive::kind::convolution, post_ops.entries[0].alg);
  const PostOps fused = chain_after ? PostOps() : post_ops;
  dnnl::primitive_attr attr = attr_with(fused);
  if (!transposed && is_pixel_times_matrix(step, graph, shape, type, emulated || !quantization.empty())) {
    const int64_t channels_in = shape.src[1], channels_out = shape.dst[1];
    const memory::desc weights_view =
        permuted_view({channels_out, channels_in}, {1, 0}, graph.data_type(step.inputs[1]));
    const BufferId bias = has_bias ? graph.input(step.inputs[2], bias_desc) : kNoBuffer;
    add_vector_matrix_steps(graph, step, type, {1, channels_in}, weights_view, shape.dst, post_ops, bias);
    return;
  }
  const bool quantizes_result = emulated && is_int8(graph.data_type(output));
  const Quantization kernel_quantization = emulated ? Quantization() : quantization;
  kernel_quantization.apply(attr);
  const memory::desc src_any = any_desc(shape.src, type);
  const memory::desc weights_any = any_desc(shape.weights, weights_type(type));
  const memory::desc dst_any = any_desc(shape.dst, quantizes_result ? DataType::f32 : graph.compute_type(output));
  const memory::desc no_bias;
  const memory::desc& bias = has_bias ? bias_desc : no_bias;

  const int input_channel_axis = groups > 1 ? 2 : 1; // of oneDNN's weights dims
  // An empty bias desc means "no bias" to oneDNN, so one constructor call serves both cases.
  auto describe = [&](auto kind,
                      dnnl::algorithm algorithm,
                      const memory::desc& src,
                      const memory::desc& weights,
                      const memory::desc& dst,
                      const dnnl::primitive_attr& attributes,
                      bool keeps_non_finite,
                      const char* implementation) -> BuiltPrimitive {
    using Primitive = decltype(kind);
    typename Primitive::primitive_desc built(
        graph.engine(),
        prop_kind::forward_inference,
        algorithm,
        src,
        weights,
        bias,
        dst,
        shape.strides,
        shape.dilation,
        shape.padding_l,
        shape.padding_r,
        attributes);
    while (keeps_non_finite && spreads_non_finite(built, input_channel_axis) && built.next_impl()) {
    }
    while (implementation != nullptr && std::string(built.impl_info_str()).rfind(implementation, 0) != 0) {
      if (!built.next_impl()) {
        throw dnnl::error(dnnl_unimplemented, implementation);
      }
    }
    return {Primitive(built), built};
  };
  auto build = [&](const memory::desc& src,
                   const memory::desc& weights,
                   const memory::desc& dst,
                   const dnnl::primitive_attr& attributes,
                   bool keeps_non_finite = false,
                   const char* implementation = nullptr) {
    return transposed ? describe(
                            dnnl::deconvolution_forward(),
                            dnnl::algorithm::deconvolution_direct,
                            src,
                            weights,
                            dst,
                            attributes,
                            keeps_non_finite,
                            implementation)
                      : describe(
                            dnnl::convolution_forward(),
                            dnnl::algorithm::convolution_direct,
                            src,
                            weights,
                            dst,
                            attributes,
                            keeps_non_finite,
                            implementation);
  };
  const BuiltPrimitive built = [&] {
    if (!transposed && !emulated && reads_image_in_place(step, graph, shape, type)) {
      try {
        BuiltPrimitive in_place = build(graph.stored(step.inputs[0]), weights_any, dst_any, attr);
        if (std::string(in_place.second.impl_info_str()).rfind("jit", 0) == 0) {
          return in_place;
        }
      } catch (const dnnl::error&) {
        // No kernel reads this src plain: the channels-last one below.
      }
    }
    BuiltPrimitive chosen = build(src_any, weights_any, dst_any, attr);
    if (!transposed && !emulated && prefers_direct_int8_kernel(step, shape, type) &&
        std::string(chosen.second.impl_info_str()).find("amx") != std::string::npos) {
      try {
        return build(src_any, weights_any, dst_any, attr, false, "jit_int8");
      } catch (const dnnl::error&) {
        // Not offered for this shape: oneDNN's choice.
      }
    }
    return chosen;
  }();
  const dnnl::primitive_desc& pd = built.second;

  ArgList args;
  if (emulated && !graph.holds_dequantized_int8(step.inputs[0])) {
    args.emplace_back(DNNL_ARG_SRC, dequantized(graph, graph.buffer(step.inputs[0]), pd.src_desc(0), quantization));
  } else {
    args.emplace_back(DNNL_ARG_SRC, graph.input(step.inputs[0], pd.src_desc(0)));
  }
  const size_t weights_arg = args.size();
  args.emplace_back(
      DNNL_ARG_WEIGHTS,
      emulated ? dequantized_weights(
                     graph, step.inputs[1], shape.weights_view, pd.weights_desc(0), quantization, weights_mask)
               : graph.input_view(step.inputs[1], shape.weights_view, pd.weights_desc(0)));
  if (has_bias) {
    args.emplace_back(DNNL_ARG_BIAS, graph.input(step.inputs[2], pd.weights_desc(1)));
  }
  add_post_op_args(post_ops, pd, graph, args);
  kernel_quantization.add_args(args);
  const BufferId result = quantizes_result ? graph.scratch(pd.dst_desc(0)) : graph.define(output, pd.dst_desc(0));
  args.emplace_back(DNNL_ARG_DST, result);
  // A kernel that spreads NaN and infinities keeps the step's speed on finite inputs; the guarded
  // path runs the next kernel, with the weights in the layout that one picks.
  memory::desc exact_weights = pd.weights_desc(0);
  ArgList exact_args;
  bool spreads = false;
  if (!transposed && spreads_non_finite(pd, input_channel_axis)) {
    const dnnl::primitive_desc exact = build(pd.src_desc(0), weights_any, pd.dst_desc(0), attr, true).second;
    spreads = !spreads_non_finite(exact, input_channel_axis); // else none keeps them: not guarded
    if (spreads) {
      exact_weights = exact.weights_desc(0);
      exact_args = args;
      exact_args[weights_arg].second = graph.input_view(step.inputs[1], shape.weights_view, exact_weights);
    }
  }
  const Remake remake = [&](const dnnl::post_ops& ops) {
    dnnl::primitive_attr exact = attr_with(ops);
    kernel_quantization.apply(exact);
    return build(pd.src_desc(0), exact_weights, pd.dst_desc(0), exact, spreads);
  };
  if (!transposed && kernel_quantization.empty() && computes_by_winograd(step, graph, shape, type, pd)) {
    add_winograd_convolution(graph, shape, fused, args, remake);
  } else {
    add_post_op_primitive(graph, fused, built, args, remake, spreads ? &exact_args : nullptr);
  }
  if (chain_after) {
    add_post_ops_in_place(graph, post_ops, args);
  }
  if (quantizes_result) {
    add_quantizing_reorder(
        graph, result, graph.define(output, int8_result_desc(graph, output)), quantization.of(DNNL_ARG_DST));
  }
}

} // namespace

DataType compute_type(const StepRecord& step, GraphBuilder& graph, uint32_t src) {
  if (is_int8(graph.program_type(src))) {
    return emulates_int8(graph, src) ? DataType::f32 : graph.data_type(src);
  }
  if (graph.compute_in_f32()) {
    return DataType::f32;
  }
  return graph.asks_bf16(step) || graph.data_type(src) == DataType::bf16 ||
                 graph.data_type(step.outputs[0]) == DataType::bf16
             ? DataType::bf16
             : DataType::f32;
}

void build_convolution(const StepRecord& step, GraphBuilder& graph) {
  build_convolution_like(step, graph, false);
}

void build_deconvolution(const StepRecord& step, GraphBuilder& graph) {
  build_convolution_like(step, graph, true);
}

// dst [..., M, N] = a [..., M, K] x b [..., K, N] (+ bias); lower-rank operands are left-padded
// with 1s and batch dims broadcast. transpose_b: b is stored [..., N, K] and read through strides.
namespace {

// oneDNN 3.2's brgemm matmul takes a binary post-op operand that varies along the rows but not the
// columns (the row scales of dynamic int8, [.., M, 1]) only in a [1, M, N] problem; elsewhere it falls
// back to the reference kernel, ~1000x slower. When b is shared by every batch and a is not
// broadcast, the batch dims fold into M: the same plain bytes, a [1, rows, N] problem.
bool fold_batch_into_rows(
    const StepRecord& step,
    GraphBuilder& graph,
    const PostOps& post_ops,
    const memory::dims& a_dims,
    const memory::dims& b_dims,
    const memory::dims& dst) {
  const size_t batch = dst.size() - 2;
  bool row_operand = false;
  bool all_fold = true;
  for (const PostOps::Operand& operand : post_ops.operands) {
    const bool leading_ones =
        std::all_of(operand.dims.begin(), operand.dims.end() - 1, [](int64_t d) { return d == 1; });
    row_operand = row_operand || (operand.dims.back() == 1 && dst.back() > 1 && !leading_ones);
    all_fold = all_fold && folds_into_rows(operand.dims, dst);
  }
  const bool bias_folds = !step.has_input(2) || folds_into_rows(graph.dims(step.inputs[2]), dst);
  return row_operand && all_fold && bias_folds &&
         std::all_of(b_dims.begin(), b_dims.begin() + batch, [](int64_t d) { return d == 1; }) &&
         std::equal(a_dims.begin(), a_dims.begin() + batch, dst.begin());
}

// A decode step's linear layers (M = 1 to 4 rows) stream their weights from memory once per call
// when the model's weights do not fit in the caches. oneDNN 3.2 picks blocks 64 columns wide for
// them, which its brgemm kernel streams at 20-27 GB/s on the dev machine; blocks 16 columns wide at
// 26-33 GB/s (weights out of cache, alternating measurements of decode shapes, fp32 and bf16,
// 2026-11-30). From cache the wide blocks are faster (a 512 x 1000 head: 69 against 52 GB/s), so
// only graphs with more weights than kStreamedWeightBytes get the narrow ones, and only where oneDNN
// builds the same kernel for them, and not in a program with dynamic sizes: there the graph of a
// 2-row prompt would pack a second copy of every weight beside the one its other sizes share (4 GB
// more for a 1.1B-parameter fp32 LLM).
//
// Where AVX2 is the widest vector, f32 weights in blocks 16 columns wide are faster at every row count
// we measured (oneDNN 3.13.1, AMD Zen 3, 2 threads, per-primitive times, 2026-12-07): the MLP's
// 32 x 1024 x 4096 product 1.8 against 2.1-2.4 ms, BERT-base's linear layers (128 rows) 15% faster,
// GPT-2's 7%, ViT-Tiny's (197 rows, K 192) alike within the noise (32 columns: 2.0 ms, 48: 2.5).
constexpr int64_t kSmallRows = 4;
constexpr size_t kStreamedWeightBytes = size_t{32} << 20;

// The narrow-block layout of constant weights [K, N] or [1, K, N], or `any` when there is none.
memory::format_tag narrow_weights_tag(size_t rank, DataType type, bool narrowest) {
  using tag = memory::format_tag;
  if (type == DataType::f32) {
    return rank == 2 ? (narrowest ? tag::BA16a16b : tag::BA16a32b) : (narrowest ? tag::aCB16b16c : tag::aCB16b32c);
  }
  if (type == DataType::bf16) {
    return rank == 2 ? (narrowest ? tag::BA16a16b2a : tag::BA16a32b2a)
                     : (narrowest ? tag::aCB16b16c2b : tag::aCB16b32c2b);
  }
  return tag::any;
}

template <typename MakePd>
dnnl::matmul::primitive_desc with_narrow_weights(
    const dnnl::matmul::primitive_desc& chosen,
    const memory::dims& weights_dims,
    DataType type,
    bool narrowest,
    MakePd make_pd) {
  const memory::format_tag tag = narrow_weights_tag(weights_dims.size(), type, narrowest);
  if (tag == memory::format_tag::any) {
    return chosen;
  }
  try {
    dnnl::matmul::primitive_desc narrow = make_pd(memory::desc(weights_dims, type, tag));
    if (std::string(narrow.impl_info_str()) == chosen.impl_info_str()) {
      return narrow;
    }
  } catch (const dnnl::error&) {
    // No kernel for that layout on this CPU: keep oneDNN's choice.
  }
  return chosen;
}

} // namespace

void build_matmul(const StepRecord& step, GraphBuilder& graph) {
  const uint32_t a = step.inputs[0];
  const uint32_t b = step.inputs[1];
  const memory::dims dst_value = graph.dims(step.outputs[0]);
  ODNN_CHECK(
      dst_value.size() >= 2 && graph.dims(a).size() <= dst_value.size() && graph.dims(b).size() <= dst_value.size(),
      "dst %s must have rank >= 2 and at least the rank of a and b",
      dims_string(dst_value).c_str());
  const memory::dims a_padded = left_pad(graph.dims(a), dst_value.size());
  PostOps post_ops = read_post_ops(step, graph, 3, dst_value);
  const bool fold_rows =
      fold_batch_into_rows(step, graph, post_ops, a_padded, left_pad(graph.dims(b), dst_value.size()), dst_value);
  if (fold_rows) {
    post_ops = read_post_ops(step, graph, 3, dst_value, true);
  }
  const memory::dims dst = fold_rows ? fold_into_rows(dst_value) : dst_value;
  const size_t rank = dst.size();
  const memory::dims a_dims = fold_rows ? fold_into_rows(a_padded) : a_padded;
  const memory::dims b_stored = left_pad(graph.dims(b), rank);
  const bool transpose_b = step.has("transpose_b") && step.int_scalar("transpose_b") != 0;
  std::vector<int64_t> order(rank);
  std::iota(order.begin(), order.end(), 0);
  if (transpose_b) {
    std::swap(order[rank - 1], order[rank - 2]);
  }
  const DataType type = compute_type(step, graph, a);
  const memory::desc b_view = permuted_view(b_stored, order, graph.data_type(b));
  const memory::dims b_dims = b_view.get_dims();
  const int64_t m = dst[rank - 2], n = dst[rank - 1], k = a_dims[rank - 1];
  bool shapes_ok = a_dims[rank - 2] == m && b_dims[rank - 2] == k && b_dims[rank - 1] == n;
  for (size_t d = 0; d + 2 < rank; ++d) {
    shapes_ok = shapes_ok && (a_dims[d] == 1 || a_dims[d] == dst[d]) && (b_dims[d] == 1 || b_dims[d] == dst[d]);
  }
  ODNN_CHECK(
      shapes_ok,
      "a %s, b %s (transpose_b=%d) and dst %s are not a valid matmul",
      dims_string(graph.dims(a)).c_str(),
      dims_string(graph.dims(b)).c_str(),
      transpose_b ? 1 : 0,
      dims_string(dst).c_str());

  const bool has_bias = step.has_input(2);
  memory::dims bias_dims;
  if (has_bias) {
    bias_dims = fold_rows ? fold_into_rows(left_pad(graph.dims(step.inputs[2]), dst_value.size()))
                          : left_pad(graph.dims(step.inputs[2]), rank);
    ODNN_CHECK(
        graph.dims(step.inputs[2]).size() <= rank && broadcasts_to(bias_dims, dst),
        "bias %s does not broadcast to dst %s",
        dims_string(graph.dims(step.inputs[2])).c_str(),
        dims_string(dst).c_str());
  }
  dnnl::primitive_attr attr = attr_with(post_ops);
  // Weight scales per output column n: the last dim of b.
  const int weights_mask = 1 << (rank - 1);
  const Quantization quantization = read_quantization(step, graph, weights_mask, n);
  const bool emulated = emulates_int8(graph, a);
  const uint32_t output = step.outputs[0];
  const bool quantizes_result = emulated && is_int8(graph.data_type(output));
  ODNN_CHECK(!quantizes_result || !fold_rows, "an int8 result of a matmul with row post-op operands");
  ODNN_CHECK(!emulated || graph.is_constant(b), "int8 weights that are not a constant");
  const Quantization kernel_quantization = emulated ? Quantization() : quantization;
  kernel_quantization.apply(attr);
  const DataType b_type = weights_type(type);
  const int64_t rows = rank == 2 ? m : dst[0] * m;
  const bool one_weight_matrix = rank == 2 || (rank == 3 && b_dims[0] == 1);
  const bool bias_per_column =
      !has_bias || (bias_dims.back() == n &&
                    std::accumulate(bias_dims.begin(), bias_dims.end(), int64_t{1}, std::multiplies<>()) == n);
  if (emulated && matmul_runs_exact_int8(graph, step, a_padded, dst_value, one_weight_matrix, bias_per_column)) {
    add_exact_int8_matmul(step, graph, a_padded, b_view, dst_value, fold_rows, quantization);
    return;
  }
  // One f32 or bf16 row times constant weights: a host loop streams them about twice as fast as
  // oneDNN 3.13.1's kernels for M = 1 (VectorMatrix.h).
  if (rows == 1 && !fold_rows && one_weight_matrix && bias_per_column &&
      runs_row_times_matrix(graph, type, b, output, emulated || !kernel_quantization.empty())) {
    const BufferId bias =
        has_bias ? operand(graph, step.inputs[2], bias_dims, plain_desc(bias_dims, DataType::f32)) : kNoBuffer;
    add_vector_matrix_steps(graph, step, type, a_dims, b_view, dst, post_ops, bias);
    return;
  }
  // Constant weights get the layout oneDNN prefers. Activations are read in place: as they are
  // stored when that is strided (a permute or reshape left as a view) and oneDNN runs the same
  // kernel on those strides as on plain input, else plain (converted first when their type is not
  // the compute type).
  const memory::desc b_plain = graph.is_constant(b) ? any_desc(b_dims, b_type) : permuted_view(b_stored, order, b_type);
  const memory::desc a_plain = plain_desc(a_dims, type);
  std::vector<int64_t> identity(rank);
  std::iota(identity.begin(), identity.end(), 0);
  const memory::desc a_strided = fold_rows ? memory::desc() : strided_operand(graph, a, identity, type);
  const memory::desc b_strided = graph.is_constant(b) ? memory::desc() : strided_operand(graph, b, order, b_type);
  const memory::desc dst_desc = plain_desc(dst, quantizes_result ? DataType::f32 : graph.compute_type(output));
  using Pd = dnnl::matmul::primitive_desc;
  auto make_pd_with =
      [&](const memory::desc& a_desc, const memory::desc& b_desc, const dnnl::primitive_attr& attributes) {
        return has_bias ? Pd(graph.engine(), a_desc, b_desc, plain_desc(bias_dims), dst_desc, attributes)
                        : Pd(graph.engine(), a_desc, b_desc, dst_desc, attributes);
      };
  auto make_pd = [&](const memory::desc& a_desc, const memory::desc& b_desc) {
    return make_pd_with(a_desc, b_desc, attr);
  };
  bool a_as_stored = !a_strided.is_zero() && a_strided != a_plain;
  bool b_as_stored = !b_strided.is_zero() && b_strided != b_plain;
  Pd pd = make_pd(a_plain, b_plain);
  // oneDNN 3.13.1's AVX2 brgemm matmul takes few post-op operand broadcasts together (a row operand
  // [.., M, 1] with any other, a column operand [1, 1, N] in 3-D): otherwise it falls back to its
  // reference kernel, hundreds of times slower than the post-ops run one by one after the product.
  // A GELU it fuses on AVX2 costs more than a pass after it (fused_activation_is_slow()).
  const bool has_slow_gelu = std::any_of(post_ops.entries.begin(), post_ops.entries.end(), [](const auto& entry) {
    return !entry.binary && fused_activation_is_slow(dnnl::primitive::kind::matmul, entry.alg);
  });
  bool unfused = false;
  if (!post_ops.entries.empty() && (is_reference_kernel(pd) || has_slow_gelu)) {
    dnnl::primitive_attr bare = attr_with(dnnl::post_ops());
    kernel_quantization.apply(bare);
    const Pd product = make_pd_with(a_plain, b_plain, bare);
    if (!is_reference_kernel(product)) {
      attr = bare;
      pd = product;
      unfused = true;
    }
  }
  const bool plain_linear = rank == 2 && graph.dims(a).size() == 2 && !fold_rows && type == DataType::f32 &&
                            !emulated && kernel_quantization.empty() && !unfused && graph.is_constant(b) &&
                            !graph.sizes_vary() && post_ops.operands.empty() && bias_per_column;
  if (plain_linear && graph.value(output).layout != Layout::Plain && transposes_linear(m, k, n, pd) &&
      add_transposed_linear(step, graph, b_view, post_ops, pd)) {
    return;
  }
  const bool streamed = graph.constant_bytes() > kStreamedWeightBytes && rows <= kSmallRows;
  const bool avx2_f32 = host_row_isa() == RowIsa::avx2 && b_type == DataType::f32;
  if ((streamed || avx2_f32) && !graph.sizes_vary() && graph.is_constant(b) && one_weight_matrix &&
      kernel_quantization.empty()) {
    pd = with_narrow_weights(pd, b_dims, b_type, avx2_f32 || rows <= 2, [&](const memory::desc& weights) {
      return make_pd(a_plain, weights);
    });
  }
  if (a_as_stored || b_as_stored) {
    // Only when the kernel stays the same: oneDNN 3.2's brgemm matmul takes a permuted src but not
    // every permuted weights layout, and its fallbacks (gemm:jit, ref) cost more than the copy.
    const Pd in_place = make_pd(a_as_stored ? a_strided : a_plain, b_as_stored ? b_strided : b_plain);
    if (std::string(in_place.impl_info_str()) == pd.impl_info_str()) {
      pd = in_place;
    } else {
      a_as_stored = b_as_stored = false;
    }
  }

  ArgList args;
  if (emulated && !quantization.of(DNNL_ARG_SRC).empty()) {
    const BufferId source = operand(graph, a, a_dims, plain_desc(a_dims, graph.data_type(a)));
    args.emplace_back(DNNL_ARG_SRC, dequantized(graph, source, pd.src_desc(), quantization));
  } else {
    args.emplace_back(
        DNNL_ARG_SRC, a_as_stored ? graph.alias(graph.buffer(a), a_strided) : operand(graph, a, a_dims, pd.src_desc()));
  }
  if (emulated) {
    args.emplace_back(
        DNNL_ARG_WEIGHTS, dequantized_weights(graph, b, b_view, pd.weights_desc(), quantization, weights_mask));
  } else {
    args.emplace_back(
        DNNL_ARG_WEIGHTS,
        b_as_stored ? graph.alias(graph.buffer(b), b_strided) : graph.input_view(b, b_view, pd.weights_desc()));
  }
  if (has_bias) {
    args.emplace_back(DNNL_ARG_BIAS, operand(graph, step.inputs[2], bias_dims, pd.bias_desc()));
  }
  add_post_op_args(post_ops, pd, graph, args);
  kernel_quantization.add_args(args);
  BufferId quantized_result = kNoBuffer;
  if (quantizes_result) {
    quantized_result = graph.scratch(pd.dst_desc());
    args.emplace_back(DNNL_ARG_DST, quantized_result);
  } else if (fold_rows) {
    const memory::desc result = plain_desc(dst_value, pd.dst_desc().get_data_type());
    args.emplace_back(DNNL_ARG_DST, graph.alias(graph.define(step.outputs[0], result), pd.dst_desc()));
  } else {
    args.emplace_back(DNNL_ARG_DST, graph.define(step.outputs[0], pd.dst_desc()));
  }
  if (unfused) {
    graph.add_primitive(dnnl::matmul(pd), pd, args);
    add_post_ops_in_place(graph, post_ops, args);
  } else {
    add_post_op_primitive(graph, post_ops, {dnnl::matmul(pd), pd}, args, [&](const dnnl::post_ops& ops) {
      dnnl::primitive_attr exact = attr_with(ops);
      kernel_quantization.apply(exact);
      const Pd without_clamps = make_pd_with(pd.src_desc(), pd.weights_desc(), exact);
      return BuiltPrimitive{dnnl::matmul(without_clamps), without_clamps};
    });
  }
  if (quantizes_result) {
    add_quantizing_reorder(
        graph, quantized_result, graph.define(output, graph.plain(output)), quantization.of(DNNL_ARG_DST));
  }
}

} // namespace executorch::backends::onednn
