// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// Init-time construction of a CompiledGraph: tracks where every value lives and in which layout,
// inserts reorders where a step needs another layout, fetches constants, and finally plans the
// arena and turns the recorded steps into prepared ones.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <executorch/runtime/core/named_data_map.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "Dims.h"
#include "HostLoops.h"
#include "Payload.h"

namespace executorch::backends::onednn {

class CompiledGraph;
struct SharedBlocks;
enum class WinogradUse : int;  // Winograd.h
enum class Int4Products : int; // StepBuilders.h
enum class HugePages : int;    // HostMemory.h

// The backend options graphs build under (OneDnnBackend.cpp), read once as a program's delegate
// initializes (SharedBlocks): the graphs a dynamic program builds later for new sizes follow them too.
struct BuildSettings {
  WinogradUse winograd;
  Int4Products int4_products;
  HugePages huge_pages;
  static BuildSettings current() noexcept;
};
using BufferId = uint32_t;
constexpr BufferId kNoBuffer = 0xFFFFFFFF;

// Where the bytes of a buffer live.
enum class Storage : uint8_t {
  Arena,       // a slot in the graph's arena (leased per execute()), placed by liveness
  GraphInput,  // the caller's input tensor, bound in execute()
  GraphOutput, // the caller's output tensor, bound in execute()
  Packed,      // a constant converted into another layout, in the graph's block of packed weights
  Program,     // a constant's bytes where the program's named data map keeps them (read only)
  Alias,       // another buffer's bytes under another descriptor
  Owned,       // bytes made at init (quantization scales and zero points, per-column terms), read only
};

struct Buffer {
  memory::desc desc;
  Storage storage = Storage::Arena;
  uint32_t arg_index = 0;                                 // GraphInput/GraphOutput: position in execute()'s args
  BufferId alias_of = 0;                                  // Alias
  std::shared_ptr<runtime::FreeableBuffer> program_bytes; // Program, loaded when first read
  uint32_t owner_value = kNoValue;                        // the value whose producer defined this buffer
  int64_t first_step = -1;                                // liveness (Arena roots), in recorded-step positions
  int64_t last_step = -1;
  size_t offset = 0; // Arena: in the arena; Packed: in the packed weights; Alias: in alias_of's bytes
  // Owned: desc.get_size() bytes, shared with the graphs built later from the same derived values.
  std::shared_ptr<const uint8_t> owned;
};

using ArgList = std::vector<std::pair<int, BufferId>>;

class GraphBuilder {
 public:
  // With `shared`, constants are looked up there first and kept there once loaded, and finish()
  // reuses packed weights packed the same way.
  GraphBuilder(
      const Payload& payload,
      const runtime::NamedDataMap* named_data,
      const dnnl::engine& engine,
      dnnl::stream& stream,
      SharedBlocks* shared = nullptr);

  const dnnl::engine& engine() const {
    return engine_;
  }
  const BuildSettings& settings() const {
    return settings_;
  }
  const ValueRecord& value(uint32_t id) const {
    return payload_.values[id];
  }
  memory::dims dims(uint32_t id) const {
    return to_dnnl_dims(payload_.values[id].dims);
  }
  bool is_constant(uint32_t id) const {
    return payload_.values[id].is_constant;
  }
  // Whether the program has dynamic sizes: its graphs for other sizes share this one's packed weights
  // where they pack them the same way, so a layout that depends on a size packs a second copy.
  bool sizes_vary() const {
    return shared_ != nullptr;
  }
  // Bytes of all the graph's constants, as stored in the program.
  size_t constant_bytes() const {
    return constant_bytes_;
  }
  // The value's element type (the payload parser refuses F16 and S32 values). S64 and BOOL values,
  // which only host steps touch, are described by a oneDNN type of the same size. On a CPU without
  // bf16 instructions a bf16 value the graph keeps to itself is f32 (widens_bf16()); so is, without
  // VNNI, an int8 value between emulated int8 convolutions (holds_dequantized_int8()).
  DataType data_type(uint32_t id) const {
    return widened_[id] ? DataType::f32 : program_type(id);
  }
  // An int8 value held in f32 as the numbers it dequantizes to (GraphBuilder.cpp,
  // int8_values_held_dequantized()): its producer rounds them to the int8 grid, its readers take them as
  // they are.
  bool holds_dequantized_int8(uint32_t id) const {
    return widened_[id] && (program_type(id) == DataType::u8 || program_type(id) == DataType::s8);
  }
  // The element type the program gives the value.
  DataType program_type(uint32_t id) const {
    switch (static_cast<DType>(payload_.values[id].dtype)) {
      case DType::S64:
        return DataType::f64;
      case DType::Bool:
        return DataType::u8;
      case DType::BF16:
        return DataType::bf16;
      case DType::S8:
        return DataType::s8;
      case DType::U8:
        return DataType::u8;
      case DType::S4:
        return DataType::s4;
      case DType::S32:
        return DataType::s32;
      default:
        return DataType::f32;
    }
  }
  memory::desc plain(uint32_t id) const {
    return plain_desc(dims(id), data_type(id));
  }
  // The dst of a memory-bound step that may pick its layout (pooling, resampling, reduction): plain
  // where the plan says so, else format_tag::any. (A convolution always picks: a plain dst can cost
  // it its fastest kernel, so finish_step() converts its result instead.)
  memory::desc dst_layout(uint32_t id, DataType type) const {
    return value(id).layout == Layout::Plain ? plain_desc(dims(id), type) : any_desc(dims(id), type);
  }
  // The type a step producing (or reading) `id` works in: the value's own, or f32 while a step is
  // rebuilt in f32 for want of a bf16 kernel (define() then converts its result to the value's type).
  DataType compute_type(uint32_t id) const {
    return compute_in_f32_ ? DataType::f32 : data_type(id);
  }
  bool compute_in_f32() const {
    return compute_in_f32_;
  }
  void set_compute_in_f32(bool on) {
    compute_in_f32_ = on;
  }
  bool involves_bf16(const StepRecord& step) const;
  // Whether the step asks to compute in bf16 between f32 values (precision="bf16"); never where bf16
  // is widened.
  bool asks_bf16(const StepRecord& step) const;
  // On a CPU without bf16 instructions (AVX512-BF16, AVX-NE-CONVERT, AMX) oneDNN's bf16 kernels are
  // emulated or missing and every step would convert around an f32 kernel (2-66x the f32 time
  // measured on AVX2): there the bf16 values between steps are kept in f32 instead, so a bf16 program
  // runs at f32 speed, its results closer to f32's than eager bf16's. Constants and the delegate's
  // inputs and outputs keep their bytes' type.
  bool widens_bf16() const {
    return widens_bf16_;
  }
  // The layout a consumer that follows its input's layout reads the value in: the layout its
  // producer chose (a constant's is plain), or plain for a strided view, since few primitives run
  // their fast kernels on permuted strides (those that do ask for stored()).
  memory::desc desc(uint32_t id) {
    return is_view(id) ? plain(id) : stored(id);
  }
  bool is_plain(uint32_t id) {
    return desc(id) == plain(id);
  }
  // The descriptor of the value's bytes as they are: for a view (a free permute or reshape), another
  // value's bytes through strides.
  memory::desc stored(uint32_t id);
  bool is_view(uint32_t id);
  // A step computes in its output's type: the value's current layout when it already has `type`,
  // else its plain layout in `type` (a conversion).
  memory::desc desc_as(uint32_t id, DataType type) {
    return data_type(id) == type ? desc(id) : plain_desc(dims(id), type);
  }
  BufferId buffer_as(uint32_t id, DataType type) {
    return input(id, desc_as(id, type));
  }

  // The value's buffer in whatever layout its producer chose.
  BufferId buffer(uint32_t id);
  // The value in layout `wanted`: the same buffer when it already is, else a reorder (done once in
  // finish() for constants, a reorder step for activations). Results are shared between consumers.
  BufferId input(uint32_t id, const memory::desc& wanted);
  BufferId plain_input(uint32_t id) {
    return input(id, plain(id));
  }
  BufferId plain_input(uint32_t id, DataType type) {
    return input(id, plain_desc(dims(id), type));
  }
  // The value's plain bytes described by `view` (same size), converted to `wanted`.
  BufferId input_view(uint32_t id, const memory::desc& view, const memory::desc& wanted);
  BufferId as_layout(BufferId source, const memory::desc& wanted);
  // input_view() of a constant whose values are multiplied on the way, once at init, by `scales` (an
  // owned f32 constant) along the dims of `view` that `mask` selects: int8 weights dequantized.
  BufferId scaled_constant(
      uint32_t id, const memory::desc& view, const memory::desc& wanted, BufferId scales, int mask);
  // Constant f32 3x3 convolution weights [OC, IC, 3, 3] (in any layout: the program's bytes or
  // another conversion's result, such as int8 weights dequantized) transformed once at init for
  // Winograd F(4x4, 3x3) (Winograd.h): [36, IC, OC] in layout `wanted`.
  BufferId winograd_constant(BufferId weights, const memory::desc& wanted);
  // Another descriptor over the bytes of `base` (a reshape, a strided or sub-memory view), starting
  // `bytes` into them (a contiguous block).
  BufferId alias(BufferId base, const memory::desc& view, size_t bytes = 0);

  // Declares the step's output value: a new arena buffer, or an existing one (metadata only). A desc
  // of another type than the value's is the step's result, converted by finish_step().
  BufferId define(uint32_t id, const memory::desc& desc);
  // Ends the step: converts results computed in another type than their value's, and results the
  // plan wants plain (ValueRecord::layout) but the step wrote in another layout.
  void finish_step(const StepRecord& step);
  void define_as(uint32_t id, BufferId buffer);
  // Declares `id` as the bytes of value `source` described by `view` (same bytes): no step runs.
  void define_view(uint32_t id, uint32_t source, const memory::desc& view) {
    define_as(id, alias(buffer(source), view));
  }
  BufferId scratch(const memory::desc& desc);
  // A constant value's bytes as the program holds them, read while building (loaded on first use).
  const void* constant_data(uint32_t id) {
    return program_bytes(root(buffer(id)));
  }
  // What a step computes from constants `first` and `second` once per program: a dynamic program's
  // graphs for other sizes reuse it rather than read the constants again (an LLM's prompt of a new
  // length builds its graphs inside execute()).
  enum class Derived : int { widened_columns, int4_column_terms };
  std::shared_ptr<const std::vector<float>> derived_floats(
      uint32_t first, uint32_t second, Derived what, const std::function<std::vector<float>()>& compute);
  // A constant made at init from `desc.get_size()` bytes at `data` (copied).
  BufferId owned_constant(const memory::desc& desc, const void* data);
  // A constant read in place from `values` (from derived_floats) from float `first` on: a dynamic
  // program's graphs for other sizes read the same block.
  BufferId owned_constant(const memory::desc& desc, std::shared_ptr<const std::vector<float>> values, size_t first);
  const memory::desc& buffer_desc(BufferId id) const {
    return buffers_[id].desc;
  }
  // What steps of this graph can share (the host kernels' primitives for layers of one shape), made
  // by `make` for the first step of each `key`: an LLM's 16 layers have 5 matmul shapes.
  std::shared_ptr<const void> shared_by_steps(
      const std::string& key, const std::function<std::shared_ptr<const void>()>& make);

  // Records a primitive to run in order; `pd` gives its scratchpad size.
  void add_primitive(const dnnl::primitive& primitive, const dnnl::primitive_desc_base& pd, const ArgList& args);
  void add_reorder(BufferId source, BufferId destination);
  void add_fill(BufferId target, float value); // target: f32 or bf16
  // A loop on the calling thread writing `target` and reading `source`, when given; `aux` is a
  // second buffer the loop writes or reads (HostLoop::Kind says which); `more_sources` are further
  // buffers it reads, in order.
  void add_host_loop(
      const HostLoop& loop,
      BufferId target,
      BufferId source,
      BufferId aux = kNoBuffer,
      const std::vector<BufferId>& more_sources = {});

  // Records the steps `fast` adds, skipped at execute time when a graph input or a constant holds a
  // NaN or an infinity, and after them the steps `exact` adds, run only then. Neither callback may
  // ask for a value in a new layout: that conversion would be shared with later steps, which cannot
  // know which path ran (checked).
  void add_non_finite_branch(const std::function<void()>& fast, const std::function<void()>& exact);

  // The payload step the steps recorded from now on belong to (-1: none), for their event names.
  void set_origin(int64_t step) {
    origin_ = step;
  }

  // Every primitive runs with a user-provided scratchpad (one buffer shared by all steps).
  static dnnl::primitive_attr default_attr();

  // Reorders graph outputs into the caller's memory, plans the arena, and prepares the steps.
  void finish(CompiledGraph& graph);

 private:
  struct RecordedStep {
    dnnl::primitive primitive; // empty for a host loop (args: DST, [SRC], [DST_1 = aux], [MULTIPLE_SRC + i])
    ArgList args;
    memory::desc scratchpad;
    HostLoop host;
    int64_t origin = -1; // the payload step it belongs to
  };
  struct Conversion {
    BufferId source;
    memory::desc wanted;
    BufferId result;
    BufferId scales = kNoBuffer; // scaled_constant()
    int scale_mask = 0;
    bool winograd = false; // winograd_constant()
  };

  BufferId add_buffer(Buffer buffer);
  void record(RecordedStep step);
  std::string event_name(const RecordedStep& step) const;
  BufferId root(BufferId id) const;
  bool is_constant_buffer(BufferId id) const;
  void note_use(BufferId id);
  void bind_graph_outputs();
  size_t plan_arena();
  void pack_constants(CompiledGraph& graph);
  void move_streamed_constants();
  memory make_memory(BufferId id, CompiledGraph& graph);
  std::shared_ptr<runtime::FreeableBuffer> load_constant(uint32_t id);
  void* program_bytes(BufferId root_id);

  const Payload& payload_;
  const runtime::NamedDataMap* named_data_;
  SharedBlocks* shared_;
  BuildSettings settings_;
  size_t constant_bytes_ = 0;
  const dnnl::engine& engine_;
  dnnl::stream& stream_;
  std::vector<Buffer> buffers_;
  std::vector<BufferId> value_buffer_; // kNoValue until defined
  std::vector<Conversion> conversions_;
  std::vector<std::pair<BufferId, uint32_t>> results_to_convert_; // (computed, value) in this step
  bool compute_in_f32_ = false;
  bool widens_bf16_ = false;
  std::vector<bool> widened_; // per value: bf16 or int8 in the program, f32 here (data_type())
  int64_t origin_ = -1;
  std::vector<RecordedStep> steps_;
  std::map<std::string, std::shared_ptr<const void>> shared_by_steps_;
};

} // namespace executorch::backends::onednn
