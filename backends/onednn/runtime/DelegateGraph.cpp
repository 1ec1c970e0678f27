// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
#include "DelegateGraph.h"

#include <algorithm>

#include <executorch/runtime/platform/log.h>

#include "DynamicShapes.h"
#include "InitError.h"
#include "Threading.h"

namespace executorch::backends::onednn {

using runtime::Error;

std::unique_ptr<DelegateGraph> DelegateGraph::create(Payload payload, const runtime::NamedDataMap* named_data) {
  std::unique_ptr<DelegateGraph> handle(new DelegateGraph());
  handle->entries_.reserve(kMaxCachedShapes); // compile() then never reallocates (it must not throw)
  if (payload.symbols.empty()) {
    handle->entries_.push_back({Sizes{}, CompiledGraph::build(payload, named_data), 0});
    return handle;
  }
  handle->payload_ = std::move(payload);
  handle->tensor_args_.reserve(handle->payload_.inputs.size() + handle->payload_.outputs.size());
  handle->find_size_sources();
  Sizes upper{};
  for (size_t s = 0; s < handle->payload_.symbols.size(); ++s) {
    upper[s] = handle->payload_.symbols[s].max;
  }
  // Loads every constant a step reads into shared_, where later sizes find them.
  handle->entries_.push_back({upper, handle->build(upper, named_data), 0});
  return handle;
}

std::unique_ptr<CompiledGraph> DelegateGraph::build(const Sizes& sizes, const runtime::NamedDataMap* named_data) {
  const std::vector<int64_t> values(sizes.begin(), sizes.begin() + payload_.symbols.size());
  return CompiledGraph::build(specialize(payload_, values), named_data, &shared_);
}

// validate_dynamic_shapes() found, for each dynamic size, a graph input dim that gives it one to one.
void DelegateGraph::find_size_sources() {
  size_sources_.clear();
  for (const uint32_t index : payload_.size_sources) {
    const SymbolicDim& entry = payload_.symbolic_dims[index];
    const auto position = std::find(payload_.inputs.begin(), payload_.inputs.end(), entry.value);
    size_sources_.push_back(
        {static_cast<size_t>(position - payload_.inputs.begin()),
         payload_.values[entry.value].dims.size(),
         entry.dim,
         &entry.code,
         entry.code.size() == 2});
  }
}

// Reads each size from its input dim (directly, or solving 2 * s = size, ...); the compiled graph then
// checks every input against the sizes they imply.
Error DelegateGraph::read_sizes(runtime::Span<runtime::EValue*> args, Sizes& sizes) const noexcept {
  for (size_t symbol = 0; symbol < size_sources_.size(); ++symbol) {
    const SizeSource& source = size_sources_[symbol];
    const size_t index = source.input;
    if (index >= args.size() || args[index] == nullptr || !args[index]->isTensor() ||
        static_cast<size_t>(args[index]->toTensor().dim()) != source.rank) {
      ET_LOG(Error, "OneDnnBackend: input %zu is not a tensor of rank %zu", index, source.rank);
      return Error::InvalidArgument;
    }
    const int64_t size = args[index]->toTensor().size(static_cast<int>(source.dim));
    const SymbolBounds& bounds = payload_.symbols[symbol];
    int64_t value = size;
    const bool solved =
        source.bare ||
        solve_for_symbol(*source.code, symbol, bounds, size, sizes.data(), payload_.symbols.size(), value);
    if (!solved || value < bounds.min || value > bounds.max) {
      ET_LOG(
          Error,
          "OneDnnBackend: input %zu dim %u is %lld, which no dynamic size in the range [%lld, %lld] the "
          "program was exported for gives",
          index,
          source.dim,
          static_cast<long long>(size),
          static_cast<long long>(bounds.min),
          static_cast<long long>(bounds.max));
      return Error::InvalidArgument;
    }
    sizes[symbol] = value;
  }
  return Error::Ok;
}

Error DelegateGraph::compile(const Sizes& sizes, CompiledGraph*& graph) noexcept {
  for (Entry& entry : entries_) {
    if (entry.sizes == sizes) {
      entry.last_use = ++clock_;
      graph = entry.graph.get();
      return Error::Ok;
    }
  }
  std::unique_ptr<CompiledGraph> built;
  const Error error = run_catching("compiling for these input sizes failed", [&]() {
    run_in_thread_pool([&]() -> Error {
      built = build(sizes, nullptr);
      return Error::Ok;
    });
  });
  if (error != Error::Ok) {
    return error;
  }
  if (entries_.size() >= kMaxCachedShapes) {
    const auto oldest = std::min_element(
        entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) { return a.last_use < b.last_use; });
    entries_.erase(oldest);
  }
  entries_.push_back({sizes, std::move(built), ++clock_});
  graph = entries_.back().graph.get();
  return Error::Ok;
}

// Drops the size arguments (checked to be integers) from `args`, into tensor_args_ (no allocation:
// reserved in create()).
Error DelegateGraph::skip_size_args(runtime::Span<runtime::EValue*>& args) noexcept {
  const size_t expected = payload_.inputs.size() + payload_.size_args.size() + payload_.outputs.size();
  if (payload_.size_args.empty() || args.size() != expected) {
    return Error::Ok; // CompiledGraph::execute() reports a wrong count
  }
  tensor_args_.clear();
  size_t next = 0;
  for (size_t index = 0; index < args.size(); ++index) {
    if (next < payload_.size_args.size() && payload_.size_args[next] == index) {
      ++next;
      if (args[index] == nullptr || !args[index]->isInt()) {
        ET_LOG(Error, "OneDnnBackend: argument %zu should be a size (an integer)", index);
        return Error::InvalidArgument;
      }
      continue;
    }
    tensor_args_.push_back(args[index]);
  }
  args = runtime::Span<runtime::EValue*>(tensor_args_.data(), tensor_args_.size());
  return Error::Ok;
}

Error DelegateGraph::execute(runtime::Span<runtime::EValue*> args, runtime::EventTracer* tracer) noexcept {
  // A second thread would rebind the first one's memory objects mid-run: a wrong result, not a crash.
  if (executing_.exchange(true, std::memory_order_acquire)) {
    ET_LOG(
        Error,
        "OneDnnBackend: this handle is already executing on another thread; a handle runs one "
        "execute() at a time");
    return Error::InvalidState;
  }
  struct ClearOnExit {
    std::atomic<bool>& flag;
    ~ClearOnExit() {
      flag.store(false, std::memory_order_release);
    }
  } clear{executing_};
  return execute_exclusively(args, tracer);
}

Error DelegateGraph::execute_exclusively(runtime::Span<runtime::EValue*> args, runtime::EventTracer* tracer) noexcept {
  if (payload_.symbols.empty()) {
    return entries_.front().graph->execute(args, tracer);
  }
  Error error = skip_size_args(args);
  if (error != Error::Ok) {
    return error;
  }
  Sizes sizes{};
  error = read_sizes(args, sizes);
  CompiledGraph* graph = nullptr;
  if (error == Error::Ok) {
    error = compile(sizes, graph);
  }
  return error == Error::Ok ? graph->execute(args, tracer) : error;
}

} // namespace executorch::backends::onednn
