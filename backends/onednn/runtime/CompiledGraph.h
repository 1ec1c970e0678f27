// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// Every oneDNN object a subgraph needs at one set of input sizes, built ahead of execute(), which
// binds the caller's tensors and runs the prepared steps in order.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/event_tracer.h>
#include <executorch/runtime/core/named_data_map.h>
#include <executorch/runtime/core/span.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "ArenaPool.h"
#include "GraphBuilder.h"
#include "HostLoops.h"
#include "HostMemory.h"
#include "Payload.h"

namespace executorch::backends::onednn {

// Whether `count` f32 (or bf16) values hold a NaN or an infinity; split across the current thread
// pool's threads.
bool values_hold_non_finite(const void* data, size_t count, bool bf16);
// The same for every byte the descriptor of `memory` spans; false for types other than f32 and bf16.
bool memory_holds_non_finite(const dnnl::memory& memory);

// One constant converted into the layout a primitive wants: `source` is the constant's value id, or
// -1 - i for the i-th conversion before it (a conversion of a converted constant).
struct ConstantPacking {
  int64_t source = 0;
  dnnl::memory::desc source_desc;
  dnnl::memory::desc wanted;
  std::vector<uint8_t> scales; // the f32 scales of a scaled_constant(), else empty
  int scale_mask = 0;
  bool winograd = false; // a winograd_constant()
  bool operator==(const ConstantPacking& other) const {
    return source == other.source && source_desc == other.source_desc && wanted == other.wanted &&
           scales == other.scales && scale_mask == other.scale_mask && winograd == other.winograd;
  }
};

// What the compiled graphs of one program (one per set of input sizes) share: the packed weights of
// graphs that pack identically, and the program's constants, loaded once (the named data map is only
// valid during init()). Arenas come from the process's pool (ArenaPool.h).
struct SharedBlocks {
  BuildSettings settings = BuildSettings::current();
  std::vector<std::shared_ptr<runtime::FreeableBuffer>> constants; // by value id
  std::vector<bool> in_huge_pages; // by value id: constants moved by GraphBuilder::move_streamed_constants()
  // Floats computed from constants at build (GraphBuilder::derived_floats), by (value ids, what).
  std::map<std::tuple<uint32_t, uint32_t, int>, std::shared_ptr<const std::vector<float>>> derived_floats;
  struct PackedWeights {
    std::vector<ConstantPacking> packings;
    std::weak_ptr<uint8_t> block; // expires with the last graph using it
  };
  std::vector<PackedWeights> packed_weights;
};

// What execute() requires of a graph input or output tensor.
struct TensorSpec {
  std::vector<int32_t> sizes;
  executorch::aten::ScalarType type;
};

class CompiledGraph {
 public:
  // Builds every primitive and fetches every constant; throws InitError or dnnl::error.
  static std::unique_ptr<CompiledGraph> build(
      const Payload& payload, const runtime::NamedDataMap* named_data, SharedBlocks* shared = nullptr);

  // args: graph inputs then graph outputs. Never throws; allocates only an arena, when executions on
  // other threads hold every block of the pool large enough (ArenaPool.h). With `tracer` (ETDump), each
  // prepared step is a delegate profiling event named after its payload step (step_names_).
  runtime::Error execute(runtime::Span<runtime::EValue*> args, runtime::EventTracer* tracer = nullptr) noexcept;

  size_t arena_bytes() const {
    return arena_bytes_;
  }

 private:
  friend class GraphBuilder;

  struct PreparedStep {
    dnnl_primitive_t primitive = nullptr; // null: run `host` on host_dst (and host_src)
    std::vector<dnnl_exec_arg_t> args;
    HostLoop host;
    dnnl::memory host_dst;
    dnnl::memory host_src;
    dnnl::memory host_aux; // QuantizeRows: the row scales (a second output); Softmax: the mask
    // Further inputs: WHERE's operand taken where the condition is false, INDEX_PUT's indices.
    std::vector<dnnl::memory> host_sources;
    size_t host_dst_count = 0;
  };
  static runtime::Error run_host_step(const PreparedStep& step);
  static runtime::Error run_affine_step(const PreparedStep& step, const void* source, void* target, void* aux);
  // Whether the NaN guards take their exact paths for these arguments.
  bool needs_exact_paths(runtime::Span<runtime::EValue*> args) const;
  // A memory object whose data handle is the tensor at args[arg_index].
  struct Binding {
    dnnl::memory memory;
    uint32_t arg_index;
    size_t offset; // bytes into the argument's data (a contiguous block of it)
  };

  runtime::Error check_argument(
      const char* role, size_t index, runtime::EValue* arg, const TensorSpec& expected, bool resize) const;

  std::vector<TensorSpec> input_specs_;
  std::vector<TensorSpec> output_specs_;
  std::vector<dnnl::primitive> primitives_;
  std::vector<dnnl::memory> memories_; // keeps the objects referenced by `steps_` alive
  // Constants some step reads straight from the program's data (freed with the graph).
  std::vector<std::shared_ptr<runtime::FreeableBuffer>> program_constants_;
  // Constants made at init (GraphBuilder's Owned buffers), some shared with the program's other graphs.
  std::vector<std::shared_ptr<const uint8_t>> owned_constants_;
  std::vector<PreparedStep> steps_;
  // Per prepared step: "<payload step kind>#<index>", with ".reorder" or ".host" for the conversions
  // and host loops a step adds, "outputs.reorder" for the final copies.
  std::vector<std::string> step_names_;
  std::vector<Binding> bindings_;
  // The memory objects in the arena, at their offsets: pointed into the leased block when it changes.
  struct ArenaSlot {
    dnnl::memory memory;
    size_t offset;
  };
  std::vector<ArenaSlot> arena_slots_;
  uint8_t* bound_arena_ = nullptr;
  std::optional<ArenaMembership> arena_membership_; // set once the arena's size is known
  std::shared_ptr<uint8_t> weights_storage_;        // constants packed into the layouts their primitives chose
  size_t arena_bytes_ = 0;
  bool guarded_ = false;              // some step has a NaN guard
  bool constants_non_finite_ = false; // some constant holds a NaN or an infinity
};

} // namespace executorch::backends::onednn
