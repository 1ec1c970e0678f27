// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// The delegate handle: the compiled graph for each set of input sizes. A static program has exactly
// one, built in init(). A program exported with dynamic sizes gets one built in init() at every
// size's maximum (which validates the whole program and sizes its arena for the upper bound), and
// one more per set of sizes execute() meets, kept in a small least-recently-used cache.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/named_data_map.h>
#include <executorch/runtime/core/span.h>

#include "CompiledGraph.h"
#include "Payload.h"

namespace executorch::backends::onednn {

class DelegateGraph {
 public:
  // Compiled graphs kept for a dynamic program (each holds its primitives; the constants and packed
  // weights are shared where they can be, arenas come from the process's pool).
  static constexpr size_t kMaxCachedShapes = 8;

  // Throws InitError or dnnl::error. `named_data` is read during create() only.
  static std::unique_ptr<DelegateGraph> create(Payload payload, const runtime::NamedDataMap* named_data);

  // args: graph inputs then graph outputs. Never throws; allocates only to compile a new shape.
  // InvalidState while another thread executes this handle: like ExecuTorch's Method, a handle
  // runs one execution at a time (its bound memory objects and shape cache are its own).
  runtime::Error execute(runtime::Span<runtime::EValue*> args, runtime::EventTracer* tracer = nullptr) noexcept;

 private:
  using Sizes = std::array<int64_t, kMaxSymbols>;
  struct Entry {
    Sizes sizes{};
    std::unique_ptr<CompiledGraph> graph;
    uint64_t last_use = 0;
  };

  // Where execute() reads a dynamic size: input `input`'s dim `dim`, whose expression is `code`.
  struct SizeSource {
    size_t input = 0;
    size_t rank = 0;
    uint32_t dim = 0;
    const std::vector<int64_t>* code = nullptr; // in payload_
    bool bare = false;                          // the code is exactly SYMBOL i: the dim is the size
  };

  DelegateGraph() = default;
  runtime::Error execute_exclusively(runtime::Span<runtime::EValue*> args, runtime::EventTracer* tracer) noexcept;
  void find_size_sources();
  runtime::Error skip_size_args(runtime::Span<runtime::EValue*>& args) noexcept;
  runtime::Error read_sizes(runtime::Span<runtime::EValue*> args, Sizes& sizes) const noexcept;
  runtime::Error compile(const Sizes& sizes, CompiledGraph*& graph) noexcept;
  std::unique_ptr<CompiledGraph> build(const Sizes& sizes, const runtime::NamedDataMap* named_data);

  Payload payload_; // a dynamic program's, to compile new shapes from (empty for a static one)
  SharedBlocks shared_;
  std::vector<Entry> entries_;
  uint64_t clock_ = 0;
  std::vector<runtime::EValue*> tensor_args_; // execute()'s args less the size arguments
  std::vector<SizeSource> size_sources_;      // by symbol
  std::atomic<bool> executing_{false};
};

} // namespace executorch::backends::onednn
