// The ExecuTorch BackendInterface for "OneDnnBackend": init() parses and compiles the payload,
// execute() runs the compiled graph, destroy() frees it. Registered from a static initializer.
#include <new>

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/platform/log.h>

#include "CompiledGraph.h"
#include "InitError.h"
#include "Payload.h"

namespace executorch::backends::onednn {
namespace {

using runtime::ArrayRef;
using runtime::BackendExecutionContext;
using runtime::BackendInitContext;
using runtime::CompileSpec;
using runtime::DelegateHandle;
using runtime::Error;
using runtime::EValue;
using runtime::FreeableBuffer;
using runtime::Result;
using runtime::Span;

class OneDnnBackend final : public runtime::BackendInterface {
 public:
  bool is_available() const override {
#if defined(__x86_64__) || defined(_M_X64)
    // oneDNN dispatches on the CPU's ISA at run time and falls back to reference code.
    try {
      return dnnl::engine::get_count(dnnl::engine::kind::cpu) > 0;
    } catch (...) {
      return false;
    }
#else
    return false;
#endif
  }

  Result<DelegateHandle*> init(
      BackendInitContext& context,
      FreeableBuffer* processed,
      ArrayRef<CompileSpec> /*compile_specs*/) const override {
    try {
      ODNN_CHECK(processed != nullptr, "no payload");
      const Result<const void*> data = processed->data_safe();
      ODNN_CHECK(data.ok(), "payload is not addressable");
      const Payload payload =
          parse_payload(static_cast<const uint8_t*>(data.get()), processed->size());
      std::unique_ptr<CompiledGraph> graph =
          CompiledGraph::build(payload, context.get_named_data_map());
      processed->Free();
      return graph.release();
    } catch (const InitError& error) {
      ET_LOG(Error, "OneDnnBackend: init failed: %s", error.what());
      return error.code();
    } catch (const dnnl::error& error) {
      ET_LOG(
          Error,
          "OneDnnBackend: init failed in oneDNN: %s (status %d)",
          error.what(),
          static_cast<int>(error.status));
      return error.status == dnnl_unimplemented ? Error::NotSupported : Error::Internal;
    } catch (const std::bad_alloc&) {
      ET_LOG(Error, "OneDnnBackend: init failed: out of memory");
      return Error::MemoryAllocationFailed;
    } catch (const std::exception& error) {
      ET_LOG(Error, "OneDnnBackend: init failed: %s", error.what());
      return Error::Internal;
    }
  }

  Error execute(BackendExecutionContext& /*context*/, DelegateHandle* handle, Span<EValue*> args)
      const override {
    if (handle == nullptr) {
      ET_LOG(Error, "OneDnnBackend: execute called with a null handle");
      return Error::InvalidArgument;
    }
    return static_cast<CompiledGraph*>(handle)->execute(args);
  }

  void destroy(DelegateHandle* handle) const override {
    delete static_cast<CompiledGraph*>(handle);
  }
};

OneDnnBackend backend_instance;
const runtime::Backend backend_entry{"OneDnnBackend", &backend_instance};
const Error registration = runtime::register_backend(backend_entry);

} // namespace
} // namespace executorch::backends::onednn
