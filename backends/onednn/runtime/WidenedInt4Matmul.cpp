// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
#include "WidenedInt4Matmul.h"

#include <algorithm>
#include <atomic>
#include <exception>

#include <executorch/runtime/platform/log.h>
#include <oneapi/dnnl/dnnl_threadpool.h>

#include "Threading.h"

namespace executorch::backends::onednn {
namespace {

void point(const dnnl::memory& memory, const void* data) {
  memory.set_data_handle(const_cast<void*>(data));
}

} // namespace

std::shared_ptr<WidenedInt4Primitives> make_widened_int4_primitives(
    const dnnl::engine& engine, const WidenedInt4Shape& wanted, bool bias, int threads) {
  using Prim = WidenedInt4Primitives;
  using dnnl::memory;
  constexpr size_t kBlockBytes = 512 * 1024;
  auto primitives = std::make_shared<Prim>();
  WidenedInt4Shape& shape = primitives->shape;
  shape = wanted;
  const size_t slots_wanted = static_cast<size_t>(std::max(threads, 1));
  const size_t per_thread = ((shape.n + slots_wanted - 1) / slots_wanted + 15) / 16 * 16;
  shape.columns = std::min({std::max<size_t>(16, kBlockBytes / shape.k / 16 * 16), per_thread, shape.n});
  const auto rows = static_cast<memory::dim>(shape.rows);
  const auto k = static_cast<memory::dim>(shape.k);
  const memory::desc src({rows, k}, memory::data_type::u8, memory::format_tag::ab);
  const memory::desc row_scales({rows}, memory::data_type::f32, memory::format_tag::a);
  primitives->bias = bias;
  // One thread's matmuls: oneDNN sizes the kernels it creates for the concurrency set on this thread.
  int concurrency = 1;
  dnnl_threadpool_interop_get_max_concurrency(&concurrency);
  dnnl_threadpool_interop_set_max_concurrency(1);
  std::vector<memory::desc> descs[2];
  try {
    const size_t last = shape.n % shape.columns;
    for (int b = 0; b < 2; ++b) {
      Prim::Block& block = b == 0 ? primitives->full : primitives->last;
      block.columns = b == 0 ? shape.columns : last;
      if (block.columns == 0) {
        continue;
      }
      const auto columns = static_cast<memory::dim>(block.columns);
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      attr.set_scales(DNNL_ARG_SRC, (1 << 0) | (1 << 1), {1, k}, memory::data_type::f32);
      attr.set_scales_mask(DNNL_ARG_WEIGHTS, 1 << 1);
      const memory::desc weights({k, columns}, memory::data_type::s8, memory::format_tag::ba);
      const memory::desc bias_desc({1, columns}, memory::data_type::f32, memory::format_tag::ab);
      const memory::desc dst(
          {rows, columns}, memory::data_type::f32, memory::dims{static_cast<memory::dim>(shape.n), 1});
      const dnnl::matmul::primitive_desc pd =
          bias ? dnnl::matmul::primitive_desc(engine, src, weights, bias_desc, dst, attr)
               : dnnl::matmul::primitive_desc(engine, src, weights, dst, attr);
      block.matmul = dnnl::matmul(pd);
      block.scratchpad_bytes = pd.scratchpad_desc().get_size();
      descs[b] = {
          src,
          weights,
          bias_desc,
          row_scales,
          memory::desc({columns}, memory::data_type::f32, memory::format_tag::a),
          dst,
          pd.scratchpad_desc()};
    }
  } catch (...) {
    dnnl_threadpool_interop_set_max_concurrency(concurrency);
    throw;
  }
  dnnl_threadpool_interop_set_max_concurrency(concurrency);
  const size_t scratchpad = std::max(primitives->full.scratchpad_bytes, primitives->last.scratchpad_bytes);
  shape.slot_bytes = shape.block_weight_bytes() + (scratchpad + 63) / 64 * 64;
  primitives->slots.resize(std::min(slots_wanted, shape.blocks()));
  for (Prim::Slot& slot : primitives->slots) {
    slot.stream = dnnl::stream(engine); // without a pool: the thread that runs the slot, alone
    for (int b = 0; b < 2; ++b) {
      for (const memory::desc& desc : descs[b]) {
        slot.args[b].push_back(desc.get_size() > 0 ? memory(desc, engine, nullptr) : memory());
      }
    }
  }
  return primitives;
}

size_t widened_int4_scratch_bytes(const WidenedInt4Primitives& primitives) {
  return primitives.slots.size() * primitives.shape.slot_bytes;
}

runtime::Error widened_int4_matmul(const WidenedInt4Primitives& primitives, const WidenedInt4Operands& operands) {
  using Prim = WidenedInt4Primitives;
  const WidenedInt4Shape& shape = primitives.shape;
  const size_t slots = primitives.slots.size();
  const size_t blocks = shape.blocks();
  std::atomic<bool> failed{false};
  parallel_chunks(slots, 1, [&](size_t first_slot, size_t end_slot) {
    for (size_t s = first_slot; s < end_slot && !failed.load(std::memory_order_relaxed); ++s) {
      const Prim::Slot& slot = primitives.slots[s];
      uint8_t* scratch = operands.scratch + s * shape.slot_bytes;
      auto* block_weights = reinterpret_cast<int8_t*>(scratch);
      try {
        for (size_t b = s * blocks / slots; b < (s + 1) * blocks / slots; ++b) {
          const size_t column = b * shape.columns;
          const bool full = column + shape.columns <= shape.n;
          const Prim::Block& block = full ? primitives.full : primitives.last;
          const std::vector<dnnl::memory>& args = slot.args[full ? 0 : 1];
          widen_int4_rows(
              shape,
              operands.weights,
              operands.scales,
              operands.column_scales,
              column,
              column + block.columns,
              block_weights);
          point(args[Prim::kSrc], operands.rows);
          point(args[Prim::kWeights], block_weights);
          point(args[Prim::kSrcScales], operands.row_scales);
          point(args[Prim::kWeightScales], operands.column_scales + column);
          point(args[Prim::kDst], operands.dst + column);
          dnnl_exec_arg_t exec_args[Prim::kArgCount] = {
              {DNNL_ARG_SRC, args[Prim::kSrc].get()},
              {DNNL_ARG_WEIGHTS, args[Prim::kWeights].get()},
              {DNNL_ARG_ATTR_SCALES | DNNL_ARG_SRC, args[Prim::kSrcScales].get()},
              {DNNL_ARG_ATTR_SCALES | DNNL_ARG_WEIGHTS, args[Prim::kWeightScales].get()},
              {DNNL_ARG_DST, args[Prim::kDst].get()}};
          int count = 5;
          if (primitives.bias) {
            point(args[Prim::kBias], operands.bias + column);
            exec_args[count++] = {DNNL_ARG_BIAS, args[Prim::kBias].get()};
          }
          if (block.scratchpad_bytes > 0) {
            point(args[Prim::kScratchpad], scratch + shape.block_weight_bytes());
            exec_args[count++] = {DNNL_ARG_SCRATCHPAD, args[Prim::kScratchpad].get()};
          }
          const dnnl_status_t status = dnnl_primitive_execute(block.matmul.get(), slot.stream.get(), count, exec_args);
          if (status != dnnl_success) {
            ET_LOG(
                Error,
                "OneDnnBackend: the widened int4 matmul of block %zu failed with status %d",
                b,
                static_cast<int>(status));
            failed.store(true);
            return;
          }
        }
      } catch (const std::exception& error) {
        ET_LOG(Error, "OneDnnBackend: the widened int4 matmul failed: %s", error.what());
        failed.store(true);
      }
    }
  });
  return failed.load() ? runtime::Error::Internal : runtime::Error::Ok;
}

} // namespace executorch::backends::onednn
