// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
#include "GraphBuilder.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>

#include "CompiledGraph.h"
#include "CpuIsa.h"
#include "HostMemory.h"
#include "InitError.h"
#include "StepBuilders.h"
#include "Threading.h"
#include "Winograd.h"

namespace executorch::backends::onednn {
namespace {

using runtime::Error;

constexpr size_t kAlignment = 64;

size_t round_up(size_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

// An Owned buffer's bytes, copied: the packing key compares a conversion's scales by value.
std::vector<uint8_t> owned_bytes(const Buffer& buffer) {
  const uint8_t* first = buffer.owned.get();
  return first == nullptr ? std::vector<uint8_t>() : std::vector<uint8_t>(first, first + buffer.desc.get_size());
}

// A program with dynamic sizes keeps the constants it has packed (SharedBlocks::constants) for sizes
// that may want them in another layout; until then their pages go back to the kernel. ExecuTorch's
// mmap loader locks a program's pages in memory (executorch.runtime: 4.2 GB locked for a 1.1B fp32
// LLM), and the kernel reclaims no locked page, so they are unlocked first. MADV_PAGEOUT never changes
// the bytes: a file mapping's pages are read from the file again, anonymous ones from swap (or stay,
// without swap), if they are ever touched. So the process holds one copy of the weights, the packed
// one, as for a static program (whose bytes are freed after packing).
void release_pages(const runtime::FreeableBuffer& bytes) noexcept {
#if defined(__linux__) && defined(MADV_PAGEOUT)
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<uintptr_t>(bytes.data());
  const uintptr_t begin = (start + page - 1) / page * page, end = (start + bytes.size()) / page * page;
  if (end > begin) {
    void* pages = reinterpret_cast<void*>(begin);
    // Hints: a failure costs memory only (a kernel before 5.4 has no MADV_PAGEOUT).
    (void)munlock(pages, end - begin);
    (void)madvise(pages, end - begin, MADV_PAGEOUT);
  }
#else
  (void)bytes;
#endif
}

// `from`: 3x3 weights [OC, IC, 3, 3] in any f32 layout; `to`: their Winograd transform [36, IC, OC].
void transform_winograd_weights(memory& from, memory& to, const dnnl::engine& engine, dnnl::stream& stream) {
  const memory::dims dims = from.get_desc().get_dims();
  memory plain(plain_desc(dims), engine);
  dnnl::reorder(from, plain).execute(stream, from, plain);
  stream.wait();
  const int64_t points = static_cast<int64_t>(kWinogradPoints);
  memory transformed(plain_desc({dims[0], dims[1], points}), engine);
  winograd_weights(
      static_cast<const float*>(plain.get_data_handle()),
      static_cast<size_t>(dims[0] * dims[1]),
      static_cast<float*>(transformed.get_data_handle()));
  // [OC][IC][36] read as [36, IC, OC]: the reorder into the matmul's layout transposes it.
  const memory::desc by_point({points, dims[1], dims[0]}, DataType::f32, memory::dims{1, points, dims[1] * points});
  memory view(by_point, engine, transformed.get_data_handle());
  dnnl::reorder(view, to).execute(stream, view, to);
}

// Without VNNI an int8 convolution is emulated (ConvolutionSteps.cpp: dequantize, f32 kernel,
// quantize), and between two of them the value's int8 bytes only cost a quantizing and a dequantizing
// reorder (40% of MobileNetV2's int8 call on a Zen 3). Such a value is held in f32 instead: the numbers
// its int8 bytes dequantize to, which its producer rounds to the int8 grid (in its post-ops, or one
// host pass). Taken only where every step around the value knows that form: produced by a convolution
// that reads int8 and quantizes its result or by a REORDER that quantizes f32, read by convolutions as
// their src or by REORDERs that dequantize it.
std::vector<bool> int8_values_held_dequantized(const Payload& payload, const std::vector<bool>& at_boundary) {
  const size_t count = payload.values.size();
  std::vector<bool> produced(count, false), held(count, true);
  const auto type = [&](uint32_t id) { return static_cast<DType>(payload.values[id].dtype); };
  const auto int8_value = [&](uint32_t id) { return type(id) == DType::U8 || type(id) == DType::S8; };
  for (const StepRecord& step : payload.steps) {
    const bool emulated_convolution =
        step.kind == StepKind::Convolution && step.has_input(0) && int8_value(step.inputs[0]) && step.has("dst_scale");
    const bool quantizing_reorder = step.kind == StepKind::Reorder && step.has_input(0) && step.has("dst_scale") &&
                                    !step.has("permutation") && !step.has("offsets") &&
                                    type(step.inputs[0]) == DType::F32;
    for (uint32_t id : step.outputs) {
      produced[id] = (emulated_convolution || quantizing_reorder) && step.outputs.size() == 1;
    }
    for (size_t slot = 0; slot < step.inputs.size(); ++slot) {
      const uint32_t id = step.inputs[slot];
      if (id == kNoValue) {
        continue;
      }
      const bool convolution_src = step.kind == StepKind::Convolution && slot == 0;
      const bool dequantized = step.kind == StepKind::Reorder && slot == 0 && step.has("src_scale") &&
                               !step.has("permutation") && !step.has("offsets") && type(step.outputs[0]) == DType::F32;
      held[id] = held[id] && (convolution_src || dequantized);
    }
  }
  for (uint32_t id = 0; id < count; ++id) {
    held[id] = held[id] && produced[id] && int8_value(id) && !payload.values[id].is_constant && !at_boundary[id];
  }
  return held;
}

} // namespace

BuildSettings BuildSettings::current() noexcept {
  return {winograd_use(), onednn::int4_products(), onednn::huge_pages()};
}

GraphBuilder::GraphBuilder(
    const Payload& payload,
    const runtime::NamedDataMap* named_data,
    const dnnl::engine& engine,
    dnnl::stream& stream,
    SharedBlocks* shared)
    : payload_(payload),
      named_data_(named_data),
      shared_(shared),
      settings_(shared != nullptr ? shared->settings : BuildSettings::current()),
      engine_(engine),
      stream_(stream),
      value_buffer_(payload.values.size(), kNoValue),
      widens_bf16_(!has_bf16_instructions()),
      widened_(payload.values.size(), false) {
  std::vector<bool> at_boundary(payload.values.size(), false);
  for (const auto* ids : {&payload.inputs, &payload.outputs}) {
    for (uint32_t id : *ids) {
      at_boundary[id] = true;
    }
  }
  if (widens_bf16_) {
    for (uint32_t id = 0; id < payload.values.size(); ++id) {
      widened_[id] = program_type(id) == DataType::bf16 && !payload.values[id].is_constant && !at_boundary[id];
    }
  }
  if (!int8_products_exact()) {
    const std::vector<bool> held = int8_values_held_dequantized(payload, at_boundary);
    for (uint32_t id = 0; id < payload.values.size(); ++id) {
      widened_[id] = widened_[id] || held[id];
    }
  }
  for (uint32_t id = 0; id < payload.values.size(); ++id) {
    if (payload.values[id].is_constant) {
      constant_bytes_ +=
          static_cast<size_t>(element_count(payload.values[id].dims)) * memory::data_type_size(data_type(id));
    }
  }
  for (uint32_t i = 0; i < payload.inputs.size(); ++i) {
    const uint32_t id = payload.inputs[i];
    Buffer buffer;
    buffer.desc = plain(id);
    buffer.storage = Storage::GraphInput;
    buffer.arg_index = i;
    buffer.owner_value = id;
    value_buffer_[id] = add_buffer(std::move(buffer));
  }
}

dnnl::primitive_attr GraphBuilder::default_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

BufferId GraphBuilder::add_buffer(Buffer buffer) {
  buffers_.push_back(std::move(buffer));
  return static_cast<BufferId>(buffers_.size() - 1);
}

BufferId GraphBuilder::root(BufferId id) const {
  while (buffers_[id].storage == Storage::Alias) {
    id = buffers_[id].alias_of;
  }
  return id;
}

memory::desc GraphBuilder::stored(uint32_t id) {
  return buffers_[buffer(id)].desc;
}

bool GraphBuilder::is_view(uint32_t id) {
  const Buffer& own = buffers_[buffer(id)];
  return own.storage == Storage::Alias && own.desc != plain(id);
}

BufferId GraphBuilder::buffer(uint32_t id) {
  if (value_buffer_[id] == kNoValue) {
    ODNN_CHECK(is_constant(id), "value %u is read before it is produced", id);
    Buffer constant;
    constant.desc = plain(id);
    constant.storage = Storage::Program;
    constant.owner_value = id;
    value_buffer_[id] = add_buffer(std::move(constant));
  }
  return value_buffer_[id];
}

std::shared_ptr<const std::vector<float>> GraphBuilder::derived_floats(
    uint32_t first, uint32_t second, Derived what, const std::function<std::vector<float>()>& compute) {
  const std::tuple<uint32_t, uint32_t, int> key{first, second, static_cast<int>(what)};
  if (shared_ != nullptr) {
    const auto found = shared_->derived_floats.find(key);
    if (found != shared_->derived_floats.end()) {
      return found->second;
    }
  }
  auto result = std::make_shared<const std::vector<float>>(compute());
  if (shared_ != nullptr) {
    shared_->derived_floats.emplace(key, result);
  }
  return result;
}

// Constants are read in place, from the program's data: nothing is copied at init unless a primitive
// wants another layout, and then only into the packed weights (pack_constants). The program's bytes
// are loaded when first read and released as soon as packing is done with them, so that init never
// holds a model's weights twice; the compiled graph keeps them only for steps reading them as they are.
std::shared_ptr<runtime::FreeableBuffer> GraphBuilder::load_constant(uint32_t id) {
  if (shared_ != nullptr && id < shared_->constants.size() && shared_->constants[id]) {
    return shared_->constants[id];
  }
  const ValueRecord& record = value(id);
  ODNN_CHECK(
      named_data_ != nullptr,
      "constant value %u (key '%s') needs a named data map, but the program has none",
      id,
      record.key.c_str());
  runtime::Result<runtime::FreeableBuffer> data = named_data_->get_data(record.key);
  ODNN_CHECK(
      data.ok(),
      "constant value %u: key '%s' not found in the named data map (error 0x%x)",
      id,
      record.key.c_str(),
      static_cast<unsigned>(data.error()));
  auto bytes = std::make_shared<runtime::FreeableBuffer>(std::move(data.get()));
  if (shared_ != nullptr) {
    shared_->constants.resize(payload_.values.size());
    shared_->constants[id] = bytes;
  }
  const size_t expected = plain_desc(dims(id), data_type(id)).get_size(); // sub-byte types packed
  ODNN_CHECK(
      bytes->size() == expected,
      "constant value %u (key '%s'): %zu bytes, expected %zu for dims %s",
      id,
      record.key.c_str(),
      bytes->size(),
      expected,
      dims_string(dims(id)).c_str());
  runtime::Result<const void*> source = bytes->data_safe();
  ODNN_CHECK(
      source.ok() && source.get() != nullptr,
      "constant value %u (key '%s'): data is not addressable",
      id,
      record.key.c_str());
  ODNN_CHECK(
      !record.checksum || crc32(static_cast<const uint8_t*>(source.get()), bytes->size()) == *record.checksum,
      "constant value %u (key '%s'): checksum mismatch: the program's weights are damaged",
      id,
      record.key.c_str());
  return bytes;
}

// oneDNN takes non-const handles; steps only ever read constants (nothing writes into an input).
void* GraphBuilder::program_bytes(BufferId root_id) {
  Buffer& buffer = buffers_[root_id];
  if (!buffer.program_bytes) {
    buffer.program_bytes = load_constant(buffer.owner_value);
  }
  return const_cast<void*>(buffer.program_bytes->data());
}

BufferId GraphBuilder::input(uint32_t id, const memory::desc& wanted) {
  return as_layout(buffer(id), wanted);
}

BufferId GraphBuilder::input_view(uint32_t id, const memory::desc& view, const memory::desc& wanted) {
  return as_layout(alias(plain_input(id), view), wanted);
}

BufferId GraphBuilder::as_layout(BufferId source, const memory::desc& wanted) {
  if (buffers_[source].desc == wanted) {
    return source;
  }
  for (const Conversion& conversion : conversions_) {
    if (conversion.source == source && conversion.wanted == wanted && conversion.scales == kNoBuffer) {
      return conversion.result;
    }
  }
  BufferId result;
  const Storage source_storage = buffers_[root(source)].storage;
  const bool constant = source_storage == Storage::Packed || source_storage == Storage::Program;
  if (!constant && same_element_offsets(buffers_[source].desc, wanted) && canonical(wanted) == wanted) {
    // MobileNetV3's 16-channel stem writes aBcd16b, which its channels-last layers read as it is:
    // a 42 us copy of 1x16x112x112 a call saved (Zen 4).
    return alias(source, wanted);
  }
  if (constant) {
    Buffer packed;
    packed.desc = wanted;
    packed.storage = Storage::Packed;
    result = add_buffer(std::move(packed));
  } else {
    result = scratch(wanted);
    add_reorder(source, result);
  }
  conversions_.push_back({source, wanted, result});
  return result;
}

BufferId GraphBuilder::scaled_constant(
    uint32_t id, const memory::desc& view, const memory::desc& wanted, BufferId scales, int mask) {
  ODNN_CHECK(is_constant(id), "value %u: only constants are scaled at init", id);
  const BufferId source = alias(plain_input(id), view);
  Buffer packed;
  packed.desc = wanted;
  packed.storage = Storage::Packed;
  const BufferId result = add_buffer(std::move(packed));
  conversions_.push_back({source, wanted, result, scales, mask});
  return result;
}

BufferId GraphBuilder::alias(BufferId base, const memory::desc& described, size_t bytes) {
  const memory::desc view = canonical(described);
  if (bytes == 0 && buffers_[base].desc == view) {
    return base;
  }
  for (BufferId id = 0; id < buffers_.size(); ++id) {
    const Buffer& existing = buffers_[id];
    if (existing.storage == Storage::Alias && existing.alias_of == base && existing.desc == view &&
        existing.offset == bytes) {
      return id;
    }
  }
  Buffer buffer;
  buffer.desc = view;
  buffer.storage = Storage::Alias;
  buffer.alias_of = base;
  buffer.offset = bytes;
  return add_buffer(std::move(buffer));
}

bool GraphBuilder::involves_bf16(const StepRecord& step) const {
  const auto is_bf16 = [&](uint32_t id) { return id != kNoValue && data_type(id) == DataType::bf16; };
  return std::any_of(step.inputs.begin(), step.inputs.end(), is_bf16) ||
         std::any_of(step.outputs.begin(), step.outputs.end(), is_bf16) || asks_bf16(step);
}

bool GraphBuilder::asks_bf16(const StepRecord& step) const {
  return !widens_bf16_ && step.has("compute_bf16") && step.int_scalar("compute_bf16") != 0;
}

void GraphBuilder::finish_step(const StepRecord& step) {
  for (const auto& [computed, id] : results_to_convert_) {
    add_reorder(computed, define(id, plain(id)));
  }
  results_to_convert_.clear();
  for (uint32_t id : step.outputs) {
    const BufferId produced = buffer(id);
    if (value(id).layout == Layout::Plain && buffers_[produced].desc != plain(id)) {
      add_reorder(produced, define(id, plain(id)));
    }
  }
}

BufferId GraphBuilder::define(uint32_t id, const memory::desc& desc) {
  if (desc.get_data_type() != data_type(id)) {
    const BufferId computed = scratch(desc);
    results_to_convert_.emplace_back(computed, id);
    return computed;
  }
  Buffer buffer;
  buffer.desc = desc;
  buffer.owner_value = id;
  value_buffer_[id] = add_buffer(std::move(buffer));
  return value_buffer_[id];
}

void GraphBuilder::define_as(uint32_t id, BufferId buffer) {
  value_buffer_[id] = buffer;
}

BufferId GraphBuilder::scratch(const memory::desc& desc) {
  Buffer buffer;
  buffer.desc = desc;
  return add_buffer(std::move(buffer));
}

BufferId GraphBuilder::winograd_constant(BufferId weights, const memory::desc& wanted) {
  const memory::desc& source = buffers_[weights].desc;
  const memory::dims dims = source.get_dims();
  ODNN_CHECK(
      is_constant_buffer(weights) && source.get_data_type() == DataType::f32 && dims.size() == 4 && dims[2] == 3 &&
          dims[3] == 3 && wanted.get_dims() == memory::dims({static_cast<int64_t>(kWinogradPoints), dims[1], dims[0]}),
      "Winograd weights %s -> %s (internal error)",
      dims_string(dims).c_str(),
      dims_string(wanted.get_dims()).c_str());
  Buffer packed;
  packed.desc = wanted;
  packed.storage = Storage::Packed;
  const BufferId result = add_buffer(std::move(packed));
  Conversion conversion{weights, wanted, result};
  conversion.winograd = true;
  conversions_.push_back(conversion);
  return result;
}

std::shared_ptr<const void> GraphBuilder::shared_by_steps(
    const std::string& key, const std::function<std::shared_ptr<const void>()>& make) {
  std::shared_ptr<const void>& entry = shared_by_steps_[key];
  if (entry == nullptr) {
    entry = make();
  }
  return entry;
}

BufferId GraphBuilder::owned_constant(const memory::desc& desc, const void* data) {
  const auto* first = static_cast<const uint8_t*>(data);
  auto copy = std::make_shared<const std::vector<uint8_t>>(first, first + desc.get_size());
  Buffer buffer;
  buffer.desc = desc;
  buffer.storage = Storage::Owned;
  buffer.owned = std::shared_ptr<const uint8_t>(copy, copy->data());
  return add_buffer(std::move(buffer));
}

BufferId GraphBuilder::owned_constant(
    const memory::desc& desc, std::shared_ptr<const std::vector<float>> values, size_t first) {
  ODNN_CHECK(
      values != nullptr && (first * sizeof(float) + desc.get_size()) <= values->size() * sizeof(float),
      "a derived constant of %zu bytes from float %zu lies outside its %zu floats",
      desc.get_size(),
      first,
      values == nullptr ? size_t{0} : values->size());
  const auto* bytes = reinterpret_cast<const uint8_t*>(values->data() + first);
  Buffer buffer;
  buffer.desc = desc;
  buffer.storage = Storage::Owned;
  buffer.owned = std::shared_ptr<const uint8_t>(std::move(values), bytes);
  return add_buffer(std::move(buffer));
}

void GraphBuilder::note_use(BufferId id) {
  Buffer& buffer = buffers_[root(id)];
  const auto position = static_cast<int64_t>(steps_.size());
  if (buffer.first_step < 0) {
    buffer.first_step = position;
  }
  buffer.last_step = std::max(buffer.last_step, position);
}

void GraphBuilder::add_primitive(
    const dnnl::primitive& primitive, const dnnl::primitive_desc_base& pd, const ArgList& args) {
  for (const auto& arg : args) {
    note_use(arg.second);
  }
  record({primitive, args, pd.scratchpad_desc(), HostLoop()});
}

void GraphBuilder::add_reorder(BufferId source, BufferId destination) {
  const memory::desc from = buffers_[source].desc; // copies: scratch() below adds buffers
  if (from == buffers_[destination].desc && from == plain_desc(from.get_dims(), from.get_data_type())) {
    // The same plain bytes: a copy, without a primitive's call (a few microseconds, for the rotary
    // tables each decoder layer's delegate hands on to the next).
    HostLoop copy;
    copy.kind = HostLoop::Kind::Copy;
    copy.extent = from.get_size();
    add_host_loop(copy, destination, source);
    return;
  }
  const memory::desc to = buffers_[destination].desc;
  const memory::dims dims = from.get_dims();
  const DataType from_type = from.get_data_type(), to_type = to.get_data_type();
  const bool converts_bf16 = dims == to.get_dims() && ((from_type == DataType::f32 && to_type == DataType::bf16) ||
                                                       (from_type == DataType::bf16 && to_type == DataType::f32));
  const bool from_plain = from == plain_desc(dims, from_type), to_plain = to == plain_desc(dims, to_type);
  if (converts_bf16 && from_plain && to_plain &&
      (from.get_size() / memory::data_type_size(from_type) <= kHostElementwiseValues || widens_bf16_)) {
    // A type conversion of a few thousand values (a bf16 decode step's f32 results and inputs): its
    // primitive's call costs more than the values. Without bf16 instructions, of any size: oneDNN
    // 3.13.1's AVX2 conversions turn -0 into +0 (measured on a Zen 3), the host keeps it.
    HostLoop convert;
    convert.kind = HostLoop::Kind::Convert;
    convert.bf16 = to.get_data_type() == DataType::bf16;
    convert.isa = host_row_isa();
    add_host_loop(convert, destination, source);
    return;
  }
  if (converts_bf16 && widens_bf16_ && from_plain != to_plain) {
    // Without bf16 instructions oneDNN 3.13.1 reorders a change of type and layout together in its
    // reference kernel ("simple:any": 5-6 ms for a bf16 ResNet-18's input image on a Zen 3, where the
    // f32 reorder of its layout takes 0.1) and turns -0 into +0: the type changes on the plain side, on
    // the host, the layout in one type.
    const BufferId middle = scratch(plain_desc(dims, from_plain ? to_type : from_type));
    add_reorder(source, middle);
    add_reorder(middle, destination);
    return;
  }
  dnnl::reorder::primitive_desc pd(engine_, buffers_[source].desc, engine_, to, default_attr());
  add_primitive(dnnl::reorder(pd), pd, {{DNNL_ARG_FROM, source}, {DNNL_ARG_TO, destination}});
}

void GraphBuilder::add_fill(BufferId target, float value) {
  HostLoop fill;
  fill.value = value;
  fill.bf16 = buffers_[target].desc.get_data_type() == DataType::bf16;
  add_host_loop(fill, target, kNoBuffer);
}

void GraphBuilder::add_host_loop(
    const HostLoop& loop, BufferId target, BufferId source, BufferId aux, const std::vector<BufferId>& more_sources) {
  ArgList args{{DNNL_ARG_DST, target}};
  if (source != kNoBuffer) {
    args.emplace_back(DNNL_ARG_SRC, source);
  }
  if (aux != kNoBuffer) {
    args.emplace_back(DNNL_ARG_DST_1, aux);
  }
  for (size_t i = 0; i < more_sources.size(); ++i) {
    args.emplace_back(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), more_sources[i]);
  }
  for (const auto& arg : args) {
    note_use(arg.second);
  }
  record({dnnl::primitive(), args, memory::desc(), loop});
}

void GraphBuilder::add_non_finite_branch(const std::function<void()>& fast, const std::function<void()>& exact) {
  HostLoop branch;
  branch.kind = HostLoop::Kind::NonFiniteBranch;
  const size_t conversions = conversions_.size();
  const size_t branch_index = steps_.size();
  record({dnnl::primitive(), {}, memory::desc(), branch});
  fast();
  const size_t jump_index = steps_.size();
  HostLoop jump;
  jump.kind = HostLoop::Kind::Jump;
  record({dnnl::primitive(), {}, memory::desc(), jump});
  exact();
  steps_[branch_index].host.skip = jump_index - branch_index;
  steps_[jump_index].host.skip = steps_.size() - jump_index - 1;
  ODNN_CHECK(conversions_.size() == conversions, "a guarded step converted a value inside its branch (internal error)");
}

void GraphBuilder::record(RecordedStep step) {
  step.origin = origin_;
  steps_.push_back(std::move(step));
}

std::string GraphBuilder::event_name(const RecordedStep& step) const {
  if (step.origin < 0) {
    return "outputs.reorder";
  }
  const StepKind kind = payload_.steps[static_cast<size_t>(step.origin)].kind;
  std::string name = step_kind_name(kind);
  for (char& c : name) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  name += "#" + std::to_string(step.origin);
  if (!step.primitive) {
    // A host loop that is the step's whole product takes the step's name, as its primitive would.
    const bool whole_step = kind == StepKind::HostElementwise || step.host.kind == HostLoop::Kind::VectorMatrix ||
                            step.host.kind == HostLoop::Kind::Int4VectorMatrix;
    return whole_step ? name : name + ".host";
  }
  // A reorder is the work of a REORDER step and of a RESHAPE that copies, a conversion elsewhere.
  const bool reorder = step.primitive.get_kind() == dnnl::primitive::kind::reorder;
  return reorder && kind != StepKind::Reorder && kind != StepKind::Reshape ? name + ".reorder" : name;
}

bool GraphBuilder::is_constant_buffer(BufferId id) const {
  const Storage storage = buffers_[root(id)].storage;
  return storage == Storage::Packed || storage == Storage::Program || storage == Storage::Owned;
}

// A graph output whose producer wrote plain memory of its own, or a plain reshape of such memory,
// is written straight into the caller's tensor; anything else (blocked layout, a permuted view,
// another output's or an input's bytes) gets a final reorder.
void GraphBuilder::bind_graph_outputs() {
  const auto num_inputs = static_cast<uint32_t>(payload_.inputs.size());
  for (uint32_t j = 0; j < payload_.outputs.size(); ++j) {
    const uint32_t id = payload_.outputs[j];
    const BufferId produced = buffer(id);
    const memory::desc plain = this->plain(id);
    Buffer& buffer = buffers_[root(produced)];
    const bool plain_root = buffer.desc == plain_desc(buffer.desc.get_dims(), buffer.desc.get_data_type());
    if (buffer.storage == Storage::Arena && buffers_[produced].desc == plain && plain_root &&
        buffer.desc.get_size() == plain.get_size()) {
      buffer.storage = Storage::GraphOutput;
      buffer.arg_index = num_inputs + j;
      continue;
    }
    Buffer output;
    output.desc = plain;
    output.storage = Storage::GraphOutput;
    output.arg_index = num_inputs + j;
    output.owner_value = id;
    add_reorder(produced, add_buffer(std::move(output)));
  }
}

// Greedy first-fit by decreasing size: buffers whose step ranges overlap never share bytes.
size_t GraphBuilder::plan_arena() {
  std::vector<BufferId> planned;
  for (BufferId id = 0; id < buffers_.size(); ++id) {
    if (buffers_[id].storage == Storage::Arena && buffers_[id].first_step >= 0) {
      planned.push_back(id);
    }
  }
  std::stable_sort(planned.begin(), planned.end(), [&](BufferId a, BufferId b) {
    return buffers_[a].desc.get_size() > buffers_[b].desc.get_size();
  });
  size_t total = 0;
  std::vector<BufferId> placed;
  std::vector<std::pair<size_t, size_t>> busy;
  for (BufferId id : planned) {
    Buffer& buffer = buffers_[id];
    const size_t size = round_up(buffer.desc.get_size());
    busy.clear();
    for (BufferId other_id : placed) {
      const Buffer& other = buffers_[other_id];
      if (other.first_step <= buffer.last_step && buffer.first_step <= other.last_step) {
        busy.emplace_back(other.offset, other.offset + round_up(other.desc.get_size()));
      }
    }
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (const auto& range : busy) {
      if (offset + size <= range.first) {
        break;
      }
      offset = std::max(offset, range.second);
    }
    buffer.offset = offset;
    total = std::max(total, offset + size);
    placed.push_back(id);
  }
  return total;
}

// Converts every constant a primitive wants in another layout, in the order they were asked for
// (a conversion may read an earlier one's result), into one block; or takes the block of a graph
// in `shared` that packed the same constants the same way.
void GraphBuilder::pack_constants(CompiledGraph& graph) {
  SharedBlocks* shared = shared_;
  size_t total = 0;
  std::vector<size_t> last_read(buffers_.size(), 0);
  std::vector<ConstantPacking> packings;
  std::vector<int64_t> packing_of(buffers_.size(), 0);
  for (size_t index = 0; index < conversions_.size(); ++index) {
    const Conversion& conversion = conversions_[index];
    Buffer& packed = buffers_[conversion.result];
    if (packed.storage == Storage::Packed) {
      packed.offset = total;
      total += round_up(packed.desc.get_size());
      const BufferId source_root = root(conversion.source);
      last_read[source_root] = index;
      const Buffer& source = buffers_[source_root];
      const int64_t source_key =
          source.storage == Storage::Packed ? packing_of[source_root] : static_cast<int64_t>(source.owner_value);
      packing_of[conversion.result] = -1 - static_cast<int64_t>(packings.size());
      packings.push_back(
          {source_key,
           buffers_[conversion.source].desc,
           packed.desc,
           conversion.scales == kNoBuffer ? std::vector<uint8_t>() : owned_bytes(buffers_[conversion.scales]),
           conversion.scale_mask,
           conversion.winograd});
    }
  }
  if (total == 0) {
    return;
  }
  if (shared != nullptr) {
    for (const SharedBlocks::PackedWeights& existing : shared->packed_weights) {
      if (existing.packings == packings) {
        graph.weights_storage_ = existing.block.lock();
        if (graph.weights_storage_) {
          return;
        }
      }
    }
  }
  graph.weights_storage_ = std::shared_ptr<uint8_t>(allocate_host_block(total));
  uint8_t* weights = graph.weights_storage_.get();
  for (size_t index = 0; index < conversions_.size(); ++index) {
    const Conversion& conversion = conversions_[index];
    Buffer& packed = buffers_[conversion.result];
    if (packed.storage != Storage::Packed) {
      continue;
    }
    const BufferId source_root = root(conversion.source);
    Buffer& source = buffers_[source_root];
    void* bytes = source.storage == Storage::Packed ? weights + source.offset : program_bytes(source_root);
    memory from(buffers_[conversion.source].desc, engine_, bytes);
    memory to(packed.desc, engine_, weights + packed.offset);
    if (conversion.winograd) {
      transform_winograd_weights(from, to, engine_, stream_);
    } else if (conversion.scales == kNoBuffer) {
      dnnl::reorder(from, to).execute(stream_, from, to);
    } else {
      Buffer& scales = buffers_[conversion.scales];
      dnnl::primitive_attr attr;
      attr.set_scales_mask(DNNL_ARG_SRC, conversion.scale_mask);
      const dnnl::reorder::primitive_desc pd(engine_, from.get_desc(), engine_, to.get_desc(), attr);
      memory scale_values(scales.desc, engine_, const_cast<uint8_t*>(scales.owned.get()));
      dnnl::reorder(pd).execute(
          stream_, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}, {DNNL_ARG_ATTR_SCALES | DNNL_ARG_SRC, scale_values}});
    }
    stream_.wait();
    if (last_read[source_root] == index) {
      if (shared != nullptr && source.program_bytes) { // null: packed from another packed buffer
        release_pages(*source.program_bytes);
      }
      source.program_bytes.reset(); // loaded again by make_memory if a step reads it as it is
    }
  }
  if (shared != nullptr) {
    auto& list = shared->packed_weights;
    list.erase(
        std::remove_if(list.begin(), list.end(), [](const auto& entry) { return entry.block.expired(); }), list.end());
    list.push_back({std::move(packings), graph.weights_storage_});
  }
}

// HostMemory.h ("huge_pages") says why. Each constant's program bytes are let go right after their
// copy, so the process never holds two copies of more than one constant.
void GraphBuilder::move_streamed_constants() {
  if (settings_.huge_pages == HugePages::never || !huge_pages_granted()) {
    return;
  }
  std::vector<BufferId> streamed;
  std::vector<bool> seen(buffers_.size(), false);
  size_t total = 0;
  for (const RecordedStep& step : steps_) {
    for (const auto& arg : step.args) {
      if (!step.primitive && step.host.kind == HostLoop::Kind::Gather && arg.first == DNNL_ARG_SRC) {
        continue; // a table a few rows of which are read a call (an embedding)
      }
      const BufferId source = root(arg.second);
      const uint32_t id = buffers_[source].owner_value;
      if (seen[source] || buffers_[source].storage != Storage::Program ||
          (shared_ != nullptr && id < shared_->in_huge_pages.size() && shared_->in_huge_pages[id])) {
        continue;
      }
      seen[source] = true;
      streamed.push_back(source);
      program_bytes(source); // loaded now where no step's memory has been made yet
      total += round_up(buffers_[source].program_bytes->size());
    }
  }
  if (total == 0 || (settings_.huge_pages == HugePages::large && total < kLargeStreamedBytes)) {
    return;
  }
  const std::shared_ptr<uint8_t> block = allocate_huge_page_block(total);
  const auto release = [](void* context, void* /*data*/, size_t /*size*/) {
    delete static_cast<std::shared_ptr<uint8_t>*>(context);
  };
  size_t offset = 0;
  const runtime::Error copied = run_in_thread_pool([&] {
    for (const BufferId source : streamed) {
      std::shared_ptr<runtime::FreeableBuffer>& bytes = buffers_[source].program_bytes;
      const auto* from = static_cast<const uint8_t*>(bytes->data());
      uint8_t* to = block.get() + offset;
      // On the pool: the first touch of each huge page is the slow part, and in a VM its wait on the
      // host's backing overlaps across threads.
      parallel_chunks(bytes->size(), size_t{1} << 20, [&](size_t begin, size_t end) {
        std::memcpy(to + begin, from + begin, end - begin);
      });
      auto holder = std::make_unique<std::shared_ptr<uint8_t>>(block); // the FreeableBuffer's context
      auto moved = std::make_shared<runtime::FreeableBuffer>(to, bytes->size(), release, holder.get());
      holder.release();
      offset += round_up(bytes->size());
      const uint32_t id = buffers_[source].owner_value;
      if (shared_ != nullptr) {
        shared_->constants[id] = moved;
        shared_->in_huge_pages.resize(shared_->constants.size());
        shared_->in_huge_pages[id] = true;
      }
      bytes = std::move(moved); // the last holder of the program's bytes: freed here
    }
    return runtime::Error::Ok;
  });
  ODNN_CHECK(copied == runtime::Error::Ok, "copying %zu bytes of streamed constants", total);
  ET_LOG(Debug, "OneDnnBackend: %zu streamed constants (%zu bytes) moved into huge pages", streamed.size(), total);
}

memory GraphBuilder::make_memory(BufferId id, CompiledGraph& graph) {
  size_t view_bytes = 0; // where an alias chain starts inside its root's bytes
  BufferId base_id = id;
  for (; buffers_[base_id].storage == Storage::Alias; base_id = buffers_[base_id].alias_of) {
    view_bytes += buffers_[base_id].offset;
  }
  const Buffer& base = buffers_[base_id];
  const memory::desc& desc = buffers_[id].desc;
  switch (base.storage) {
    case Storage::Arena: {
      memory in_arena(desc, engine_, nullptr); // pointed into the block execute() leases
      graph.arena_slots_.push_back({in_arena, base.offset + view_bytes});
      return in_arena;
    }
    case Storage::Packed:
      return memory(desc, engine_, graph.weights_storage_.get() + base.offset + view_bytes);
    case Storage::Program: {
      auto* bytes = static_cast<uint8_t*>(program_bytes(base_id));
      graph.program_constants_.push_back(base.program_bytes);
      return memory(desc, engine_, bytes + view_bytes);
    }
    case Storage::GraphInput:
    case Storage::GraphOutput: {
      memory bound(desc, engine_, nullptr);
      graph.bindings_.push_back({bound, base.arg_index, view_bytes});
      return bound;
    }
    case Storage::Owned: {
      ODNN_CHECK(view_bytes == 0, "buffer %u: a block of init-time bytes cannot be a view", id);
      graph.owned_constants_.push_back(base.owned); // no step writes a constant
      return memory(desc, engine_, const_cast<uint8_t*>(base.owned.get()));
    }
    case Storage::Alias:
      break;
  }
  fail(Error::Internal, "buffer %u has no storage", id);
}

void GraphBuilder::finish(CompiledGraph& graph) {
  bind_graph_outputs();
  const size_t activations = plan_arena();
  size_t scratchpad = 0;
  for (const RecordedStep& step : steps_) {
    scratchpad = std::max(scratchpad, round_up(step.scratchpad.get_size()));
  }
  graph.arena_bytes_ = activations + scratchpad;
  graph.arena_membership_.emplace(graph.arena_bytes_);
  pack_constants(graph);
  move_streamed_constants();

  // Only buffers some step touches get memory objects; unused constants die with the builder.
  std::vector<memory> memories(buffers_.size());
  auto memory_of = [&](BufferId id) -> const memory& {
    if (!memories[id]) {
      memories[id] = make_memory(id, graph);
      graph.memories_.push_back(memories[id]);
    }
    return memories[id];
  };
  // Exactly: a step is a large record, and a dynamic program keeps several graphs.
  graph.steps_.reserve(steps_.size());
  graph.step_names_.reserve(steps_.size());
  for (const RecordedStep& recorded : steps_) {
    graph.step_names_.push_back(event_name(recorded));
    CompiledGraph::PreparedStep step;
    if (!recorded.primitive) {
      step.host = recorded.host;
      for (const auto& [arg, buffer] : recorded.args) {
        if (arg >= DNNL_ARG_MULTIPLE_SRC) {
          step.host_sources.push_back(memory_of(buffer)); // recorded in order
          continue;
        }
        (arg == DNNL_ARG_DST ? step.host_dst : arg == DNNL_ARG_SRC ? step.host_src : step.host_aux) = memory_of(buffer);
      }
      if (step.host_dst) {
        const memory::desc dst_desc = step.host_dst.get_desc();
        step.host_dst_count = dst_desc.get_size() / memory::data_type_size(dst_desc.get_data_type());
      }
      graph.steps_.push_back(std::move(step));
      continue;
    }
    graph.primitives_.push_back(recorded.primitive);
    step.primitive = recorded.primitive.get();
    for (const auto& arg : recorded.args) {
      step.args.push_back({arg.first, memory_of(arg.second).get()});
    }
    if (recorded.scratchpad.get_size() > 0) {
      memory scratch(recorded.scratchpad, engine_, nullptr); // in the arena, after the activations
      graph.memories_.push_back(scratch);
      graph.arena_slots_.push_back({scratch, activations});
      step.args.push_back({DNNL_ARG_SCRATCHPAD, scratch.get()});
    }
    graph.steps_.push_back(std::move(step));
  }
  // A NaN guard also takes its exact path for a constant holding a NaN or an infinity, anywhere in
  // the graph (the value may reach it through other steps): the constants are scanned once, here.
  const bool guarded = std::any_of(steps_.begin(), steps_.end(), [](const RecordedStep& recorded) {
    return !recorded.primitive && recorded.host.kind == HostLoop::Kind::NonFiniteBranch;
  });
  for (BufferId id = 0; guarded && id < buffers_.size() && !graph.constants_non_finite_; ++id) {
    graph.constants_non_finite_ = memories[id] && is_constant_buffer(id) && memory_holds_non_finite(memories[id]);
  }
  graph.guarded_ = guarded;
}

} // namespace executorch::backends::onednn
