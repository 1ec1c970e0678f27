// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
#include "WorkerPool.h"

#include <algorithm>
#include <chrono>
#include <system_error>

#include <immintrin.h>

namespace executorch::backends::onednn {
namespace {

constexpr uint64_t kFieldMask = 0xFFFF;
constexpr int kMaxSlots = 0xFFFF;
// After the last phase closes, how long an idle worker keeps spinning before it sleeps: long
// enough to bridge the ops ExecuTorch runs between two delegate calls of one program, short
// enough not to take a core from whatever runs next.
constexpr auto kIdleSpin = std::chrono::microseconds(50);
// Spinning inside a phase gives the core away now and then, so that a process competing for it
// is not starved while our workers wait.
constexpr unsigned kSpinsPerYield = 4096;

thread_local bool inside_job = false;

uint32_t next_slot(uint64_t job) {
  return static_cast<uint32_t>(job & kFieldMask);
}
uint32_t slot_count(uint64_t job) {
  return static_cast<uint32_t>((job >> 16) & kFieldMask);
}
uint32_t job_generation(uint64_t job) {
  return static_cast<uint32_t>(job >> 32);
}
// Whether generation a came before b, across the counter's wrap-around.
bool is_older(uint32_t a, uint32_t b) {
  return static_cast<int32_t>(b - a) > 0;
}

struct InsideJob {
  InsideJob() : outer(inside_job) {
    inside_job = true;
  }
  ~InsideJob() {
    inside_job = outer;
  }
  const bool outer;
};

} // namespace

WorkerPool::WorkerPool(int threads)
    : threads_(std::max(1, threads)), own_claims_(new std::atomic<uint32_t>[static_cast<size_t>(threads_)]) {
  for (int t = 0; t < threads_; ++t) {
    own_claims_[t].store(0, std::memory_order_relaxed);
  }
  try {
    workers_.reserve(static_cast<size_t>(threads_ - 1));
    for (int i = 1; i < threads_; ++i) {
      workers_.emplace_back([this, i] { work(i); });
    }
  } catch (...) {
    stop_workers();
    throw;
  }
}

WorkerPool::~WorkerPool() {
  stop_workers();
}

void WorkerPool::stop_workers() noexcept {
  stopping_.store(true);
  wake_sleepers();
  for (std::thread& worker : workers_) {
    worker.join();
  }
}

void WorkerPool::wake_sleepers() noexcept {
  {
    // Under the lock, so that a worker between its check and its wait sees the change.
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    ++wake_calls_;
  }
  wake_.notify_all();
}

bool WorkerPool::get_in_parallel() const {
  return inside_job;
}

void WorkerPool::open_phase() noexcept {
  phases_opened_.fetch_add(1, std::memory_order_relaxed);
  if (open_phases_.fetch_add(1) == 0 && sleepers_.load() > 0) {
    wake_sleepers(); // awake before the first primitive of the phase needs them
  }
}

void WorkerPool::close_phase() noexcept {
  open_phases_.fetch_sub(1);
}

bool WorkerPool::has_unclaimed_slot() const noexcept {
  const uint64_t job = job_.load();
  const uint32_t slots = slot_count(job);
  if (next_slot(job) < slots) {
    return true;
  }
  const uint32_t generation = job_generation(job);
  for (int t = 0; t < owned_slots(job); ++t) {
    if (is_older(own_claims_[t].load(), generation)) {
      return true;
    }
  }
  return false;
}

int WorkerPool::owned_slots(uint64_t job) const noexcept {
  return std::min(static_cast<int>(slot_count(job)), threads_);
}

bool WorkerPool::claim_own_slot(uint32_t generation, int thread) noexcept {
  std::atomic<uint32_t>& claim = own_claims_[thread];
  uint32_t claimed = claim.load(std::memory_order_relaxed);
  while (is_older(claimed, generation)) {
    if (claim.compare_exchange_weak(claimed, generation, std::memory_order_acq_rel)) {
      return true;
    }
  }
  return false;
}

// Thread `self`'s own slot, else the next slot from N on, else another thread's unclaimed one; -1
// when every slot of `job` is claimed.
int WorkerPool::claim_slot(uint64_t job, int self) noexcept {
  const uint32_t generation = job_generation(job);
  const int owned = owned_slots(job);
  if (self < owned && claim_own_slot(generation, self)) {
    return self;
  }
  while (next_slot(job) < slot_count(job)) {
    if (job_.compare_exchange_weak(job, job + 1, std::memory_order_acq_rel)) {
      return static_cast<int>(next_slot(job));
    }
    if (job_generation(job) != generation) {
      return -1; // `job` reloaded with the next job's word: this one is fully claimed
    }
  }
  for (int i = 1; i < owned; ++i) {
    const int other = (self + i) % owned;
    if (claim_own_slot(generation, other)) {
      return other;
    }
  }
  return -1;
}

void WorkerPool::run_claimed_slots(int self) noexcept {
  for (;;) {
    const uint64_t job = job_.load(std::memory_order_acquire);
    const int slot = claim_slot(job, self);
    if (slot < 0) {
      return;
    }
    // The claim keeps the job alive (its submitter waits for this slot), so fn_ and count_ are the
    // ones published with the word the slot was claimed from.
    const int slots = static_cast<int>(slot_count(job));
    for (int i = slot; i < count_; i += slots) {
      (*fn_)(i, count_);
    }
    finished_slots_.fetch_add(1, std::memory_order_release);
  }
}

void WorkerPool::parallel_for(int n, const std::function<void(int, int)>& fn) {
  if (n <= 0) {
    return;
  }
  std::unique_lock<std::mutex> submitting(submit_mutex_, std::defer_lock);
  if (n == 1 || workers_.empty() || inside_job || !submitting.try_lock()) {
    InsideJob scope;
    for (int i = 0; i < n; ++i) {
      fn(i, n);
    }
    return;
  }
  const int slots = std::min(n, kMaxSlots);
  fn_ = &fn;
  count_ = n;
  finished_slots_.store(0, std::memory_order_relaxed);
  ++generation_;
  const int owned = std::min(slots, threads_);
  for (int t = 0; t < owned; ++t) {
    own_claims_[t].store(generation_ - 1, std::memory_order_relaxed);
  }
  // Sequentially consistent with the sleepers_ load below and the worker's sleepers_ increment
  // before it checks for a job: either we see the sleeper or it sees the job. (It also publishes
  // the own_claims_ stores above.)
  job_.store(
      (static_cast<uint64_t>(generation_) << 32) | (static_cast<uint64_t>(slots) << 16) | static_cast<uint64_t>(owned));
  if (sleepers_.load() > 0) {
    wake_sleepers();
  }
  {
    InsideJob scope;
    run_claimed_slots(0);
  }
  for (unsigned spins = 1; finished_slots_.load(std::memory_order_acquire) < slots; ++spins) {
    _mm_pause();
    if (spins % kSpinsPerYield == 0) {
      std::this_thread::yield(); // a worker holding a slot may have been preempted
    }
  }
}

bool WorkerPool::wait_for_job() noexcept {
  auto idle_since = std::chrono::steady_clock::now();
  uint64_t phases_seen = phases_opened_.load(std::memory_order_relaxed);
  for (unsigned spins = 1;; ++spins) {
    if (stopping_.load(std::memory_order_relaxed)) {
      return false;
    }
    if (has_unclaimed_slot()) {
      return true;
    }
    _mm_pause();
    if (spins % 64 != 0) {
      continue;
    }
    // A phase that opened and closed since the last look counts as well: a short execute() may
    // fall between two looks.
    const uint64_t phases = phases_opened_.load(std::memory_order_relaxed);
    if (open_phases_.load(std::memory_order_relaxed) > 0 || phases != phases_seen) {
      phases_seen = phases;
      idle_since = std::chrono::steady_clock::now();
      if (spins % kSpinsPerYield == 0) {
        std::this_thread::yield();
      }
    } else if (std::chrono::steady_clock::now() - idle_since > kIdleSpin) {
      break;
    }
  }
  std::unique_lock<std::mutex> lock(sleep_mutex_);
  sleepers_.fetch_add(1);
  sleeps_.fetch_add(1, std::memory_order_relaxed);
  // Any wake-up call ends the sleep, even when the phase that made it has closed by the time this
  // thread runs: a worker that went back to sleep then would cost every short execute() a wake-up
  // call (microseconds of system call on the caller's thread) and never catch one of them.
  const uint64_t wake_calls = wake_calls_;
  wake_.wait(lock, [&] {
    return stopping_.load() || has_unclaimed_slot() || open_phases_.load() > 0 || wake_calls_ != wake_calls;
  });
  sleepers_.fetch_sub(1);
  return !stopping_.load();
}

void WorkerPool::work(int self) noexcept {
  while (wait_for_job()) {
    InsideJob scope;
    run_claimed_slots(self);
  }
}

} // namespace executorch::backends::onednn
