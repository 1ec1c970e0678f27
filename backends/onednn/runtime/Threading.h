// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// How many threads oneDNN's primitives use, and the threads they run on. oneDNN is built with its
// THREADPOOL runtime: it parallelizes through the pool its stream was made with, here the
// delegate's own WorkerPool, so the library needs no threading runtime another package could
// shadow. init() and execute() run inside run_in_thread_pool(), which makes the pool of the current
// count the one cpu_stream() executes on, and sizes the kernels oneDNN creates for it.
// The count: the backend option "num_threads" (set at run time) > ONEDNN_BACKEND_NUM_THREADS >
// the size of ExecuTorch's threadpool (the hardware's thread count, without one).
#pragma once

#include <cstddef>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/function_ref.h>
#include <executorch/runtime/core/result.h>
#include <oneapi/dnnl/dnnl.hpp>

namespace executorch::backends::onednn {

inline constexpr char kNumThreadsOption[] = "num_threads";
// Linux x86-64's largest CPU count (NR_CPUS): more is a mistake, and each thread costs a stack.
inline constexpr int kMaxThreads = 8192;

// Sets the count for later init() and execute() calls; 0 returns to the default. InvalidArgument
// outside [0, kMaxThreads].
runtime::Error set_num_threads(int threads) noexcept;

// The count oneDNN runs with now (the pool run_in_thread_pool() would use).
runtime::Result<int> num_threads() noexcept;

// Runs `body` on the calling thread with the pool of the current count: its threads wait for
// work (spinning, not asleep) until `body` returns. Throws what `body` throws or
// std::system_error when a thread cannot be started.
runtime::Error run_in_thread_pool(runtime::FunctionRef<runtime::Error()> body);

// The process-wide CPU engine; the stream of the pool run_in_thread_pool() made current on this
// thread (outside one: a stream that runs every primitive on the calling thread alone).
const dnnl::engine& cpu_engine();
dnnl::stream& cpu_stream();

// Inside run_in_thread_pool: body(begin, end) over chunks of [0, count) of at least `grain`, on the
// pool's threads (on the calling thread alone outside one). `body` must not throw.
void parallel_chunks(size_t count, size_t grain, runtime::FunctionRef<void(size_t, size_t)> body);

} // namespace executorch::backends::onednn
