// How many threads oneDNN's primitives use. oneDNN's TBB build parallelizes over the task arena of
// the calling thread, so init() and execute() run inside one process-wide arena of that size.
// The count: the backend option "num_threads" (set at run time) > ONEDNN_BACKEND_NUM_THREADS >
// the size of ExecuTorch's threadpool (TBB's default, the process affinity mask, without one).
#pragma once

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/function_ref.h>
#include <executorch/runtime/core/result.h>

namespace executorch::backends::onednn {

inline constexpr char kNumThreadsOption[] = "num_threads";
// Linux x86-64's largest CPU count (NR_CPUS): more is a mistake, and each arena slot costs memory.
inline constexpr int kMaxThreads = 8192;

// Sets the count for later init() and execute() calls; 0 returns to the default. InvalidArgument
// outside [0, kMaxThreads], NotSupported when oneDNN does not use TBB.
runtime::Error set_num_threads(int threads) noexcept;

// The count oneDNN sees: tbb::this_task_arena::max_concurrency() inside the arena execute() uses.
runtime::Result<int> num_threads() noexcept;

// Runs `body` on the calling thread inside the arena of the current count. Throws what `body` or
// TBB throws.
runtime::Error run_in_thread_arena(runtime::FunctionRef<runtime::Error()> body);

// Inside run_in_thread_arena: body(begin, end) over chunks of [0, count) of at least `grain`, on the
// arena's threads (on the calling thread alone without oneDNN's TBB runtime). `body` must not throw.
void parallel_chunks(size_t count, size_t grain, runtime::FunctionRef<void(size_t, size_t)> body);

} // namespace executorch::backends::onednn
