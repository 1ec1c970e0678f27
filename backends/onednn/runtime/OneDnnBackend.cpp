// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// The ExecuTorch BackendInterface for "OneDnnBackend": init() parses and compiles the payload,
// execute() runs the compiled graph, destroy() frees it, set_option()/get_option() handle
// "num_threads", "max_isa", "verbose", "winograd", "int4_products" and "huge_pages" (and get_option() reports
// "primitive_cache_capacity"). Registered from a static initializer.
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <variant>

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/platform/log.h>

#include "CpuIsa.h"
#include "DelegateGraph.h"
#include "HostMemory.h"
#include "InitError.h"
#include "Payload.h"
#include "StepBuilders.h"
#include "Threading.h"
#include "Winograd.h"

namespace executorch::backends::onednn {
namespace {

using runtime::ArrayRef;
using runtime::BackendExecutionContext;
using runtime::BackendInitContext;
using runtime::BackendOption;
using runtime::BackendOptionContext;
using runtime::CompileSpec;
using runtime::DelegateHandle;
using runtime::Error;
using runtime::EValue;
using runtime::FreeableBuffer;
using runtime::Result;
using runtime::Span;

// oneDNN's verbose level (0: off, 1: each primitive's execution, 2: also its creation), printed to
// stdout by oneDNN. It starts as ONEDNN_VERBOSE says, which oneDNN reads itself.
constexpr char kVerboseOption[] = "verbose";
std::atomic<int> verbose_level{-1}; // -1: not set here

int current_verbose_level() {
  const int level = verbose_level.load();
  if (level >= 0) {
    return level;
  }
  const char* text = std::getenv("ONEDNN_VERBOSE");
  return text == nullptr ? 0 : std::atoi(text);
}

// oneDNN keeps up to 1024 primitives after their last user releases them (its default, made for
// frameworks that create primitives on every call). Our graphs hold their own primitives, so the cache
// has only to span one graph's build, where layers of one shape share a primitive; a dynamic LLM makes
// new primitives for each new prompt length, and with 1024 kept the 1.1B 8da4w program grew to 1469 MB
// over 58 lengths against 1394 with 256 (BENCHMARKS.md). ONEDNN_PRIMITIVE_CACHE_CAPACITY, which oneDNN
// reads itself, still decides when set.
constexpr int kPrimitiveCacheCapacity = 256;
constexpr char kPrimitiveCacheOption[] = "primitive_cache_capacity"; // get_option() only

void bound_primitive_cache() noexcept {
  static const bool bounded = [] {
    if (std::getenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY") != nullptr) {
      return false;
    }
    const dnnl_status_t status = dnnl_set_primitive_cache_capacity(kPrimitiveCacheCapacity);
    if (status != dnnl_success) { // costs memory only: the programs still run
      ET_LOG(
          Error,
          "OneDnnBackend: oneDNN refused a primitive cache of %d entries (status %d); keeping its default",
          kPrimitiveCacheCapacity,
          static_cast<int>(status));
    }
    return status == dnnl_success;
  }();
  (void)bounded;
}

// The options that take one of a few ints, 0..last: how each is checked, applied and reported.
struct ChoiceOption {
  const char* key;
  int last;
  const char* meanings; // for the line refusing another value
  Error (*apply)(int);
  int (*current)();
};

template <typename Choice, void (*set)(Choice) noexcept>
Error set_choice(int value) {
  set(static_cast<Choice>(value));
  return Error::Ok;
}

template <typename Choice, Choice (*get)() noexcept>
int current_choice() {
  return static_cast<int>(get());
}

Error set_verbose_level(int level) {
  if (dnnl_set_verbose(level) != dnnl_success) {
    ET_LOG(Error, "OneDnnBackend: oneDNN refused verbose level %d", level);
    return Error::Internal;
  }
  verbose_level.store(level);
  return Error::Ok;
}

const ChoiceOption kChoiceOptions[] = {
    {kVerboseOption, 2, "0 (off), 1 (executions) or 2 (also creations)", set_verbose_level, current_verbose_level},
    {kWinogradOption,
     2,
     "0 (never), 1 (on AVX2 CPUs) or 2 (wherever it applies)",
     set_choice<WinogradUse, set_winograd_use>,
     current_choice<WinogradUse, winograd_use>},
    {kInt4ProductsOption,
     1,
     "0 (fast) or 1 (exact)",
     set_choice<Int4Products, set_int4_products>,
     current_choice<Int4Products, int4_products>},
    {kHugePagesOption,
     2,
     "0 (never), 1 (where a graph streams 16 MiB of constants) or 2 (always)",
     set_choice<HugePages, set_huge_pages>,
     current_choice<HugePages, huge_pages>},
};
constexpr size_t kChoiceCount = sizeof(kChoiceOptions) / sizeof(kChoiceOptions[0]);

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
      BackendInitContext& context, FreeableBuffer* processed, ArrayRef<CompileSpec> /*compile_specs*/) const override {
    bound_primitive_cache();
    std::unique_ptr<DelegateGraph> graph;
    const Error error = run_catching("init failed", [&]() {
      ODNN_CHECK(processed != nullptr, "no payload");
      const Result<const void*> data = processed->data_safe();
      ODNN_CHECK(data.ok(), "payload is not addressable");
      Payload payload = parse_payload(static_cast<const uint8_t*>(data.get()), processed->size());
      // In the arena execute() uses: oneDNN sizes some kernels for the threads it sees here.
      run_in_thread_pool([&]() -> Error {
        graph = DelegateGraph::create(std::move(payload), context.get_named_data_map());
        return Error::Ok;
      });
      processed->Free();
    });
    if (error != Error::Ok) {
      return error;
    }
    return graph.release();
  }

  Error execute(BackendExecutionContext& context, DelegateHandle* handle, Span<EValue*> args) const override {
    if (handle == nullptr) {
      ET_LOG(Error, "OneDnnBackend: execute called with a null handle");
      return Error::InvalidArgument;
    }
    return static_cast<DelegateGraph*>(handle)->execute(args, context.event_tracer());
  }

  void destroy(DelegateHandle* handle) const override {
    delete static_cast<DelegateGraph*>(handle);
  }

  // "num_threads" (int, 0: the default), "max_isa" (string, CpuIsa.h), "verbose" (int 0..2),
  // "winograd" (int 0..2, Winograd.h), "int4_products" (int 0..1, StepBuilders.h) and "huge_pages" (int 0..2,
  // HostMemory.h). Every option is checked before any applies, so a refused list changes nothing.
  Error set_option(BackendOptionContext& /*context*/, const Span<BackendOption>& options) override {
    const int* threads = nullptr;
    const char* max_isa = nullptr;
    std::array<const int*, kChoiceCount> chosen{};
    for (const BackendOption& option : options) {
      const ChoiceOption* choice = find_choice(option);
      if (choice != nullptr) {
        const int* value = std::get_if<int>(&option.value);
        if (value == nullptr || *value < 0 || *value > choice->last) {
          ET_LOG(Error, "OneDnnBackend: %s must be an int %s", choice->key, choice->meanings);
          return Error::InvalidArgument;
        }
        chosen[choice - kChoiceOptions] = value;
      } else if (has_key(option, kNumThreadsOption)) {
        threads = std::get_if<int>(&option.value);
        if (threads == nullptr || *threads < 0) {
          ET_LOG(Error, "OneDnnBackend: %s must be an int >= 0 (0: the default)", kNumThreadsOption);
          return Error::InvalidArgument;
        }
      } else if (has_key(option, kMaxIsaOption)) {
        const auto* text = std::get_if<std::array<char, runtime::kMaxOptionValueLength>>(&option.value);
        if (text == nullptr) {
          ET_LOG(Error, "OneDnnBackend: %s must be a string", kMaxIsaOption);
          return Error::InvalidArgument;
        }
        max_isa = text->data();
      } else {
        ET_LOG(Error, "OneDnnBackend: unknown backend option \"%.*s\"", key_length, option.key);
        return Error::InvalidArgument;
      }
    }
    if (max_isa != nullptr) {
      const Error error = set_max_isa(max_isa);
      if (error != Error::Ok) {
        return error;
      }
    }
    for (size_t index = 0; index < kChoiceCount; ++index) {
      const Error error = chosen[index] == nullptr ? Error::Ok : kChoiceOptions[index].apply(*chosen[index]);
      if (error != Error::Ok) {
        return error;
      }
    }
    return threads == nullptr ? Error::Ok : set_num_threads(*threads);
  }

  // Fills "num_threads" with the count oneDNN runs with now, "max_isa" with the instruction set it
  // dispatches to, "verbose", "winograd", "int4_products" and "huge_pages" with their settings.
  Error get_option(BackendOptionContext& /*context*/, Span<BackendOption>& options) override {
    for (BackendOption& option : options) {
      if (const ChoiceOption* choice = find_choice(option)) {
        option.value = choice->current();
        continue;
      }
      if (has_key(option, kPrimitiveCacheOption)) {
        bound_primitive_cache(); // as the first program's init() will
        int capacity = 0;
        const dnnl_status_t status = dnnl_get_primitive_cache_capacity(&capacity);
        if (status != dnnl_success) {
          ET_LOG(
              Error,
              "OneDnnBackend: oneDNN's primitive cache capacity unreadable (status %d)",
              static_cast<int>(status));
          return Error::Internal;
        }
        option.value = capacity;
        continue;
      }
      if (has_key(option, kMaxIsaOption)) {
        std::array<char, runtime::kMaxOptionValueLength> text{};
        std::strncpy(text.data(), effective_isa_name(), text.size() - 1);
        option.value = text;
        continue;
      }
      if (!has_key(option, kNumThreadsOption)) {
        ET_LOG(Error, "OneDnnBackend: unknown backend option \"%.*s\"", key_length, option.key);
        return Error::NotFound;
      }
      const Result<int> threads = num_threads();
      if (!threads.ok()) {
        return threads.error();
      }
      option.value = threads.get();
    }
    return Error::Ok;
  }

 private:
  static constexpr int key_length = static_cast<int>(runtime::kMaxOptionKeyLength);

  static bool has_key(const BackendOption& option, const char* key) {
    return std::strncmp(option.key, key, runtime::kMaxOptionKeyLength) == 0;
  }

  static const ChoiceOption* find_choice(const BackendOption& option) {
    for (const ChoiceOption& choice : kChoiceOptions) {
      if (has_key(option, choice.key)) {
        return &choice;
      }
    }
    return nullptr;
  }
};

constexpr char kBackendName[] = "OneDnnBackend";
OneDnnBackend backend_instance;
const runtime::Backend backend_entry{kBackendName, &backend_instance};
const Error registration = runtime::register_backend(backend_entry);

} // namespace
} // namespace executorch::backends::onednn

// For callers without ExecuTorch's C++ API (the Python package, through ctypes). Both go through
// ExecuTorch's set_option/get_option, as a C++ caller would; they return an Error code (0: Ok).
extern "C" __attribute__((visibility("default"))) int onednn_backend_set_num_threads(int threads) {
  using namespace executorch::backends::onednn;
  executorch::runtime::BackendOptions<1> options;
  options.set_option(kNumThreadsOption, threads);
  return static_cast<int>(executorch::runtime::set_option(kBackendName, options.view()));
}

extern "C" __attribute__((visibility("default"))) int onednn_backend_get_num_threads(int* threads) {
  using namespace executorch::backends::onednn;
  if (threads == nullptr) {
    return static_cast<int>(executorch::runtime::Error::InvalidArgument);
  }
  executorch::runtime::BackendOptions<1> options;
  options.set_option(kNumThreadsOption, 0);
  const executorch::runtime::Error error = executorch::runtime::get_option(kBackendName, options.view());
  if (error != executorch::runtime::Error::Ok) {
    return static_cast<int>(error);
  }
  return static_cast<int>(options.get_option(kNumThreadsOption, *threads));
}

extern "C" __attribute__((visibility("default"))) int onednn_backend_set_max_isa(const char* name) {
  using namespace executorch::backends::onednn;
  if (name == nullptr) {
    return static_cast<int>(executorch::runtime::Error::InvalidArgument);
  }
  executorch::runtime::BackendOptions<1> options;
  options.set_option(kMaxIsaOption, name);
  return static_cast<int>(executorch::runtime::set_option(kBackendName, options.view()));
}

// The effective instruction set's name (static storage; never null).
extern "C" __attribute__((visibility("default"))) const char* onednn_backend_effective_isa() {
  return executorch::backends::onednn::effective_isa_name();
}

extern "C" __attribute__((visibility("default"))) int onednn_backend_set_verbose(int level) {
  using namespace executorch::backends::onednn;
  executorch::runtime::BackendOptions<1> options;
  options.set_option(kVerboseOption, level);
  return static_cast<int>(executorch::runtime::set_option(kBackendName, options.view()));
}

extern "C" __attribute__((visibility("default"))) int onednn_backend_set_winograd(int use) {
  using namespace executorch::backends::onednn;
  executorch::runtime::BackendOptions<1> options;
  options.set_option(kWinogradOption, use);
  return static_cast<int>(executorch::runtime::set_option(kBackendName, options.view()));
}

extern "C" __attribute__((visibility("default"))) int onednn_backend_set_int4_products(int products) {
  using namespace executorch::backends::onednn;
  executorch::runtime::BackendOptions<1> options;
  options.set_option(kInt4ProductsOption, products);
  return static_cast<int>(executorch::runtime::set_option(kBackendName, options.view()));
}

extern "C" __attribute__((visibility("default"))) int onednn_backend_set_huge_pages(int use) {
  using namespace executorch::backends::onednn;
  executorch::runtime::BackendOptions<1> options;
  options.set_option(kHugePagesOption, use);
  return static_cast<int>(executorch::runtime::set_option(kBackendName, options.view()));
}

// The oneDNN inside this library, e.g. "3.13.1 (threadpool)", with the commit when its build knew it
// (not from a release archive) (static storage; never null): it is linked in, so nothing else in the
// process can tell.
extern "C" __attribute__((visibility("default"))) const char* onednn_backend_onednn_version() {
  static const std::string text = [] {
    const dnnl_version_t* version = dnnl_version();
    const std::string hash = version->hash == nullptr ? "N/A" : version->hash;
    const char* runtime = version->cpu_runtime == DNNL_RUNTIME_THREADPOOL ? "threadpool"
                          : version->cpu_runtime == DNNL_RUNTIME_SEQ      ? "sequential"
                                                                          : "other";
    const std::string commit = hash == "N/A" ? "" : hash.substr(0, 10) + ", ";
    return std::to_string(version->major) + "." + std::to_string(version->minor) + "." +
           std::to_string(version->patch) + " (" + commit + runtime + ")";
  }();
  return text.c_str();
}
