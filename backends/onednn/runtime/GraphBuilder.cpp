#include "GraphBuilder.h"

#include <algorithm>
#include <cstring>

#include "CompiledGraph.h"
#include "InitError.h"

namespace executorch::backends::onednn {
namespace {

using runtime::Error;

constexpr size_t kAlignment = 64;

size_t round_up(size_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

} // namespace

GraphBuilder::GraphBuilder(
    const Payload& payload,
    const runtime::NamedDataMap* named_data,
    const dnnl::engine& engine,
    dnnl::stream& stream)
    : payload_(payload),
      named_data_(named_data),
      engine_(engine),
      stream_(stream),
      value_buffer_(payload.values.size(), kNoValue) {
  for (uint32_t i = 0; i < payload.inputs.size(); ++i) {
    const uint32_t id = payload.inputs[i];
    Buffer buffer;
    buffer.desc = plain_desc(dims(id));
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

memory::desc GraphBuilder::desc(uint32_t id) {
  return buffers_[buffer(id)].desc;
}

BufferId GraphBuilder::buffer(uint32_t id) {
  if (value_buffer_[id] == kNoValue) {
    ODNN_CHECK(is_constant(id), "value %u is read before it is produced", id);
    value_buffer_[id] = fetch_constant(id);
  }
  return value_buffer_[id];
}

// Copies the constant's bytes into memory of our own, then releases the data map's buffer.
BufferId GraphBuilder::fetch_constant(uint32_t id) {
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
  runtime::FreeableBuffer bytes = std::move(data.get());
  const size_t expected = static_cast<size_t>(element_count(record.dims)) * sizeof(float);
  ODNN_CHECK(
      bytes.size() == expected,
      "constant value %u (key '%s'): %zu bytes, expected %zu for dims %s",
      id,
      record.key.c_str(),
      bytes.size(),
      expected,
      dims_string(dims(id)).c_str());
  runtime::Result<const void*> source = bytes.data_safe();
  ODNN_CHECK(
      source.ok() && source.get() != nullptr,
      "constant value %u (key '%s'): data is not addressable",
      id,
      record.key.c_str());
  Buffer buffer;
  buffer.desc = plain_desc(dims(id));
  buffer.storage = Storage::Owned;
  buffer.owned = memory(buffer.desc, engine_);
  buffer.owner_value = id;
  std::memcpy(buffer.owned.get_data_handle(), source.get(), expected);
  bytes.Free();
  return add_buffer(std::move(buffer));
}

BufferId GraphBuilder::input(uint32_t id, const memory::desc& wanted) {
  return as_layout(buffer(id), wanted);
}

BufferId GraphBuilder::input_view(
    uint32_t id,
    const memory::desc& view,
    const memory::desc& wanted) {
  return as_layout(alias(plain_input(id), view), wanted);
}

BufferId GraphBuilder::as_layout(BufferId source, const memory::desc& wanted) {
  if (buffers_[source].desc == wanted) {
    return source;
  }
  for (const Conversion& conversion : conversions_) {
    if (conversion.source == source && conversion.wanted == wanted) {
      return conversion.result;
    }
  }
  BufferId result;
  const Buffer& source_root = buffers_[root(source)];
  if (source_root.storage == Storage::Owned) {
    // Constants (weights in the layout a primitive picked) are converted once, here.
    memory from(buffers_[source].desc, engine_, source_root.owned.get_data_handle());
    Buffer converted;
    converted.desc = wanted;
    converted.storage = Storage::Owned;
    converted.owned = memory(wanted, engine_);
    dnnl::reorder(from, converted.owned).execute(stream_, from, converted.owned);
    stream_.wait();
    result = add_buffer(std::move(converted));
  } else {
    result = scratch(wanted);
    add_reorder(source, result);
  }
  conversions_.push_back({source, wanted, result});
  return result;
}

BufferId GraphBuilder::alias(BufferId base, const memory::desc& view) {
  if (buffers_[base].desc == view) {
    return base;
  }
  for (BufferId id = 0; id < buffers_.size(); ++id) {
    const Buffer& existing = buffers_[id];
    if (existing.storage == Storage::Alias && existing.alias_of == base && existing.desc == view) {
      return id;
    }
  }
  Buffer buffer;
  buffer.desc = view;
  buffer.storage = Storage::Alias;
  buffer.alias_of = base;
  return add_buffer(std::move(buffer));
}

BufferId GraphBuilder::define(uint32_t id, const memory::desc& desc) {
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

void GraphBuilder::note_use(BufferId id) {
  Buffer& buffer = buffers_[root(id)];
  const auto position = static_cast<int64_t>(steps_.size());
  if (buffer.first_step < 0) {
    buffer.first_step = position;
  }
  buffer.last_step = std::max(buffer.last_step, position);
}

void GraphBuilder::add_primitive(
    const dnnl::primitive& primitive,
    const dnnl::primitive_desc_base& pd,
    const ArgList& args) {
  for (const auto& arg : args) {
    note_use(arg.second);
  }
  steps_.push_back({primitive, args, pd.scratchpad_desc(), HostLoop()});
}

void GraphBuilder::add_reorder(BufferId source, BufferId destination) {
  dnnl::reorder::primitive_desc pd(
      engine_, buffers_[source].desc, engine_, buffers_[destination].desc, default_attr());
  add_primitive(dnnl::reorder(pd), pd, {{DNNL_ARG_FROM, source}, {DNNL_ARG_TO, destination}});
}

void GraphBuilder::add_fill(BufferId target, float value) {
  HostLoop fill;
  fill.value = value;
  add_host_loop(fill, target, kNoBuffer);
}

void GraphBuilder::add_host_loop(const HostLoop& loop, BufferId target, BufferId source) {
  ArgList args{{DNNL_ARG_DST, target}};
  if (source != kNoBuffer) {
    args.emplace_back(DNNL_ARG_SRC, source);
  }
  for (const auto& arg : args) {
    note_use(arg.second);
  }
  steps_.push_back({dnnl::primitive(), args, memory::desc(), loop});
}

// A graph output whose producer wrote plain memory of its own is written straight into the
// caller's tensor; anything else (blocked layout, an alias of another value) gets a final reorder.
void GraphBuilder::bind_graph_outputs() {
  const auto num_inputs = static_cast<uint32_t>(payload_.inputs.size());
  for (uint32_t j = 0; j < payload_.outputs.size(); ++j) {
    const uint32_t id = payload_.outputs[j];
    const BufferId produced = buffer(id);
    const memory::desc plain = plain_desc(dims(id));
    Buffer& buffer = buffers_[produced];
    if (buffer.storage == Storage::Arena && buffer.owner_value == id && buffer.desc == plain) {
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
        busy.emplace_back(other.arena_offset, other.arena_offset + round_up(other.desc.get_size()));
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
    buffer.arena_offset = offset;
    total = std::max(total, offset + size);
    placed.push_back(id);
  }
  return total;
}

memory GraphBuilder::make_memory(BufferId id, uint8_t* arena, CompiledGraph& graph) {
  const Buffer& base = buffers_[root(id)];
  const memory::desc& desc = buffers_[id].desc;
  switch (base.storage) {
    case Storage::Arena:
      return memory(desc, engine_, arena + base.arena_offset);
    case Storage::Owned:
      if (root(id) == id) {
        return base.owned;
      }
      graph.memories_.push_back(base.owned); // a view does not keep its constant's bytes alive
      return memory(desc, engine_, base.owned.get_data_handle());
    case Storage::GraphInput:
    case Storage::GraphOutput: {
      memory bound(desc, engine_, nullptr);
      graph.bindings_.push_back({bound, base.arg_index});
      return bound;
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
  graph.arena_storage_.reset(new uint8_t[graph.arena_bytes_ + kAlignment]);
  const auto address = reinterpret_cast<uintptr_t>(graph.arena_storage_.get());
  uint8_t* arena = graph.arena_storage_.get() + (kAlignment - address % kAlignment) % kAlignment;

  // Only buffers some step touches get memory objects; unused constants die with the builder.
  std::vector<memory> memories(buffers_.size());
  auto memory_of = [&](BufferId id) -> const memory& {
    if (!memories[id]) {
      memories[id] = make_memory(id, arena, graph);
      graph.memories_.push_back(memories[id]);
    }
    return memories[id];
  };
  for (const RecordedStep& recorded : steps_) {
    CompiledGraph::PreparedStep step;
    if (!recorded.primitive) {
      step.host = recorded.host;
      step.host_dst = memory_of(recorded.args[0].second);
      if (recorded.args.size() > 1) {
        step.host_src = memory_of(recorded.args[1].second);
      }
      step.host_dst_count = step.host_dst.get_desc().get_size() / sizeof(float);
      graph.steps_.push_back(std::move(step));
      continue;
    }
    graph.primitives_.push_back(recorded.primitive);
    step.primitive = recorded.primitive.get();
    for (const auto& arg : recorded.args) {
      step.args.push_back({arg.first, memory_of(arg.second).get()});
    }
    if (recorded.scratchpad.get_size() > 0) {
      memory shared(recorded.scratchpad, engine_, arena + activations);
      graph.memories_.push_back(shared);
      step.args.push_back({DNNL_ARG_SCRATCHPAD, shared.get()});
    }
    graph.steps_.push_back(std::move(step));
  }
}

} // namespace executorch::backends::onednn
