// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
#include "Threading.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <new>

#include <sched.h>

#include <executorch/runtime/kernel/thread_parallel_interface.h>
#include <executorch/runtime/platform/log.h>
#include <oneapi/dnnl/dnnl_threadpool.hpp>

#include "WorkerPool.h"

namespace executorch::backends::onednn {
namespace {

using runtime::Error;
using runtime::Result;

// Set at run time; 0: not set.
std::atomic<int> requested_threads{0};

// ONEDNN_BACKEND_NUM_THREADS, read once; 0 when unset or invalid.
int environment_threads() {
  static const int threads = [] {
    const char* text = std::getenv("ONEDNN_BACKEND_NUM_THREADS");
    if (text == nullptr || *text == '\0') {
      return 0;
    }
    char* end = nullptr;
    errno = 0;
    const long value = std::strtol(text, &end, 10);
    if (errno != 0 || *end != '\0' || value < 0 || value > kMaxThreads) {
      ET_LOG(
          Info,
          "OneDnnBackend: warning: ignoring ONEDNN_BACKEND_NUM_THREADS=\"%s\", not an integer in "
          "[0, %d]",
          text,
          kMaxThreads);
      return 0;
    }
    return static_cast<int>(value);
  }();
  return threads;
}

// The CPUs this process may run on (taskset, cgroups' cpusets), at least 1.
int usable_cpus() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0) {
    return std::max(1, CPU_COUNT(&cpus));
  }
  return 1;
}

// What ExecuTorch's own kernels and XNNPACK run on, so that the delegate and the ops between its
// calls take turns on the same cores; read once.
int default_threads() {
  static const int threads = [] {
#ifdef ET_USE_THREADPOOL
    const int64_t count = extension::get_thread_count();
    if (count > 0 && count <= kMaxThreads) {
      return static_cast<int>(count);
    }
#endif
    return std::min(usable_cpus(), kMaxThreads);
  }();
  return threads;
}

int wanted_threads() {
  const int requested = requested_threads.load(std::memory_order_relaxed);
  if (requested > 0) {
    return requested;
  }
  const int environment = environment_threads();
  return environment > 0 ? environment : default_threads();
}

// A pool and the stream that runs oneDNN's primitives on it.
struct PoolContext {
  explicit PoolContext(int threads)
      : pool(threads), stream(dnnl::threadpool_interop::make_stream(cpu_engine(), &pool)) {}
  int threads() const {
    return pool.get_num_threads();
  }
  WorkerPool pool;
  dnnl::stream stream;
};

struct PoolState {
  std::mutex mutex;
  std::shared_ptr<PoolContext> context; // a caller still inside an old pool keeps it alive
};

PoolState& pool_state() {
  static PoolState* const state = new PoolState(); // never destroyed: no joins during exit
  return *state;
}

// The pool of the wanted count, made anew when the count changed. Throws what starting a thread or
// oneDNN throws.
std::shared_ptr<PoolContext> current_context() {
  PoolState& state = pool_state();
  const int threads = wanted_threads();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.context == nullptr || state.context->threads() != threads) {
    state.context = std::make_shared<PoolContext>(threads);
  }
  return state.context;
}

// The pool run_in_thread_pool() made current on this thread.
thread_local PoolContext* active_context = nullptr;

Error failure(const char* what, const std::exception& error) {
  ET_LOG(Error, "OneDnnBackend: %s failed: %s", what, error.what());
  return dynamic_cast<const std::bad_alloc*>(&error) != nullptr ? Error::MemoryAllocationFailed : Error::Internal;
}

} // namespace

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& cpu_stream() {
  if (active_context != nullptr) {
    return active_context->stream;
  }
  // Without a threadpool oneDNN runs each primitive on the calling thread.
  static dnnl::stream sequential(cpu_engine());
  return sequential;
}

Error set_num_threads(int threads) noexcept {
  if (threads < 0 || threads > kMaxThreads) {
    ET_LOG(
        Error, "OneDnnBackend: %s = %d is outside [0, %d] (0: the default)", kNumThreadsOption, threads, kMaxThreads);
    return Error::InvalidArgument;
  }
  const int previous = requested_threads.exchange(threads);
  try {
    current_context(); // now, so that a failure shows here rather than in the next execute()
    return Error::Ok;
  } catch (const std::exception& error) {
    requested_threads.store(previous);
    return failure("setting the thread count", error);
  } catch (...) {
    requested_threads.store(previous);
    ET_LOG(Error, "OneDnnBackend: setting the thread count failed");
    return Error::Internal;
  }
}

Result<int> num_threads() noexcept {
  try {
    return current_context()->threads();
  } catch (const std::exception& error) {
    return failure("reading the thread count", error);
  } catch (...) {
    ET_LOG(Error, "OneDnnBackend: reading the thread count failed");
    return Error::Internal;
  }
}

Error run_in_thread_pool(runtime::FunctionRef<Error()> body) {
  const std::shared_ptr<PoolContext> context = current_context();
  // Restored on the way out, also by an exception: init() may run inside an execute() of another
  // program on this thread.
  struct Activation {
    explicit Activation(PoolContext* context) : previous(active_context) {
      // oneDNN sizes the kernels it creates for this count (thread-local in oneDNN), and runs them
      // on the pool of the stream they execute on. Neither call fails for a count >= 1.
      dnnl_threadpool_interop_get_max_concurrency(&previous_concurrency);
      dnnl_threadpool_interop_set_max_concurrency(context->threads());
      active_context = context;
      context->pool.open_phase();
    }
    ~Activation() {
      active_context->pool.close_phase();
      active_context = previous;
      dnnl_threadpool_interop_set_max_concurrency(previous_concurrency);
    }
    PoolContext* previous;
    int previous_concurrency = 1;
  } activation(context.get());
  return body();
}

void parallel_chunks(size_t count, size_t grain, runtime::FunctionRef<void(size_t, size_t)> body) {
  const size_t chunk = std::max<size_t>(grain, 1);
  if (active_context == nullptr || count <= chunk) {
    body(0, count);
    return;
  }
  WorkerPool& pool = active_context->pool;
  const size_t chunks = std::min((count + chunk - 1) / chunk, static_cast<size_t>(pool.get_num_threads()));
  pool.parallel_for(static_cast<int>(chunks), [&](int index, int total) {
    const size_t begin = count * static_cast<size_t>(index) / static_cast<size_t>(total);
    const size_t end = count * static_cast<size_t>(index + 1) / static_cast<size_t>(total);
    body(begin, end);
  });
}

} // namespace executorch::backends::onednn
