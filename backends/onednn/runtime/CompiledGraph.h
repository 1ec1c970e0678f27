// A delegate handle: every oneDNN object the subgraph needs, built once in init(), and execute(),
// which binds the caller's tensors and runs the prepared steps in order.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/named_data_map.h>
#include <executorch/runtime/core/span.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "HostLoops.h"
#include "Payload.h"

namespace executorch::backends::onednn {

// The process-wide CPU engine and stream (created on first use).
const dnnl::engine& cpu_engine();
dnnl::stream& cpu_stream();

class CompiledGraph {
 public:
  // Builds every primitive and fetches every constant; throws InitError or dnnl::error.
  static std::unique_ptr<CompiledGraph> build(
      const Payload& payload,
      const runtime::NamedDataMap* named_data);

  // args: graph inputs then graph outputs. Never throws, never allocates.
  runtime::Error execute(runtime::Span<runtime::EValue*> args) noexcept;

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
    size_t host_dst_count = 0;
  };
  // A memory object whose data handle is the tensor at args[arg_index].
  struct Binding {
    dnnl::memory memory;
    uint32_t arg_index;
  };

  runtime::Error check_argument(
      const char* role,
      size_t index,
      runtime::EValue* arg,
      const std::vector<int32_t>& expected,
      bool resize) const;

  std::vector<std::vector<int32_t>> input_sizes_;
  std::vector<std::vector<int32_t>> output_sizes_;
  std::vector<dnnl::primitive> primitives_;
  std::vector<dnnl::memory> memories_; // keeps the objects referenced by `steps_` alive
  std::vector<PreparedStep> steps_;
  std::vector<Binding> bindings_;
  std::unique_ptr<uint8_t[]> arena_storage_;
  size_t arena_bytes_ = 0;
};

} // namespace executorch::backends::onednn
