// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// The thread pool oneDNN runs on (runtime/WorkerPool.h): every index of a job runs exactly once
// and on as many threads as the pool has, each thread running the same slot job after job, a job submitted from inside
// a job or while another thread's job holds the pool runs on the calling thread, the pool survives many small jobs and
// phases, and a worker woken for a phase stays awake a while even when it missed the phase.
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "../../runtime/WorkerPool.h"

namespace executorch::backends::onednn {
namespace {

TEST(WorkerPool, EveryIndexRunsExactlyOnceWithItsCount) {
  WorkerPool pool(4);
  for (int n : {1, 2, 3, 4, 7, 64, 70000}) {
    std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
    std::atomic<int> wrong_count{0};
    pool.parallel_for(n, [&](int i, int count) {
      runs[static_cast<size_t>(i)].fetch_add(1);
      if (count != n) {
        wrong_count.fetch_add(1);
      }
    });
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(runs[static_cast<size_t>(i)].load(), 1) << "index " << i << " of " << n;
    }
    EXPECT_EQ(wrong_count.load(), 0) << "fn saw another count than " << n;
  }
}

TEST(WorkerPool, AJobRunsOnThePoolsThreads) {
  WorkerPool pool(3);
  pool.open_phase();
  std::mutex mutex;
  std::set<std::thread::id> threads;
  // Jobs long enough for every worker to take a slot: each index waits until all have started.
  std::atomic<int> started{0};
  pool.parallel_for(3, [&](int, int) {
    started.fetch_add(1);
    for (int spins = 0; started.load() < 3 && spins < 100000000; ++spins) {
    }
    std::lock_guard<std::mutex> lock(mutex);
    threads.insert(std::this_thread::get_id());
  });
  pool.close_phase();
  EXPECT_EQ(threads.size(), 3u) << "3 slots ran on " << threads.size() << " thread(s)";
}

// oneDNN splits a primitive's work by slot the same way in every primitive, so a thread that runs
// the same slot each time reads what it wrote. The slots wait for each other to start, so no thread
// can finish its own and take another's first: slot 0 must run on the caller and every other slot
// on the worker that ran it the first time.
TEST(WorkerPool, EachThreadRunsItsOwnSlotJobAfterJob) {
  constexpr int kThreads = 3;
  WorkerPool pool(kThreads);
  pool.open_phase();
  std::vector<std::thread::id> first(kThreads);
  int jobs_with_moved_slots = 0;
  std::atomic<bool> timed_out{false};
  for (int job = 0; job < 200; ++job) {
    std::vector<std::thread::id> ran(kThreads);
    std::atomic<int> started{0};
    pool.parallel_for(kThreads, [&](int i, int) {
      ran[static_cast<size_t>(i)] = std::this_thread::get_id();
      started.fetch_add(1);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (started.load() < kThreads) {
        if (std::chrono::steady_clock::now() > deadline) {
          timed_out = true;
          break;
        }
        std::this_thread::yield(); // three threads may share fewer cores
      }
    });
    if (job == 0) {
      first = ran;
    }
    if (ran[0] != std::this_thread::get_id() || ran != first) {
      ++jobs_with_moved_slots;
    }
  }
  pool.close_phase();
  EXPECT_FALSE(timed_out.load()) << "a slot waited 10 s for the others to start";
  EXPECT_EQ(jobs_with_moved_slots, 0) << "of 200 jobs, some ran a slot on another thread than the first job";
}

TEST(WorkerPool, InsideAJobIsInParallelAndANestedJobRunsOnTheCallingThread) {
  WorkerPool pool(2);
  EXPECT_FALSE(pool.get_in_parallel());
  std::atomic<int> nested_elsewhere{0};
  std::atomic<int> not_in_parallel{0};
  pool.parallel_for(2, [&](int, int) {
    if (!pool.get_in_parallel()) {
      not_in_parallel.fetch_add(1);
    }
    const std::thread::id outer = std::this_thread::get_id();
    pool.parallel_for(8, [&](int, int) {
      if (std::this_thread::get_id() != outer) {
        nested_elsewhere.fetch_add(1);
      }
    });
    if (!pool.get_in_parallel()) {
      not_in_parallel.fetch_add(1); // the nested job must not end the outer one's state
    }
  });
  EXPECT_EQ(not_in_parallel.load(), 0);
  EXPECT_EQ(nested_elsewhere.load(), 0);
  EXPECT_FALSE(pool.get_in_parallel());
}

TEST(WorkerPool, TwoSubmittingThreadsBothComplete) {
  WorkerPool pool(2);
  std::atomic<long> total{0};
  auto submit = [&] {
    for (int round = 0; round < 2000; ++round) {
      pool.parallel_for(4, [&](int i, int) { total.fetch_add(i + 1); });
    }
  };
  std::thread other(submit);
  submit();
  other.join();
  EXPECT_EQ(total.load(), 2L * 2000 * (1 + 2 + 3 + 4));
}

TEST(WorkerPool, ManySmallJobsAcrossPhasesAndSleeps) {
  WorkerPool pool(2);
  long expected = 0;
  std::atomic<long> total{0};
  for (int round = 0; round < 200; ++round) {
    if (round % 50 == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2)); // the workers fall asleep
    }
    pool.open_phase();
    for (int job = 0; job < 20; ++job) {
      pool.parallel_for(2, [&](int i, int) { total.fetch_add(i + 1); });
      expected += 3;
    }
    pool.close_phase();
  }
  EXPECT_EQ(total.load(), expected);
}

// A phase too short for a sleeping worker to see still wakes it for good: it spins again, then
// falls asleep anew, rather than going back to sleep at once and making every short phase after
// it pay a wake-up call it never answers.
TEST(WorkerPool, AWorkerWokenByAPhaseThatClosedSpinsBeforeItSleepsAgain) {
  WorkerPool pool(2);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (pool.sleeps() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(pool.sleeps(), 1u) << "the idle worker did not fall asleep";
  pool.open_phase();
  pool.close_phase();
  while (pool.sleeps() == 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(pool.sleeps(), 2u) << "the worker stayed in its first sleep";
}

TEST(WorkerPool, APoolOfOneRunsEverythingOnTheCallingThread) {
  WorkerPool pool(1);
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> elsewhere{0};
  pool.parallel_for(16, [&](int, int) {
    if (std::this_thread::get_id() != caller) {
      elsewhere.fetch_add(1);
    }
  });
  EXPECT_EQ(pool.get_num_threads(), 1);
  EXPECT_EQ(elsewhere.load(), 0);
}

} // namespace
} // namespace executorch::backends::onednn
