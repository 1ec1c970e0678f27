#include "Threading.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <new>

#include <executorch/runtime/kernel/thread_parallel_interface.h>
#include <executorch/runtime/platform/log.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/version.h>

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
    return tbb::info::default_concurrency();
  }();
  return threads;
}

bool onednn_uses_tbb() {
  static const bool tbb = dnnl_version()->cpu_runtime == DNNL_RUNTIME_TBB;
  return tbb;
}

int wanted_threads() {
  const int requested = requested_threads.load(std::memory_order_relaxed);
  if (requested > 0) {
    return requested;
  }
  const int environment = environment_threads();
  return environment > 0 ? environment : default_threads();
}

struct ArenaState {
  std::mutex mutex;
  std::shared_ptr<tbb::task_arena> arena; // a caller still inside an old arena keeps it alive
  int threads = 0;
};

// The arena of the wanted count, made anew when the count changed. Throws what TBB throws.
std::shared_ptr<tbb::task_arena> current_arena() {
  static ArenaState* const state = new ArenaState(); // never destroyed: workers may outlive exit
  const int threads = wanted_threads();
  std::lock_guard<std::mutex> lock(state->mutex);
  if (state->arena == nullptr || state->threads != threads) {
    auto arena = std::make_shared<tbb::task_arena>(threads);
    arena->initialize();
    state->arena = std::move(arena);
    state->threads = threads;
  }
  return state->arena;
}

Error failure(const char* what, const std::exception& error) {
  ET_LOG(Error, "OneDnnBackend: %s failed: %s", what, error.what());
  return dynamic_cast<const std::bad_alloc*>(&error) != nullptr ? Error::MemoryAllocationFailed
                                                                  : Error::Internal;
}

} // namespace

Error set_num_threads(int threads) noexcept {
  if (threads < 0 || threads > kMaxThreads) {
    ET_LOG(
        Error,
        "OneDnnBackend: %s = %d is outside [0, %d] (0: the default)",
        kNumThreadsOption,
        threads,
        kMaxThreads);
    return Error::InvalidArgument;
  }
  if (!onednn_uses_tbb()) {
    ET_LOG(
        Error,
        "OneDnnBackend: %s needs oneDNN's TBB runtime; this oneDNN's CPU runtime is %u (OpenMP: "
        "set OMP_NUM_THREADS)",
        kNumThreadsOption,
        dnnl_version()->cpu_runtime);
    return Error::NotSupported;
  }
  const int previous = requested_threads.exchange(threads);
  try {
    current_arena(); // now, so that a failure shows here rather than in the next execute()
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
  if (!onednn_uses_tbb()) {
    ET_LOG(Error, "OneDnnBackend: %s is known only with oneDNN's TBB runtime", kNumThreadsOption);
    return Error::NotSupported;
  }
  try {
    return current_arena()->execute([] { return tbb::this_task_arena::max_concurrency(); });
  } catch (const std::exception& error) {
    return failure("reading the thread count", error);
  } catch (...) {
    ET_LOG(Error, "OneDnnBackend: reading the thread count failed");
    return Error::Internal;
  }
}

Error run_in_thread_arena(runtime::FunctionRef<Error()> body) {
  if (!onednn_uses_tbb()) {
    return body();
  }
  const std::shared_ptr<tbb::task_arena> arena = current_arena();
  return arena->execute([&] {
#if TBB_INTERFACE_VERSION >= 12200
    // One phase per execute(): TBB's workers stay in the arena between the primitives instead of
    // falling asleep after some of them (a wake-up per primitive cost MobileNetV2 up to 25%), and
    // leave at once when it ends, so they do not spin against the ops that run between our calls.
    // Not with one thread: the phase would keep TBB's idle workers spinning for nothing.
    if (arena->max_concurrency() > 1) {
      tbb::task_arena::parallel_phase phase(
          *arena, tbb::task_arena::parallel_phase::flags(
                      tbb::task_arena::parallel_phase::end_flag_fast_leave()));
      return body();
    }
#endif
    return body();
  });
}

void parallel_chunks(size_t count, size_t grain, runtime::FunctionRef<void(size_t, size_t)> body) {
  if (!onednn_uses_tbb() || count <= grain) {
    body(0, count);
    return;
  }
  tbb::parallel_for(
      tbb::blocked_range<size_t>(0, count, grain),
      [&](const tbb::blocked_range<size_t>& range) { body(range.begin(), range.end()); });
}

} // namespace executorch::backends::onednn
