// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// One builder per step kind: each reads its step's attributes, creates the oneDNN primitive
// descriptor, asks the GraphBuilder for its inputs in the layouts the primitive wants, and records
// the primitive. build_step() dispatches through a table indexed by StepKind.
#pragma once

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "GraphBuilder.h"
#include "InitError.h"
#include "Payload.h"

namespace executorch::backends::onednn {

void build_step(const StepRecord& step, GraphBuilder& graph);

void build_convolution(const StepRecord& step, GraphBuilder& graph);
void build_deconvolution(const StepRecord& step, GraphBuilder& graph);
void build_matmul(const StepRecord& step, GraphBuilder& graph);
void build_eltwise(const StepRecord& step, GraphBuilder& graph);
void build_binary(const StepRecord& step, GraphBuilder& graph);
void build_pooling(const StepRecord& step, GraphBuilder& graph);
void build_reduction(const StepRecord& step, GraphBuilder& graph);
void build_batch_norm(const StepRecord& step, GraphBuilder& graph);
void build_layer_norm(const StepRecord& step, GraphBuilder& graph);
void build_softmax(const StepRecord& step, GraphBuilder& graph);
void build_resampling(const StepRecord& step, GraphBuilder& graph);
void build_reorder(const StepRecord& step, GraphBuilder& graph);
void build_reshape(const StepRecord& step, GraphBuilder& graph);
void build_concat(const StepRecord& step, GraphBuilder& graph);
void build_pad(const StepRecord& step, GraphBuilder& graph);
void build_quantize_rows(const StepRecord& step, GraphBuilder& graph);
void build_attention(const StepRecord& step, GraphBuilder& graph);
void build_cached_attention(const StepRecord& step, GraphBuilder& graph);
void build_rms_norm(const StepRecord& step, GraphBuilder& graph);
void build_rotary(const StepRecord& step, GraphBuilder& graph);
void build_adaptive_pooling(const StepRecord& step, GraphBuilder& graph);
void build_arg_reduction(const StepRecord& step, GraphBuilder& graph);
void build_gather(const StepRecord& step, GraphBuilder& graph);
void build_host_elementwise(const StepRecord& step, GraphBuilder& graph);
void build_index_put(const StepRecord& step, GraphBuilder& graph);
void build_compressed_matmul(const StepRecord& step, GraphBuilder& graph);

// The backend option "int4_products" (int, read when a program is loaded): how several rows that a
// program quantizes to int8 (8da4w's prompt) multiply int4 weights on CPUs with AMX. `fast` runs AMX's
// int8 unit on the weights widened to s8 on a grid per column (each weight within 0.502 of its
// column's step, 1/16 of the int4 step of the column's widest group: WidenedInt4Matmul.h) where K is a
// multiple of 64 and groups hold 32n values, else AMX's bf16 unit on the quantized rows less their zero
// points (exact in bf16) and the weights times their group scales rounded to bf16 (2^-9 at most);
// `exact` sums the int8 products in int32, as torchao's reference and the one-row kernels do, at about
// 0.3-0.5x the widened speed at group 32. Without AMX every row is exact.
inline constexpr char kInt4ProductsOption[] = "int4_products";
enum class Int4Products : int { fast = 0, exact = 1 };
void set_int4_products(Int4Products products) noexcept;
Int4Products int4_products() noexcept;

// The type a convolution or matmul computes in: its int8 src's (f32 where oneDNN's int8 products would
// saturate), else bf16 when its activation or result is bf16 or the step asks for it, else f32.
DataType compute_type(const StepRecord& step, GraphBuilder& graph, uint32_t src);

// ---- helpers shared by the builders ----

// The post-ops of a step, with the values feeding its binary post-ops.
struct PostOps {
  struct Operand {
    int post_op_index;
    uint32_t value;
    memory::dims dims; // left-padded to dst rank
  };
  struct Entry {
    bool binary;
    // relu (negative slope 0) or clip, which oneDNN (3.2, 3.13.1) computes with max/min, turning a NaN into the
    // bound; alpha and beta are then the lower and upper bounds.
    bool clamp;
    dnnl::algorithm alg;
    float alpha;
    float beta;
  };
  dnnl::post_ops ops;
  std::vector<Operand> operands;
  std::vector<Entry> entries;   // one per post-op, in order
  size_t first_clamp = 0;       // entries.size() when none
  dnnl::post_ops before_clamps; // the chain up to the first clamp
  // The last kInt8GridEntries entries round to an int8 grid (append_int8_rounding()): one host loop
  // where the chain runs in place.
  static constexpr size_t kInt8GridEntries = 4;
  bool ends_on_int8_grid = false;
  HostLoop::Int8Grid int8_grid;
};

// Reads `post_ops`/`post_op_params`; binary operands come from inputs[first_operand_slot...].
// With `fold_rows`, operands are described as fold_into_rows() of their dims (dst is folded too).
PostOps read_post_ops(
    const StepRecord& step,
    GraphBuilder& graph,
    size_t first_operand_slot,
    const memory::dims& dst_dims,
    bool fold_rows = false);
// What quantizing to `type` (u8 or s8) by the step's dst scale and zero point and dequantizing again
// computes (HostLoop::Int8Grid), for an int8 value held in f32 (GraphBuilder::holds_dequantized_int8()).
HostLoop::Int8Grid dst_int8_grid(const StepRecord& step, DataType type);
// Appends `grid` as four eltwise post-ops (linear, round, clip, linear).
void append_int8_rounding(PostOps& post_ops, const HostLoop::Int8Grid& grid);
// [b..., m, n] -> [1, b... * m, n]: the same plain bytes, every dim but the last folded into rows.
memory::dims fold_into_rows(const memory::dims& dims);

// Up to this many values an elementwise step (a binary of same-shaped operands, the sigmoid family)
// runs on the calling thread: oneDNN's primitive costs 5-18 us a call, more than the values (a
// squeeze-and-excitation gate; a Llama decode step's residual adds, gate product and SiLU, 2048-14336
// values).
inline constexpr size_t kHostElementwiseValues = 16384;

// Whether eltwise post-op `alg` of a `product` (matmul or convolution) should run after it rather than
// fused into it. Only where AVX2 is the widest vector: GELU after a matmul, which oneDNN 3.13.1's AVX2
// matmul fused at several times the cost of its standalone eltwise primitive (or of the host's tanh
// GELU); swish after a convolution, which its AVX2 convolutions fuse at twice the cost of the host's
// swish over the result. See RowKernels.h.
bool fused_activation_is_slow(dnnl::primitive::kind product, dnnl::algorithm alg);
// The host kernel (RowKernels.h) for eltwise `alg` on `values` values of `type` where it beats oneDNN's
// primitive: f32 or bf16, up to kHostElementwiseValues values, the sigmoid family and, where AVX2 is
// the widest vector, the erf GELU; there also swish and the tanh GELU at any size (oneDNN's AVX2
// kernels for them are slow).
std::optional<Activation> host_activation(dnnl::algorithm alg, DataType type, size_t values);
// Its host loop on values of `type`, with oneDNN's alpha and beta.
HostLoop activation_loop(Activation activation, DataType type, float alpha, float beta);

// Whether fold_into_rows keeps `dims` (left-padded to dst's rank) a valid broadcast of folded dst:
// its leading dims are dst's or all 1.
bool folds_into_rows(const memory::dims& dims, const memory::dims& dst);
// Appends the binary post-op operands in the layouts the primitive descriptor resolved.
void add_post_op_args(const PostOps& post_ops, const dnnl::primitive_desc_base& pd, GraphBuilder& graph, ArgList& args);
// The same, plain, for post-ops a host step's result gets from add_post_ops_in_place.
void add_plain_post_op_args(const PostOps& post_ops, GraphBuilder& graph, ArgList& args);
// The default attributes with the post-ops set.
dnnl::primitive_attr attr_with(const dnnl::post_ops& ops);
inline dnnl::primitive_attr attr_with(const PostOps& post_ops) {
  return attr_with(post_ops.ops);
}

// A primitive and its descriptor (for the scratchpad size).
using BuiltPrimitive = std::pair<dnnl::primitive, dnnl::primitive_desc>;
// The buffer `args` passes as argument `arg`, or kNoBuffer.
BufferId arg_of(const ArgList& args, int arg);
// The same, for an argument a step must have (an internal error otherwise).
BufferId required_arg(const ArgList& args, int arg);
// Records `built` with `args`. When its post-ops hold a clamp, guards it: when a graph input holds a
// NaN or an infinity, the computation up to the first clamp (`remake` of post_ops.before_clamps, with
// the layouts `built` resolved) runs instead, then the rest of the chain step by step in place, the
// clamps on the host, keeping a NaN. `exact_args`, when given, says that `built`'s kernel itself
// loses NaN and infinities: the step is guarded even without a clamp, and `remake` builds a kernel
// that keeps them, run with `exact_args`.
void add_post_op_primitive(
    GraphBuilder& graph,
    const PostOps& post_ops,
    const BuiltPrimitive& built,
    const ArgList& args,
    const std::function<BuiltPrimitive(const dnnl::post_ops&)>& remake,
    const ArgList* exact_args = nullptr);
// `fast`: steps computing what `remake(post_ops.ops)` with `args` computes, by means that may lose NaN
// and infinities (Winograd). They run unless a graph input or a constant holds one; then `remake`'s
// kernel runs instead, its clamps guarded as add_post_op_primitive() guards them.
void add_guarded_steps(
    GraphBuilder& graph,
    const PostOps& post_ops,
    const std::function<void()>& fast,
    const ArgList& args,
    const std::function<BuiltPrimitive(const dnnl::post_ops&)>& remake);
// post_ops.entries[first...] applied one by one in place on the DST of `args` (whose post-op
// operands they read): clamps on the host, keeping a NaN, the others as primitives.
void add_post_ops_in_place(GraphBuilder& graph, const PostOps& post_ops, const ArgList& args, size_t first = 0);
// oneDNN's reference kernels are its correct-but-slow fallbacks (100-1000x slower than a JIT one).
bool is_reference_kernel(const dnnl::primitive_desc_base& pd);

// TransposedLinear.cpp: x [rows, k] times constant f32 weights [k, n] computed as (W x^T)^T, where
// that was measured faster than `chosen`, oneDNN's kernel for the plain product.
bool transposes_linear(int64_t rows, int64_t k, int64_t n, const dnnl::primitive_desc_base& chosen);
// Records the transposed product of a linear step (weights `weights_view` [k, n], an optional bias
// [n] or [1, n], eltwise post-ops only); its result is defined [rows, n] with strides [1, rows].
// False, recording nothing, when oneDNN does not give it `chosen`'s kernel.
bool add_transposed_linear(
    const StepRecord& step,
    GraphBuilder& graph,
    const memory::desc& weights_view,
    const PostOps& post_ops,
    const dnnl::primitive_desc_base& chosen);

// Static int8: the scales and zero points a step reads at run time, from its attributes
// `src_scale`, `src_zero_point`, `weight_scales` (one per output channel), `dst_scale` and
// `dst_zero_point`. oneDNN computes dst = po(src_scale * weight_scale * (src - src_zp) x weights
// [+ bias]) / dst_scale + dst_zp, the same convention as PyTorch's quantize/dequantize.
struct Quantization {
  struct Arg {
    int arg; // DNNL_ARG_ATTR_SCALES or DNNL_ARG_ATTR_ZERO_POINTS, or-ed with the argument
    int mask;
    BufferId buffer;
  };
  std::vector<Arg> args;
  bool empty() const {
    return args.empty();
  }
  void apply(dnnl::primitive_attr& attr) const;
  void add_args(ArgList& list) const;
  // The scales and zero points of one argument (DNNL_ARG_SRC, DNNL_ARG_WEIGHTS or DNNL_ARG_DST).
  Quantization of(int argument) const;
};
// `weights_mask`/`weight_count`: the per-channel mask and scale count of the weights (unused
// when the step has no `weight_scales`).
Quantization read_quantization(
    const StepRecord& step, GraphBuilder& graph, int weights_mask = 0, int64_t weight_count = 0);

// A reorder of `source` into `destination` through `quantization`'s src and dst scales and zero
// points: a quantize or a dequantize (FORMAT.md, "Static int8").
void add_quantizing_reorder(
    GraphBuilder& graph, BufferId source, BufferId destination, const Quantization& quantization);

inline void require_same_dims(const memory::dims& a, const memory::dims& b, const char* what) {
  ODNN_CHECK(a == b, "%s: %s and %s must be equal", what, dims_string(a).c_str(), dims_string(b).c_str());
}

inline bool is_int8(DataType type) {
  return type == DataType::u8 || type == DataType::s8;
}

// `value` read as `dims` (its own dims, or the same bytes with 1s prepended) in layout `wanted`.
BufferId operand(GraphBuilder& graph, uint32_t value, const memory::dims& dims, const memory::desc& wanted);

// The value's bytes as they are stored, when that layout is strided and in `type`: left-padded with
// 1s to the rank of `order`, then permuted by it. An empty desc otherwise.
memory::desc strided_operand(GraphBuilder& graph, uint32_t value, const std::vector<int64_t>& order, DataType type);
// Plain bytes of `physical` dims described in logical order: logical dim i = physical dim order[i].
memory::desc permuted_view(
    const memory::dims& physical, const std::vector<int64_t>& order, DataType type = DataType::f32);

// The bytes of strided `desc` in logical order: logical dim i = dim order[i] of `desc`.
memory::desc permuted(const memory::desc& desc, const std::vector<int64_t>& order);
// The bytes of strided `desc` as `dims` (same element count) when its strides allow it without a
// copy (PyTorch's view rule); an empty desc when they do not.
memory::desc reshaped(const memory::desc& desc, const memory::dims& dims);

// A spatial attribute list (one entry per spatial dim), each entry >= `minimum`.
memory::dims spatial_attr(const StepRecord& step, const char* name, size_t count, int64_t minimum);
// PyTorch dilation (1 = dense) -> oneDNN dilation (0 = dense).
memory::dims dnnl_dilation(const StepRecord& step, size_t count);

int normalize_axis(int64_t axis, size_t rank);

} // namespace executorch::backends::onednn
