// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
#include "CompiledGraph.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <limits>

#include <executorch/runtime/core/event_tracer_hooks_delegate.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>
#include <executorch/runtime/platform/log.h>

#include "GraphBuilder.h"
#include "InitError.h"
#include "Int8VectorMatrix.h"
#include "StepBuilders.h"
#include "Threading.h"

namespace executorch::backends::onednn {
namespace {

using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using runtime::Error;

TensorSpec tensor_spec(const ValueRecord& value) {
  TensorSpec spec;
  switch (static_cast<DType>(value.dtype)) {
    case DType::BF16:
      spec.type = ScalarType::BFloat16;
      break;
    case DType::S64:
      spec.type = ScalarType::Long;
      break;
    case DType::Bool:
      spec.type = ScalarType::Bool;
      break;
    default: // the payload parser lets only F32 besides these cross the border
      spec.type = ScalarType::Float;
  }
  std::vector<int32_t>& sizes = spec.sizes;
  for (int64_t dim : value.dims) {
    ODNN_CHECK(
        dim <= std::numeric_limits<int32_t>::max(),
        "graph input/output dim %lld does not fit a tensor size",
        static_cast<long long>(dim));
    sizes.push_back(static_cast<int32_t>(dim));
  }
  return spec;
}

// Formats sizes into `text` without allocating (execute() must not allocate).
template <typename Sizes>
const char* format_sizes(char (&text)[128], const Sizes& sizes) {
  size_t used = 0;
  text[0] = '\0';
  for (size_t d = 0; d < sizes.size() && used < sizeof(text); ++d) {
    const int written =
        std::snprintf(text + used, sizeof(text) - used, "%s%d", d ? ", " : "", static_cast<int>(sizes[d]));
    used += written > 0 ? static_cast<size_t>(written) : 0;
  }
  return text;
}

template <typename Sizes>
bool sizes_equal(const Tensor& tensor, const Sizes& expected) {
  const auto sizes = tensor.sizes();
  return sizes.size() == expected.size() && std::equal(sizes.begin(), sizes.end(), expected.begin());
}

bool is_contiguous_default_order(const Tensor& tensor) {
  return runtime::tensor_is_default_dim_order(tensor) && runtime::tensor_is_contiguous(tensor);
}

// Tasks in row-major order (a chunk is consecutive blocks of one tile of rows, then of the next), each
// chunk at least kProductsPerChunk products (a few microseconds) unless the whole has fewer.
void run_exact_int8_matmul(const ExactInt8MatmulShape& shape, const ExactInt8MatmulOperands& operands) {
  constexpr size_t kProductsPerChunk = size_t{1} << 20;
  const size_t blocks = (shape.n + kExactInt8Columns - 1) / kExactInt8Columns;
  const size_t row_tiles = (shape.rows + kExactInt8TileRows - 1) / kExactInt8TileRows;
  const size_t task_products = kExactInt8TileRows * kExactInt8Columns * std::max<size_t>(1, shape.k);
  parallel_chunks(
      row_tiles * blocks, std::max<size_t>(1, kProductsPerChunk / task_products), [&](size_t begin, size_t end) {
        for (size_t task = begin; task < end;) {
          const size_t row_tile = task / blocks, first = task % blocks;
          const size_t last = std::min(blocks, first + (end - task));
          const size_t row_begin = row_tile * kExactInt8TileRows;
          exact_int8_matmul(
              shape, operands, {row_begin, std::min(shape.rows, row_begin + kExactInt8TileRows), first, last});
          task += last - first;
        }
      });
}

} // namespace

// A CPU without bf16 instructions lacks some of oneDNN's bf16 kernels (convolutions, on AVX2): such a
// step is built again computing in f32, its bf16 inputs and outputs converted around it.
void build_step_or_f32(const StepRecord& step, size_t index, GraphBuilder& builder) {
  try {
    build_step(step, builder);
  } catch (const dnnl::error& error) {
    if (error.status != dnnl_unimplemented || !builder.involves_bf16(step)) {
      throw;
    }
    ET_LOG(
        Info,
        "OneDnnBackend: step %zu (%s) has no bf16 kernel on this CPU; it computes in f32",
        index,
        step_kind_name(step.kind));
    builder.set_compute_in_f32(true);
    build_step(step, builder);
    builder.set_compute_in_f32(false);
  }
  builder.finish_step(step);
}

std::unique_ptr<CompiledGraph> CompiledGraph::build(
    const Payload& payload, const runtime::NamedDataMap* named_data, SharedBlocks* shared) {
  std::unique_ptr<CompiledGraph> graph(new CompiledGraph());
  for (uint32_t id : payload.inputs) {
    graph->input_specs_.push_back(tensor_spec(payload.values[id]));
  }
  for (uint32_t id : payload.outputs) {
    graph->output_specs_.push_back(tensor_spec(payload.values[id]));
  }
  GraphBuilder builder(payload, named_data, cpu_engine(), cpu_stream(), shared);
  for (size_t index = 0; index < payload.steps.size(); ++index) {
    const StepRecord& step = payload.steps[index];
    try {
      builder.set_origin(static_cast<int64_t>(index));
      build_step_or_f32(step, index, builder);
    } catch (const InitError& error) {
      fail(error.code(), "step %zu (%s): %s", index, step_kind_name(step.kind), error.what());
    } catch (const dnnl::error& error) {
      fail(
          error.status == dnnl_unimplemented ? Error::NotSupported : Error::Internal,
          "step %zu (%s): oneDNN could not build it: %s (status %d)",
          index,
          step_kind_name(step.kind),
          error.what(),
          static_cast<int>(error.status));
    }
  }
  builder.set_origin(-1);
  builder.finish(*graph);
  return graph;
}

// Inputs must match the compiled sizes; outputs of other sizes are resized to them when possible.
Error CompiledGraph::check_argument(
    const char* role, size_t index, runtime::EValue* arg, const TensorSpec& expected, bool resize) const {
  if (arg == nullptr || !arg->isTensor()) {
    ET_LOG(Error, "OneDnnBackend: %s %zu is not a tensor", role, index);
    return Error::InvalidArgument;
  }
  Tensor& tensor = arg->toTensor();
  if (tensor.scalar_type() != expected.type) {
    ET_LOG(
        Error,
        "OneDnnBackend: %s %zu has dtype %s, expected %s",
        role,
        index,
        runtime::toString(tensor.scalar_type()),
        runtime::toString(expected.type));
    return Error::InvalidArgument;
  }
  const bool sizes_ok = sizes_equal(tensor, expected.sizes) ||
                        (resize && runtime::resize_tensor(
                                       tensor,
                                       executorch::aten::ArrayRef<executorch::aten::SizesType>(
                                           expected.sizes.data(), expected.sizes.size())) == Error::Ok);
  if (!sizes_ok) {
    char want[128];
    char got[128];
    ET_LOG(
        Error,
        "OneDnnBackend: %s %zu: expected sizes [%s], got [%s]%s",
        role,
        index,
        format_sizes(want, expected.sizes),
        format_sizes(got, tensor.sizes()),
        resize ? " and resizing failed" : "");
    return Error::InvalidArgument;
  }
  if (!is_contiguous_default_order(tensor) || tensor.const_data_ptr() == nullptr) {
    ET_LOG(Error, "OneDnnBackend: %s %zu is not contiguous in the default dim order", role, index);
    return Error::InvalidArgument;
  }
  return Error::Ok;
}

Error CompiledGraph::execute(runtime::Span<runtime::EValue*> args, runtime::EventTracer* tracer) noexcept {
  const size_t num_inputs = input_specs_.size();
  const size_t num_outputs = output_specs_.size();
  if (args.size() != num_inputs + num_outputs) {
    ET_LOG(
        Error,
        "OneDnnBackend: expected %zu arguments (%zu inputs, %zu outputs), got %zu",
        num_inputs + num_outputs,
        num_inputs,
        num_outputs,
        args.size());
    return Error::InvalidArgument;
  }
  for (size_t i = 0; i < num_inputs; ++i) {
    const Error error = check_argument("input", i, args[i], input_specs_[i], false);
    if (error != Error::Ok) {
      return error;
    }
  }
  for (size_t j = 0; j < num_outputs; ++j) {
    const Error error = check_argument("output", j, args[num_inputs + j], output_specs_[j], true);
    if (error != Error::Ok) {
      return error;
    }
  }
  const ArenaLease arena(arena_bytes_);
  if (arena_bytes_ > 0 && arena.data() == nullptr) {
    ET_LOG(Error, "OneDnnBackend: could not allocate an arena of %zu bytes", arena_bytes_);
    return Error::MemoryAllocationFailed;
  }
  try {
    if (arena.data() != bound_arena_) {
      for (const ArenaSlot& slot : arena_slots_) {
        slot.memory.set_data_handle(arena.data() + slot.offset);
      }
      bound_arena_ = arena.data();
    }
    for (const Binding& binding : bindings_) {
      auto* data = static_cast<uint8_t*>(args[binding.arg_index]->toTensor().mutable_data_ptr());
      binding.memory.set_data_handle(data + binding.offset);
    }
    // On the pool of the configured thread count. Its stream is shared by every handle, also by
    // executions on several threads at once: a CPU stream keeps no state between primitives
    // (execution is synchronous), and our primitives use user scratchpads in their handle's arena.
    const Error result = run_in_thread_pool([&]() -> Error {
      dnnl::stream& stream = cpu_stream();
      const bool exact_paths = guarded_ && needs_exact_paths(args);
      for (size_t index = 0; index < steps_.size(); ++index) {
        const PreparedStep& step = steps_[index];
        if (step.primitive == nullptr && step.host.kind == HostLoop::Kind::NonFiniteBranch) {
          index += exact_paths ? step.host.skip : 0; // to the exact path, else on to the fast one
          continue;
        }
        if (step.primitive == nullptr && step.host.kind == HostLoop::Kind::Jump) {
          index += step.host.skip; // the fast path ran: past the exact one
          continue;
        }
        const runtime::EventTracerEntry event =
            runtime::event_tracer_start_profiling_delegate(tracer, step_names_[index].c_str(), -1);
        if (step.primitive == nullptr) {
          const Error error = run_host_step(step);
          runtime::event_tracer_end_profiling_delegate(tracer, event);
          if (error != Error::Ok) {
            ET_LOG(Error, "OneDnnBackend: prepared step %zu (on the host) failed", index);
            return error;
          }
          continue;
        }
        const dnnl_status_t status =
            dnnl_primitive_execute(step.primitive, stream.get(), static_cast<int>(step.args.size()), step.args.data());
        if (tracer != nullptr) {
          stream.wait(); // the event ends when the primitive has
        }
        runtime::event_tracer_end_profiling_delegate(tracer, event);
        if (status != dnnl_success) {
          ET_LOG(
              Error, "OneDnnBackend: prepared step %zu failed with oneDNN status %d", index, static_cast<int>(status));
          return Error::Internal;
        }
      }
      stream.wait();
      return Error::Ok;
    });
    if (result != Error::Ok) {
      return result;
    }
  } catch (const dnnl::error& error) {
    ET_LOG(Error, "OneDnnBackend: execute failed: %s (status %d)", error.what(), static_cast<int>(error.status));
    return Error::Internal;
  } catch (const std::exception& error) {
    ET_LOG(Error, "OneDnnBackend: execute failed: %s", error.what());
    return Error::Internal;
  }
  return Error::Ok;
}

bool values_hold_non_finite(const void* data, size_t count, bool bf16) {
  std::atomic<bool> found{false};
  constexpr size_t kValuesPerChunk = 65536;
  parallel_chunks(count, kValuesPerChunk, [&](size_t begin, size_t end) {
    if (!found.load(std::memory_order_relaxed) && holds_non_finite(data, bf16, begin, end)) {
      found.store(true, std::memory_order_relaxed);
    }
  });
  return found.load();
}

bool memory_holds_non_finite(const dnnl::memory& memory) {
  const dnnl::memory::desc desc = memory.get_desc();
  const DataType type = desc.get_data_type();
  return (type == DataType::f32 || type == DataType::bf16) &&
         values_hold_non_finite(
             memory.get_data_handle(), desc.get_size() / dnnl::memory::data_type_size(type), type == DataType::bf16);
}

// The graph's inputs, once per call: scanning every guarded step's own inputs would read most of a
// CNN's activations a second time. A NaN or an infinity that arises inside the graph from finite
// inputs (an overflow) is not seen.
bool CompiledGraph::needs_exact_paths(runtime::Span<runtime::EValue*> args) const {
  if (constants_non_finite_) {
    return true;
  }
  for (size_t i = 0; i < input_specs_.size(); ++i) {
    const ScalarType type = input_specs_[i].type;
    if (type != ScalarType::Float && type != ScalarType::BFloat16) {
      continue;
    }
    const Tensor& tensor = args[i]->toTensor();
    if (values_hold_non_finite(
            tensor.const_data_ptr(), static_cast<size_t>(tensor.numel()), type == ScalarType::BFloat16)) {
      return true;
    }
  }
  return false;
}

// Host loops run on the calling thread, inside run_in_thread_pool(); the rows of a QuantizeRows, Softmax,
// RmsNorm, Rotary, AdaptivePool or ArgReduce loop, and the values of a Unary, Clamp, Int8Grid or Activation one, are
// independent and split across the pool's threads (a BERT layer quantizes ~700K values per run).
Error CompiledGraph::run_host_step(const PreparedStep& step) {
  const HostLoop& loop = step.host;
  const void* source = step.host_src ? step.host_src.get_data_handle() : nullptr;
  void* target = step.host_dst.get_data_handle();
  void* aux = step.host_aux ? step.host_aux.get_data_handle() : nullptr;
  const auto* aux_values = static_cast<const float*>(aux);
  const auto split_rows = [](size_t rows, size_t extent, runtime::FunctionRef<void(size_t, size_t)> run) {
    constexpr size_t kValuesPerChunk = 16384;
    parallel_chunks(rows, std::max<size_t>(1, kValuesPerChunk / std::max<size_t>(1, extent)), run);
  };
  switch (loop.kind) {
    case HostLoop::Kind::QuantizeRows:
      split_rows(loop.outer, loop.extent, [&](size_t begin, size_t end) {
        quantize_rows(loop, source, target, aux, begin, end);
      });
      return Error::Ok;
    case HostLoop::Kind::Softmax:
      split_rows(loop.softmax.rows, loop.softmax.extent, [&](size_t begin, size_t end) {
        softmax_rows(loop.softmax, source, target, aux_values, begin, end);
      });
      return Error::Ok;
    case HostLoop::Kind::Rotary: {
      const auto* sin = static_cast<const float*>(step.host_sources[0].get_data_handle());
      split_rows(loop.rotary.rows, 2 * loop.rotary.pairs, [&](size_t begin, size_t end) {
        rotary_rows(loop.rotary, source, aux_values, sin, target, begin, end);
      });
      return Error::Ok;
    }
    case HostLoop::Kind::RmsNorm:
      split_rows(loop.rms_norm.rows, loop.rms_norm.extent, [&](size_t begin, size_t end) {
        rms_norm_rows(loop.rms_norm, source, target, aux_values, begin, end);
      });
      return Error::Ok;
    case HostLoop::Kind::AdaptivePool:
      split_rows(loop.outer, loop.in[0] * loop.in[1] * loop.in[2], [&](size_t begin, size_t end) {
        adaptive_pool_planes(loop, static_cast<const float*>(source), static_cast<float*>(target), begin, end);
      });
      return Error::Ok;
    case HostLoop::Kind::GlobalAveragePool:
      parallel_chunks(loop.outer * mean_chunks(loop.extent, loop.inner), 1, [&](size_t begin, size_t end) {
        sum_pixel_chunks(loop, static_cast<const float*>(source), static_cast<float*>(aux), begin, end);
      });
      finish_global_average_pool(loop, aux_values, static_cast<float*>(target));
      return Error::Ok;
    case HostLoop::Kind::Unary:
      split_rows(step.host_dst_count, 1, [&](size_t begin, size_t end) {
        unary_values(loop.unary, static_cast<const float*>(source), static_cast<float*>(target), begin, end);
      });
      return Error::Ok;
    case HostLoop::Kind::Clamp:
      split_rows(
          step.host_dst_count, 1, [&](size_t begin, size_t end) { clamp_values(loop, source, target, begin, end); });
      return Error::Ok;
    case HostLoop::Kind::Int8Grid:
      split_rows(step.host_dst_count, 1, [&](size_t begin, size_t end) {
        round_to_int8_grid(loop.int8_grid, static_cast<const float*>(source), static_cast<float*>(target), begin, end);
      });
      return Error::Ok;
    case HostLoop::Kind::Activation:
      split_rows(step.host_dst_count, 1, [&](size_t begin, size_t end) {
        activation_values(loop.isa, loop.activation, loop.value, loop.upper, loop.bf16, source, target, begin, end);
      });
      return Error::Ok;
    case HostLoop::Kind::ArgReduce:
      split_rows(loop.arg_reduce.outer * loop.arg_reduce.inner, loop.arg_reduce.extent, [&](size_t begin, size_t end) {
        arg_reduce_rows(loop.arg_reduce, static_cast<const float*>(source), static_cast<int64_t*>(target), begin, end);
      });
      return Error::Ok;
    case HostLoop::Kind::Gather: {
      CompressedRows compressed;
      if (!step.host_sources.empty()) {
        compressed.scales = static_cast<const float*>(step.host_sources[0].get_data_handle());
      }
      if (step.host_sources.size() > 1) {
        compressed.zero_points = static_cast<const float*>(step.host_sources[1].get_data_handle());
      }
      return gather_rows(loop.gather, source, aux, target, compressed);
    }
    case HostLoop::Kind::Elementwise:
      return host_elementwise(
          loop.elementwise,
          target,
          source,
          aux,
          step.host_sources.empty() ? nullptr : step.host_sources[0].get_data_handle());
    case HostLoop::Kind::IndexPut: {
      const void* indices[kMaxRank] = {};
      for (size_t k = 0; k < step.host_sources.size() && k < kMaxRank; ++k) {
        indices[k] = step.host_sources[k].get_data_handle();
      }
      return index_put(loop.index_put, target, source, aux, indices);
    }
    case HostLoop::Kind::Fill:
      if (loop.bf16) {
        std::fill_n(static_cast<uint16_t*>(target), step.host_dst_count, to_bf16_bits(loop.value));
      } else {
        std::fill_n(static_cast<float*>(target), step.host_dst_count, loop.value);
      }
      return Error::Ok;
    case HostLoop::Kind::KeepNan:
      split_rows(
          step.host_dst_count, 1, [&](size_t begin, size_t end) { keep_nan(source, target, loop.bf16, begin, end); });
      return Error::Ok;
    case HostLoop::Kind::MaxPool:
      split_rows(
          loop.max_pool.planes,
          loop.max_pool.in[0] * loop.max_pool.in[1] * loop.max_pool.in[2],
          [&](size_t begin, size_t end) {
            max_pool_planes(loop.max_pool, static_cast<const float*>(source), static_cast<float*>(target), begin, end);
          });
      return Error::Ok;
    case HostLoop::Kind::WinogradInput:
      split_rows(loop.winograd.tiles(), kWinogradPoints * loop.winograd.channels, [&](size_t begin, size_t end) {
        winograd_input_tiles(loop.winograd, static_cast<const float*>(source), static_cast<float*>(target), begin, end);
      });
      return Error::Ok;
    case HostLoop::Kind::WinogradOutput: {
      const float* residual =
          step.host_sources.empty() ? nullptr : static_cast<const float*>(step.host_sources[0].get_data_handle());
      split_rows(loop.winograd.tiles(), kWinogradPoints * loop.winograd.out_channels, [&](size_t begin, size_t end) {
        winograd_output_tiles(
            loop.winograd,
            static_cast<const float*>(source),
            aux_values,
            residual,
            static_cast<float*>(target),
            begin,
            end);
      });
      return Error::Ok;
    }
    case HostLoop::Kind::VectorMatrix: {
      VectorMatrixOperands operands;
      operands.row = source;
      operands.packed_weights = aux;
      operands.bias =
          step.host_sources.empty() ? nullptr : static_cast<const float*>(step.host_sources[0].get_data_handle());
      operands.dst = target;
      const VectorMatrixShape& shape = loop.vector_matrix;
      split_rows(shape.blocks(), shape.k * kVectorMatrixBlock, [&](size_t begin, size_t end) {
        vector_times_matrix(shape, operands, begin, end);
      });
      return Error::Ok;
    }
    case HostLoop::Kind::ExactInt8Matmul: {
      const auto handle = [&](size_t i) { return step.host_sources[i].get_data_handle(); };
      ExactInt8MatmulOperands operands;
      operands.src = static_cast<const uint8_t*>(source);
      operands.weights = static_cast<const int8_t*>(aux);
      operands.scales = static_cast<const float*>(handle(0));
      operands.bias = step.host_sources.size() > 1 ? static_cast<const float*>(handle(1)) : nullptr;
      operands.dst = static_cast<float*>(target);
      run_exact_int8_matmul(loop.exact_int8, operands);
      return Error::Ok;
    }
    case HostLoop::Kind::QuantizeRowsAffine:
    case HostLoop::Kind::DequantizeRowsAffine:
    case HostLoop::Kind::CenterRowsAffine:
    case HostLoop::Kind::Int4VectorMatrix:
    case HostLoop::Kind::Int4FloatVectorMatrix:
    case HostLoop::Kind::Int8FloatVectorMatrix:
    case HostLoop::Kind::ZeroPointTerms:
    case HostLoop::Kind::WidenedInt4Matmul:
      return run_affine_step(step, source, target, aux);
    case HostLoop::Kind::Binary:
      if (loop.bf16) {
        binary_values_bf16(
            loop.isa,
            static_cast<int64_t>(loop.binary),
            static_cast<const uint16_t*>(source),
            static_cast<const uint16_t*>(aux),
            static_cast<uint16_t*>(target),
            step.host_dst_count);
      } else {
        binary_values(
            loop.binary,
            static_cast<const float*>(source),
            aux_values,
            static_cast<float*>(target),
            step.host_dst_count);
      }
      return Error::Ok;
    case HostLoop::Kind::Copy:
      std::memcpy(target, source, loop.extent);
      return Error::Ok;
    case HostLoop::Kind::Convert:
      parallel_chunks(step.host_dst_count, kHostElementwiseValues, [&](size_t begin, size_t end) {
        convert_values(loop.isa, loop.bf16, source, target, begin, end);
      });
      return Error::Ok;
    case HostLoop::Kind::Interleave: {
      std::vector<const uint8_t*> pieces{static_cast<const uint8_t*>(source), static_cast<const uint8_t*>(aux)};
      for (const dnnl::memory& more : step.host_sources) {
        pieces.push_back(static_cast<const uint8_t*>(more.get_data_handle()));
      }
      split_rows(loop.outer, loop.extent * loop.inner / 4, [&](size_t begin, size_t end) {
        interleave_rows(pieces.data(), loop.extent, loop.inner, static_cast<uint8_t*>(target), begin, end);
      });
      return Error::Ok;
    }
    case HostLoop::Kind::CachedAttention: {
      const CachedAttentionShape& shape = loop.cached_attention;
      const int64_t start = *static_cast<const int64_t*>(aux);
      if (!cached_attention_start_fits(shape, start)) {
        ET_LOG(
            Error,
            "OneDnnBackend: attention from position %lld over %zu new entries does not fit the cache of %zu",
            static_cast<long long>(start),
            shape.queries,
            shape.cache_length);
        return Error::InvalidArgument;
      }
      CachedAttentionOperands operands;
      operands.queries = static_cast<const float*>(source);
      operands.keys = static_cast<const float*>(step.host_sources[0].get_data_handle());
      operands.values = static_cast<const float*>(step.host_sources[1].get_data_handle());
      operands.dst = static_cast<float*>(target);
      parallel_chunks(cached_attention_tasks(shape), 2, [&](size_t begin, size_t end) {
        cached_attention_tasks_run(shape, operands, start, begin, end);
      });
      return Error::Ok;
    }
    case HostLoop::Kind::ReduceExtremum:
      reduce_extremum(loop.extremum, static_cast<const float*>(source), static_cast<float*>(target));
      return Error::Ok;
    case HostLoop::Kind::NonFiniteBranch:
    case HostLoop::Kind::Jump:
      return Error::Internal; // execute() takes these itself
    case HostLoop::Kind::ZeroFullyMaskedRows:
      zero_fully_masked_rows(loop, static_cast<const float*>(source), static_cast<float*>(target));
      return Error::Ok;
  }
  return Error::Internal; // unreachable: every kind is handled above
}

namespace {

// Whole columns of int4 weights per task: about 32 KiB of them, so that a decode step's thousands of
// columns split evenly between the threads.
size_t int4_columns_per_chunk(const Int4MatrixShape& shape) {
  return std::max<size_t>(16, 65536 / std::max<size_t>(1, shape.k));
}

} // namespace

// torchao's affine quantization (COMPRESSED_MATMUL): each row's scale and zero point live in aux
// [2, rows], the scales first (oneDNN reads them as per-row src scales), the zero points as int32 after.
Error CompiledGraph::run_affine_step(const PreparedStep& step, const void* source, void* target, void* aux) {
  const HostLoop& loop = step.host;
  const size_t rows = loop.outer;
  // The rows' scales and zero points (aux), for the kinds that have them.
  float* scales = aux != nullptr ? static_cast<float*>(aux) : nullptr;
  int32_t* zero_points = aux != nullptr ? reinterpret_cast<int32_t*>(scales + rows) : nullptr;
  const auto split = [&](size_t extent, runtime::FunctionRef<void(size_t, size_t)> run) {
    parallel_chunks(rows, std::max<size_t>(1, 16384 / std::max<size_t>(1, extent)), run);
  };
  switch (loop.kind) {
    case HostLoop::Kind::QuantizeRowsAffine:
      split(loop.extent, [&](size_t begin, size_t end) {
        quantize_rows_affine_int8(
            static_cast<const float*>(source),
            rows,
            loop.extent,
            static_cast<int8_t*>(target),
            scales,
            zero_points,
            begin,
            end);
        if (loop.u8_rows) {
          auto* q = static_cast<uint8_t*>(target);
          for (size_t i = begin * loop.extent; i < end * loop.extent; ++i) {
            q[i] ^= 0x80; // q + 128
          }
        }
      });
      return Error::Ok;
    case HostLoop::Kind::DequantizeRowsAffine:
      split(loop.extent, [&](size_t begin, size_t end) {
        const auto* q = static_cast<const int8_t*>(source);
        auto* dst = static_cast<float*>(target);
        for (size_t r = begin; r < end; ++r) {
          for (size_t i = r * loop.extent; i < (r + 1) * loop.extent; ++i) {
            dst[i] = static_cast<float>(int32_t{q[i]} - zero_points[r]) * scales[r];
          }
        }
      });
      return Error::Ok;
    case HostLoop::Kind::CenterRowsAffine:
      split(loop.extent, [&](size_t begin, size_t end) {
        center_rows_bf16(
            static_cast<const int8_t*>(source), loop.extent, zero_points, static_cast<uint16_t*>(target), begin, end);
      });
      return Error::Ok;
    case HostLoop::Kind::ZeroPointTerms: {
      const auto* terms = static_cast<const float*>(step.host_sources[0].get_data_handle());
      split(loop.extent, [&](size_t begin, size_t end) {
        subtract_zero_point_terms(
            static_cast<float*>(target), rows, loop.extent, scales, zero_points, loop.value, terms, begin, end);
      });
      return Error::Ok;
    }
    case HostLoop::Kind::WidenedInt4Matmul: {
      const auto handle = [&](size_t i) { return step.host_sources[i].get_data_handle(); };
      WidenedInt4Operands operands;
      operands.rows = static_cast<const uint8_t*>(source);
      operands.row_scales = scales;
      operands.weights = static_cast<const uint8_t*>(handle(0));
      operands.scales = GroupScales(handle(1), loop.int4_bf16_scales);
      operands.column_scales = static_cast<const float*>(handle(2));
      operands.scratch = static_cast<uint8_t*>(handle(3));
      operands.bias = loop.widened_primitives->bias ? static_cast<const float*>(handle(4)) : nullptr;
      operands.dst = static_cast<float*>(target);
      return widened_int4_matmul(*loop.widened_primitives, operands);
    }
    case HostLoop::Kind::Int4VectorMatrix: {
      const auto handle = [&](size_t i) { return step.host_sources[i].get_data_handle(); };
      Int4RowOperands operands;
      operands.q = static_cast<const int8_t*>(source);
      operands.row_scale = scales[0];
      operands.zero_point = zero_points[0];
      operands.weights = static_cast<const uint8_t*>(handle(0));
      operands.scales = GroupScales(handle(1), loop.int4_bf16_scales);
      operands.terms = static_cast<const float*>(handle(2));
      operands.bias = loop.int4_bias ? static_cast<const float*>(handle(3)) : nullptr;
      operands.dst = static_cast<float*>(target);
      parallel_chunks(loop.int4.n, int4_columns_per_chunk(loop.int4), [&](size_t begin, size_t end) {
        int4_vector_matrix(loop.int4, operands, begin, end);
      });
      return Error::Ok;
    }
    case HostLoop::Kind::Int4FloatVectorMatrix:
    case HostLoop::Kind::Int8FloatVectorMatrix: {
      const auto handle = [&](size_t i) { return step.host_sources[i].get_data_handle(); };
      const auto* row = static_cast<const float*>(source);
      const auto* bias = loop.int4_bias ? static_cast<const float*>(handle(2)) : nullptr;
      auto* dst = static_cast<float*>(target);
      const size_t columns_per_chunk = int4_columns_per_chunk(loop.int4);
      if (loop.kind == HostLoop::Kind::Int8FloatVectorMatrix) {
        const auto* scales = static_cast<const float*>(handle(1)); // int8 weights keep f32 scales
        const Int8FloatRowOperands operands{row, static_cast<const int8_t*>(handle(0)), scales, bias, dst};
        parallel_chunks(loop.int4.n, columns_per_chunk, [&](size_t begin, size_t end) {
          int8_float_vector_matrix(loop.int4, operands, begin, end);
        });
        return Error::Ok;
      }
      const auto* zero_points =
          loop.int4_zero_points ? static_cast<const int8_t*>(handle(loop.int4_bias ? 3 : 2)) : nullptr;
      const GroupScales group_scales(handle(1), loop.int4_bf16_scales);
      const auto* weights = static_cast<const uint8_t*>(handle(0));
      if (loop.int4_bf16_row) {
        Int4Bf16RowOperands operands{static_cast<const uint16_t*>(source), weights, group_scales, zero_points, bias};
        if (loop.int4_bf16_result) {
          operands.dst_bf16 = static_cast<uint16_t*>(target);
        } else {
          operands.dst_f32 = dst;
        }
        parallel_chunks(loop.int4.n, columns_per_chunk, [&](size_t begin, size_t end) {
          int4_bf16_vector_matrix(loop.int4, operands, begin, end);
        });
        return Error::Ok;
      }
      const Int4FloatRowOperands operands{row, weights, group_scales, zero_points, bias, dst};
      parallel_chunks(loop.int4.n, columns_per_chunk, [&](size_t begin, size_t end) {
        int4_float_vector_matrix(loop.int4, operands, begin, end);
      });
      return Error::Ok;
    }
    default:
      return Error::Internal;
  }
}

} // namespace executorch::backends::onednn
