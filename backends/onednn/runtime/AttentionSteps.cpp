// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// ATTENTION: out = softmax(q kᵀ · scale + mask) v, PyTorch's scaled_dot_product_attention. Query rows
// run in blocks, each a matmul into fp32 scores, the host softmax (mask, causality and the fp32
// exponentials there) and a matmul by the values, so that the scores in memory are one block's:
// batch x heads x block rows x keys, at most kScoreBytes unless one row alone is larger. A causal
// block reads only the keys its rows may see. Grouped-query heads read their shared keys and values
// through a broadcast dim instead of copies.
// CACHED_ATTENTION: ExecuTorch's llama::custom_sdpa over a KV cache, one host loop (CachedAttention.h)
// that reads its start position at run time.
#include <algorithm>
#include <cmath>

#include "Dims.h"
#include "StepBuilders.h"

namespace executorch::backends::onednn {
namespace {

constexpr size_t kScoreBytes = size_t{4} << 20;
constexpr int64_t kBlockAlignment = 16; // rows per block: a multiple of the kernels' row tile

// [B, H, L, E] (a 3-D operand [B, L, E] has one head).
memory::dims with_heads(const memory::dims& dims) {
  return dims.size() == 3 ? memory::dims{dims[0], 1, dims[1], dims[2]} : dims;
}

memory::desc strided(const memory::dims& dims, const memory::dims& strides, DataType type) {
  return memory::desc(dims, type, strides);
}

size_t byte_size(DataType type) {
  return memory::data_type_size(type);
}

bool holds_one_value(const memory::dims& dims) {
  return std::all_of(dims.begin(), dims.end(), [](int64_t d) { return d == 1; });
}

} // namespace

void build_attention(const StepRecord& step, GraphBuilder& graph) {
  const uint32_t q = step.inputs[0], k = step.inputs[1], v = step.inputs[2], out = step.outputs[0];
  const size_t rank = graph.dims(q).size();
  ODNN_CHECK(
      (rank == 3 || rank == 4) && graph.dims(k).size() == rank && graph.dims(v).size() == rank &&
          graph.dims(out).size() == rank,
      "q %s, k %s, v %s and out %s must all have rank 3 or all rank 4",
      dims_string(graph.dims(q)).c_str(),
      dims_string(graph.dims(k)).c_str(),
      dims_string(graph.dims(v)).c_str(),
      dims_string(graph.dims(out)).c_str());
  const memory::dims qd = with_heads(graph.dims(q)), kd = with_heads(graph.dims(k));
  const memory::dims vd = with_heads(graph.dims(v)), od = with_heads(graph.dims(out));
  const bool keys_transposed = step.has("keys_transposed") && step.int_scalar("keys_transposed") != 0;
  const int64_t batch = qd[0], heads = qd[1], queries = qd[2], width = qd[3];
  const int64_t kv_heads = kd[1], value_width = vd[3];
  const int64_t keys = keys_transposed ? kd[3] : kd[2];
  ODNN_CHECK(
      kv_heads > 0 && heads % kv_heads == 0 && keys > 0 && width > 0 && kd[0] == batch &&
          kd[keys_transposed ? 2 : 3] == width && vd[0] == batch && vd[1] == kv_heads && vd[2] == keys &&
          od == memory::dims({batch, heads, queries, value_width}),
      "q %s, k %s, v %s and out %s are not an attention (heads a multiple of key heads)",
      dims_string(graph.dims(q)).c_str(),
      dims_string(graph.dims(k)).c_str(),
      dims_string(graph.dims(v)).c_str(),
      dims_string(graph.dims(out)).c_str());
  const int64_t group = heads / kv_heads;
  const bool causal = step.int_scalar("causal") != 0;
  const double scale = step.float_scalar("scale");
  ODNN_CHECK(std::isfinite(scale), "scale %g must be finite", scale);

  SoftmaxRows rows;
  rows.isa = host_row_isa();
  // PyTorch's decomposed scaled_dot_product_attention zeroes a row masked entirely; attention
  // written out with a plain softmax gives NaN there.
  rows.zero_fully_masked = step.has("zero_fully_masked_rows") && step.int_scalar("zero_fully_masked_rows") != 0;
  rows.causal = causal;
  rows.kv_heads = static_cast<size_t>(kv_heads);
  rows.heads_per_kv = static_cast<size_t>(group);
  BufferId mask = kNoBuffer;
  if (step.has_input(3)) {
    ODNN_CHECK(!causal, "a mask and causal together");
    memory::dims md = graph.dims(step.inputs[3]);
    while (md.size() > rank && md.front() == 1) {
      md.erase(md.begin()); // leading 1s broadcast
    }
    ODNN_CHECK(
        md.size() <= rank && !md.empty() && md.back() == keys,
        "mask %s: at most q's rank %zu dims (besides leading 1s), the last one the key length %ld",
        dims_string(graph.dims(step.inputs[3])).c_str(),
        rank,
        static_cast<long>(keys));
    const memory::dims padded = with_heads(left_pad(md, rank));
    const memory::dims full = {batch, heads, queries, keys};
    for (size_t d = 0; d < 3; ++d) {
      ODNN_CHECK(
          padded[d] == 1 || padded[d] == full[d],
          "mask %s does not broadcast to %s",
          dims_string(md).c_str(),
          dims_string(full).c_str());
    }
    const auto stride = [&](size_t d, int64_t elements) {
      return padded[d] == 1 ? size_t{0} : static_cast<size_t>(elements);
    };
    rows.has_mask = true;
    rows.mask_query_stride = stride(2, keys);
    rows.mask_head_stride = stride(1, padded[2] * keys);
    rows.mask_batch_stride = stride(0, padded[1] * padded[2] * keys);
    mask = graph.plain_input(step.inputs[3], DataType::f32);
  }

  // Scores in f32 whatever the operands' type; probabilities in the operands' type for the matmul.
  const DataType type = [&] {
    if (graph.compute_in_f32()) {
      return DataType::f32;
    }
    return graph.involves_bf16(step) ? DataType::bf16 : DataType::f32;
  }();
  const DataType out_type = graph.compute_in_f32() || graph.data_type(out) == DataType::f32 ? DataType::f32 : type;
  const BufferId q_buffer = graph.plain_input(q, type);
  const BufferId k_buffer = graph.plain_input(k, type);
  const BufferId v_buffer = graph.plain_input(v, type);
  const BufferId out_buffer = graph.define(out, plain_desc(graph.dims(out), out_type));

  const int64_t row_bytes = batch * heads * keys * 4;
  int64_t block = std::clamp<int64_t>(static_cast<int64_t>(kScoreBytes) / std::max<int64_t>(row_bytes, 1), 1, queries);
  if (block < queries && block > kBlockAlignment) {
    block -= block % kBlockAlignment;
  }
  const memory::dims most = {batch, kv_heads, group, block, keys};
  const BufferId scores = graph.scratch(plain_desc(most, DataType::f32));
  const BufferId probabilities = type == DataType::f32 ? scores : graph.scratch(plain_desc(most, type));
  const size_t element = byte_size(type), out_element = byte_size(out_type);

  for (int64_t first = 0; first < queries; first += block) {
    const int64_t count = std::min(block, queries - first);
    const int64_t seen = causal ? std::min(keys, first + count) : keys;
    // q rows [first, first + count) as [B, Hk, G, count, E]; keys as [B, Hk, 1, E, seen] (kᵀ, read
    // in place whichever way k is stored, the same for every query head of a group); values as
    // [B, Hk, 1, seen, Ev].
    const memory::desc q_rows = strided(
        {batch, kv_heads, group, count, width},
        {heads * queries * width, group * queries * width, queries * width, width, 1},
        type);
    const memory::dims k_strides = keys_transposed
                                       ? memory::dims{kv_heads * keys * width, keys * width, keys * width, keys, 1}
                                       : memory::dims{kv_heads * keys * width, keys * width, keys * width, 1, width};
    const memory::desc k_seen = strided({batch, kv_heads, 1, width, seen}, k_strides, type);
    const memory::desc v_seen = strided(
        {batch, kv_heads, 1, seen, value_width},
        {kv_heads * keys * value_width, keys * value_width, keys * value_width, value_width, 1},
        type);
    const memory::desc out_rows = strided(
        {batch, kv_heads, group, count, value_width},
        {heads * queries * value_width, group * queries * value_width, queries * value_width, value_width, 1},
        out_type);
    const memory::dims block_dims = {batch, kv_heads, group, count, seen};
    const BufferId block_scores = graph.alias(scores, plain_desc(block_dims, DataType::f32));
    const BufferId block_probabilities =
        type == DataType::f32 ? block_scores : graph.alias(probabilities, plain_desc(block_dims, type));

    dnnl::post_ops scaling;
    scaling.append_eltwise(dnnl::algorithm::eltwise_linear, static_cast<float>(scale), 0.0f);
    dnnl::primitive_attr attr = GraphBuilder::default_attr();
    attr.set_post_ops(scaling);
    const dnnl::matmul::primitive_desc score_pd(
        graph.engine(), q_rows, k_seen, plain_desc(block_dims, DataType::f32), attr);
    graph.add_primitive(
        dnnl::matmul(score_pd),
        score_pd,
        {{DNNL_ARG_SRC, graph.alias(q_buffer, q_rows, static_cast<size_t>(first * width) * element)},
         {DNNL_ARG_WEIGHTS, graph.alias(k_buffer, k_seen)},
         {DNNL_ARG_DST, block_scores}});

    SoftmaxRows block_rows = rows;
    block_rows.rows = static_cast<size_t>(batch * heads * count);
    block_rows.extent = static_cast<size_t>(seen);
    block_rows.block_rows = static_cast<size_t>(count);
    block_rows.first_query = static_cast<size_t>(first);
    block_rows.dst_bf16 = type == DataType::bf16;
    HostLoop loop;
    loop.kind = HostLoop::Kind::Softmax;
    loop.softmax = block_rows;
    graph.add_host_loop(loop, block_probabilities, block_scores, mask);

    const dnnl::matmul::primitive_desc value_pd(
        graph.engine(), plain_desc(block_dims, type), v_seen, out_rows, GraphBuilder::default_attr());
    graph.add_primitive(
        dnnl::matmul(value_pd),
        value_pd,
        {{DNNL_ARG_SRC, block_probabilities},
         {DNNL_ARG_WEIGHTS, graph.alias(v_buffer, v_seen)},
         {DNNL_ARG_DST, graph.alias(out_buffer, out_rows, static_cast<size_t>(first * value_width) * out_element)}});
  }
}

void build_cached_attention(const StepRecord& step, GraphBuilder& graph) {
  const uint32_t q = step.inputs[0], k = step.inputs[1], v = step.inputs[2], start = step.inputs[3];
  const uint32_t out = step.outputs[0];
  const memory::dims qd = graph.dims(q), kd = graph.dims(k), vd = graph.dims(v), od = graph.dims(out);
  ODNN_CHECK(
      qd.size() == 4 && kd.size() == 4 && vd.size() == 4 && kd[0] == qd[0] && vd[0] == qd[0] && kd[1] == vd[1] &&
          kd[2] == vd[2] && kd[2] > 0 && qd[2] % kd[2] == 0 && kd[3] == qd[3] &&
          od == memory::dims({qd[0], qd[1], qd[2], vd[3]}),
      "q %s, key cache %s, value cache %s and out %s are not a cached attention [B, S, H, D] over [B, L, Hkv, D] "
      "(H a multiple of Hkv)",
      dims_string(qd).c_str(),
      dims_string(kd).c_str(),
      dims_string(vd).c_str(),
      dims_string(od).c_str());
  ODNN_CHECK(
      qd[3] > 0 && vd[3] > 0 && static_cast<size_t>(vd[3]) <= kMaxAttentionValueWidth,
      "value width %ld: the cached attention takes 1 to %u",
      static_cast<long>(vd[3]),
      kMaxAttentionValueWidth);
  ODNN_CHECK(
      static_cast<DType>(graph.value(start).dtype) == DType::S64 && holds_one_value(graph.dims(start)),
      "the start position (value %u) must be one S64 value",
      start);
  ODNN_CHECK(
      graph.data_type(k) == DataType::f32 && graph.data_type(v) == DataType::f32,
      "the key and value caches must be F32");
  const double scale = step.float_scalar("scale");
  ODNN_CHECK(std::isfinite(scale), "scale %g must be finite", scale);

  HostLoop loop;
  loop.kind = HostLoop::Kind::CachedAttention;
  CachedAttentionShape& shape = loop.cached_attention;
  shape.isa = host_row_isa();
  shape.batch = static_cast<size_t>(qd[0]);
  shape.queries = static_cast<size_t>(qd[1]);
  shape.heads = static_cast<size_t>(qd[2]);
  shape.kv_heads = static_cast<size_t>(kd[2]);
  shape.cache_length = static_cast<size_t>(kd[1]);
  shape.width = static_cast<size_t>(qd[3]);
  shape.value_width = static_cast<size_t>(vd[3]);
  shape.scale = static_cast<float>(scale);
  shape.causal = step.int_scalar("causal") != 0;
  const BufferId target = graph.define(out, plain_desc(od, DataType::f32));
  graph.add_host_loop(
      loop,
      target,
      graph.plain_input(q, DataType::f32),
      graph.plain_input(start),
      {graph.plain_input(k, DataType::f32), graph.plain_input(v, DataType::f32)});
}

} // namespace executorch::backends::onednn
