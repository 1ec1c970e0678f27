// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// The threads oneDNN's primitives run on (its THREADPOOL runtime calls parallel_for()). The calling
// thread takes part in every job, so a pool of N threads starts N - 1 workers. Idle workers spin
// while a phase is open (an execute(): primitives follow each other within microseconds, and a
// sleeping worker takes tens of them to wake) and for a short while after, then sleep.
// Slot t of a job (t < N) is its thread t's to run first (the caller's is 0): oneDNN splits each
// primitive's work by slot the same way from one primitive to the next, so a thread mostly reads
// what it wrote itself, from its own core's caches. A thread done with its own slot takes the
// slots beyond N, then the unclaimed ones of others (a worker still asleep).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <oneapi/dnnl/dnnl_threadpool_iface.hpp>

namespace executorch::backends::onednn {

class WorkerPool final : public dnnl::threadpool_interop::threadpool_iface {
 public:
  // Throws std::system_error when a worker cannot be started (the started ones are joined).
  explicit WorkerPool(int threads);
  ~WorkerPool() override;
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int get_num_threads() const override {
    return threads_;
  }
  bool get_in_parallel() const override;
  uint64_t get_flags() const override {
    return 0; // synchronous: parallel_for() returns when every fn(i, n) has
  }
  void wait() override {}
  // fn(i, n) for every i in [0, n). On the calling thread alone when it is already inside a job, or
  // when another thread's job holds the pool (two executions at once do not wait for each other).
  // `fn` must not throw.
  void parallel_for(int n, const std::function<void(int, int)>& fn) override;

  // Idle workers spin while at least one phase is open.
  void open_phase() noexcept;
  void close_phase() noexcept;

  // How many times a worker has gone to sleep (tests and diagnostics).
  uint64_t sleeps() const noexcept {
    return sleeps_.load();
  }

 private:
  void stop_workers() noexcept;
  void wake_sleepers() noexcept;
  void work(int self) noexcept;
  bool wait_for_job() noexcept;
  void run_claimed_slots(int self) noexcept;
  int claim_slot(uint64_t job, int self) noexcept;
  bool claim_own_slot(uint32_t generation, int thread) noexcept;
  // The slots of `job` that belong to a thread (the first min(slots, N)).
  int owned_slots(uint64_t job) const noexcept;
  bool has_unclaimed_slot() const noexcept;

  const int threads_;
  std::vector<std::thread> workers_;
  // The current job in one word, so that a slot is claimed with one compare-exchange and a worker
  // late for a job cannot claim a slot of the next: generation (32 bits) | slots (16) | next (16),
  // `next` counting the slots from N on.
  std::atomic<uint64_t> job_{0};
  // Per thread t, the generation of the last job whose slot t was claimed; set to the new job's
  // generation - 1 before it is published (so a late worker's claim of its old job fails).
  std::unique_ptr<std::atomic<uint32_t>[]> own_claims_;
  uint32_t generation_ = 0;                           // written under submit_mutex_
  const std::function<void(int, int)>* fn_ = nullptr; // valid while a claimed slot is running
  int count_ = 0;
  std::atomic<int> finished_slots_{0};
  std::mutex submit_mutex_;

  std::atomic<int> open_phases_{0};
  std::atomic<uint64_t> phases_opened_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<uint64_t> sleeps_{0};
  std::atomic<bool> stopping_{false};
  std::mutex sleep_mutex_;
  uint64_t wake_calls_ = 0; // written under sleep_mutex_
  std::condition_variable wake_;
};

} // namespace executorch::backends::onednn
