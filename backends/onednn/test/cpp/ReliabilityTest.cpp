// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// Handles of several programs executing at once on different threads, one handle refused to a second
// thread while it executes, resident memory that stays flat over many init/execute/destroy cycles, and
// the NaN guards' exact path, taken only for the inputs that need it.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <executorch/runtime/platform/platform.h>
#include <gtest/gtest.h>

#include <executorch/runtime/backend/options.h>

#include "BackendHarness.h"

namespace onednn_test {
namespace {

// One handle with its own tensors: what a thread needs to execute it.
struct Runner : LoadedModel {
  std::unique_ptr<HostTensor> input;
  std::unique_ptr<HostTensor> output;

  // Fills the output with NaN first, so that a skipped write cannot pass for a result.
  Error run(HostTensor& in, HostTensor& out) {
    std::fill(out.data().begin(), out.data().end(), std::numeric_limits<float>::quiet_NaN());
    return harness.execute(handle, {&in, &out});
  }
  Error run() {
    return run(*input, *output);
  }
  std::unique_ptr<HostTensor> new_output() const {
    return std::make_unique<HostTensor>(output->sizes());
  }
};

std::vector<int32_t> sizes_of(const std::vector<int64_t>& dims) {
  return std::vector<int32_t>(dims.begin(), dims.end());
}

void add_tensors(Runner& runner, uint32_t seed) {
  const std::vector<int64_t>& in = runner.model.input_dims[0];
  runner.input = std::make_unique<HostTensor>(sizes_of(in), random_values(element_count(in), seed));
  runner.output = std::make_unique<HostTensor>(sizes_of(runner.model.output_dims[0]));
}

// x [16, 64] @ w [64, 64] -> relu: 16 KiB of weights and an 8 KiB arena per handle.
std::unique_ptr<Runner> matmul_relu(uint32_t seed) {
  auto runner = std::make_unique<Runner>();
  Model& model = runner->model;
  const uint32_t src = model.input({16, 64});
  const uint32_t weights = model.constant({64, 64}, random_values(64 * 64, seed + 1));
  const uint32_t product = model.value({16, 64});
  const uint32_t dst = model.value({16, 64});
  model.payload.step(Kind::Matmul, {src, weights, kNoValue}, {product});
  model.payload.step(
      Kind::Eltwise, {product}, {dst}, {alg(EltwiseAlg::Relu), floats("alpha", {0}), floats("beta", {0})});
  model.output(dst, {16, 64});
  add_tensors(*runner, seed);
  return runner;
}

// x [1, 8, 16, 16] -> conv 3x3 (8 -> 16, bias, padding 1) with a relu post-op.
std::unique_ptr<Runner> convolution(uint32_t seed) {
  auto runner = std::make_unique<Runner>();
  Model& model = runner->model;
  const uint32_t src = model.input({1, 8, 16, 16});
  const uint32_t weights = model.constant({16, 8, 3, 3}, random_values(16 * 8 * 9, seed + 1));
  const uint32_t bias = model.constant({16}, random_values(16, seed + 2));
  const uint32_t dst = model.value({1, 16, 16, 16});
  model.payload.step(
      Kind::Convolution,
      {src, weights, bias},
      {dst},
      {ints("strides", {1, 1}),
       ints("padding_l", {1, 1}),
       ints("padding_r", {1, 1}),
       ints("dilation", {1, 1}),
       ints("groups", {1}),
       ints("post_ops", {code_of(PostOpKind::Eltwise), code_of(EltwiseAlg::Relu)}),
       floats("post_op_params", {0.0, 0.0})});
  model.output(dst, {1, 16, 16, 16});
  add_tensors(*runner, seed);
  return runner;
}

// The same handle on the same inputs, on another thread and among other executions, must give what
// it gave alone; oneDNN may split reductions by thread, hence a tolerance rather than bit equality.
bool same_result(const std::vector<float>& actual, const std::vector<float>& expected) {
  if (actual.size() != expected.size()) {
    return false;
  }
  for (size_t i = 0; i < actual.size(); ++i) {
    if (!(std::fabs(actual[i] - expected[i]) <= 1e-5f * (1.0f + std::fabs(expected[i])))) {
      return false;
    }
  }
  return true;
}

TEST(Reliability, HandlesOfTwoProgramsExecutingOnFourThreadsGiveTheirSingleThreadedResults) {
  constexpr int kThreads = 4;
  constexpr int kRuns = 200;
  std::vector<std::unique_ptr<Runner>> runners;
  std::vector<std::vector<float>> expected;
  for (uint32_t i = 0; i < kThreads; ++i) {
    runners.push_back(i % 2 == 0 ? matmul_relu(10 * i) : convolution(10 * i));
    ASSERT_EQ(runners.back()->init(), Error::Ok);
    ASSERT_EQ(runners.back()->run(), Error::Ok);
    expected.push_back(runners.back()->output->data());
  }
  std::atomic<int> waiting{kThreads};
  std::vector<int> failed(kThreads, 0), wrong(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      waiting.fetch_sub(1);
      while (waiting.load() > 0) {
        std::this_thread::yield(); // start together, for the most overlap
      }
      Runner& runner = *runners[t];
      for (int run = 0; run < kRuns; ++run) {
        if (runner.run() != Error::Ok) {
          ++failed[t];
        } else if (!same_result(runner.output->data(), expected[t])) {
          ++wrong[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failed[t], 0) << "handle " << t << ": executions that failed";
    EXPECT_EQ(wrong[t], 0) << "handle " << t << ": executions that gave another result";
  }
}

// Handles taking turns on one thread lease the same arena block from the pool (runtime/ArenaPool.h):
// each overwrites what the other left there, and each must still give its own result, every time.
TEST(Reliability, HandlesTakingTurnsOnOneThreadShareAnArenaAndKeepTheirResults) {
  std::vector<std::unique_ptr<Runner>> runners;
  std::vector<std::vector<float>> expected;
  for (uint32_t i = 0; i < 4; ++i) {
    runners.push_back(i % 2 == 0 ? matmul_relu(7 * i) : convolution(7 * i));
    ASSERT_EQ(runners.back()->init(), Error::Ok);
    ASSERT_EQ(runners.back()->run(), Error::Ok);
    expected.push_back(runners.back()->output->data());
  }
  for (int turn = 0; turn < 40; ++turn) {
    const size_t t = static_cast<size_t>(turn * 3 % 4); // 0, 3, 2, 1, ...: every neighbour pair
    ASSERT_EQ(runners[t]->run(), Error::Ok) << "turn " << turn;
    ASSERT_TRUE(same_result(runners[t]->output->data(), expected[t])) << "handle " << t << ", turn " << turn;
  }
  runners.erase(runners.begin() + 1); // a handle gone: the others' arena stays theirs
  for (size_t t = 0; t < runners.size(); ++t) {
    ASSERT_EQ(runners[t]->run(), Error::Ok);
    EXPECT_TRUE(same_result(runners[t]->output->data(), expected[t == 0 ? 0 : t + 1])) << "handle " << t;
  }
}

// Captures ExecuTorch's log for a test, and can hold a thread inside its next log line: a handle's
// execute() logs a wrong argument count while it holds the handle, so a thread held there keeps the
// handle busy for as long as the test needs. Registered with ExecuTorch once (a second register_pal
// logs an error), then switched on and off.
class LogTrap {
 public:
  LogTrap() {
    static const bool registered = [] {
      forward_ = executorch::runtime::get_pal_impl()->emit_log_message;
      return executorch::runtime::register_pal(executorch::runtime::PalImpl::create(&LogTrap::emit, __FILE__));
    }();
    EXPECT_TRUE(registered);
    active_.store(this);
  }
  ~LogTrap() {
    release();
    active_.store(nullptr);
  }

  // The calling thread's next log line blocks until release().
  void hold_this_thread() {
    std::lock_guard<std::mutex> lock(mutex_);
    held_thread_ = std::this_thread::get_id();
  }
  bool wait_until_held() {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(30), [&] { return holding_; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }
  // Log lines of other threads that contain `text`.
  int count(const char* text) {
    std::lock_guard<std::mutex> lock(mutex_);
    int found = 0;
    for (const std::string& line : lines_) {
      found += line.find(text) != std::string::npos ? 1 : 0;
    }
    return found;
  }

 private:
  static void emit(
      et_timestamp_t timestamp,
      et_pal_log_level_t level,
      const char* filename,
      const char* function,
      size_t line,
      const char* message,
      size_t length) {
    LogTrap* trap = active_.load();
    if (trap == nullptr) {
      forward_(timestamp, level, filename, function, line, message, length);
      return;
    }
    std::unique_lock<std::mutex> lock(trap->mutex_);
    if (std::this_thread::get_id() == trap->held_thread_ && !trap->released_) {
      trap->holding_ = true;
      trap->changed_.notify_all();
      trap->changed_.wait(lock, [&] { return trap->released_; });
      return;
    }
    trap->lines_.emplace_back(message, length);
  }

  static inline std::atomic<LogTrap*> active_{nullptr};
  static inline pal_emit_log_message_method forward_ = nullptr;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::thread::id held_thread_;
  bool holding_ = false;
  bool released_ = false;
  std::vector<std::string> lines_;
};

TEST(Reliability, AHandleExecutingOnOneThreadIsRefusedToAnotherAndFreedOnItsErrorPath) {
  std::unique_ptr<Runner> runner = matmul_relu(1);
  ASSERT_EQ(runner->init(), Error::Ok);
  ASSERT_EQ(runner->run(), Error::Ok);
  const std::vector<float> expected = runner->output->data();

  LogTrap trap;
  Error first = Error::Ok;
  std::thread holder([&] {
    trap.hold_this_thread();
    first = runner->harness.execute(runner->handle, {runner->input.get()}); // no output: logs, held
  });
  const bool held = trap.wait_until_held();
  std::unique_ptr<HostTensor> output = runner->new_output();
  std::fill(output->data().begin(), output->data().end(), -7.0f);
  const Error second = held ? runner->harness.execute(runner->handle, {runner->input.get(), output.get()}) : Error::Ok;
  trap.release();
  holder.join();

  ASSERT_TRUE(held) << "the first execute() never logged its wrong argument count";
  EXPECT_EQ(second, Error::InvalidState);
  EXPECT_EQ(output->data(), std::vector<float>(output->data().size(), -7.0f)) << "the refused call wrote";
  EXPECT_EQ(trap.count("already executing on another thread"), 1);
  EXPECT_EQ(first, Error::InvalidArgument);
  ASSERT_EQ(runner->run(), Error::Ok) << "the handle stayed busy after an execute() that failed";
  EXPECT_EQ(runner->output->data(), expected);
}

TEST(Reliability, TwoThreadsSharingOneHandleGetItsResultOrInvalidStateNeverAWrongResult) {
  constexpr int kRuns = 200;
  std::unique_ptr<Runner> runner = convolution(2);
  ASSERT_EQ(runner->init(), Error::Ok);
  ASSERT_EQ(runner->run(), Error::Ok);
  const std::vector<float> expected = runner->output->data();
  LogTrap quiet; // the refusals' log lines
  std::atomic<int> refused{0}, wrong{0}, failed{0};
  auto hammer = [&] {
    std::unique_ptr<HostTensor> output = runner->new_output();
    for (int run = 0; run < kRuns; ++run) {
      const Error error = runner->run(*runner->input, *output);
      if (error == Error::InvalidState) {
        ++refused;
      } else if (error != Error::Ok) {
        ++failed;
      } else if (!same_result(output->data(), expected)) {
        ++wrong;
      }
    }
  };
  std::thread other(hammer);
  hammer();
  other.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(quiet.count("already executing on another thread"), refused.load());
}

// Bound: each cycle allocates the handle's arena, packed weights and primitives (tens of KiB, see
// matmul_relu); never destroying the handle grew resident memory by 27 MiB over the 900 measured
// cycles here, and losing even 5 KiB a cycle would exceed the bound. 4 MiB leaves room for the
// allocator's own drift (glibc keeps freed chunks in per-thread caches and arenas; measured 0 kB).
// Smaller losses are LeakSanitizer's and valgrind's (scripts/run_sanitizers.sh, run_memcheck.sh).
// A relu post-op turns a NaN into 0 in oneDNN 3.2: with a NaN in the input, the guarded convolution
// reruns without it and clamps on the host. The next finite input takes the fused path again.
// Sets the backend option "winograd" (Winograd.h) for the programs initialized next.
void set_winograd(int use) {
  executorch::runtime::BackendOptions<1> options;
  options.set_option("winograd", use);
  ASSERT_EQ(executorch::runtime::set_option("OneDnnBackend", options.view()), Error::Ok);
}

// With the direct kernel on both paths the outputs a NaN does not reach are the finite run's, bit for
// bit. Where the finite run computes by Winograd (on AVX2 CPUs by default; forced here), the NaN run
// takes the direct kernel, so they agree to Winograd's round-off.
TEST(Reliability, AFusedReluKeepsANaNOnlyWhereTheInputHasOne) {
  for (const int winograd : {0, 2}) {
    SCOPED_TRACE(winograd == 0 ? "winograd never" : "winograd always");
    set_winograd(winograd);
    auto runner = convolution(41);
    ASSERT_EQ(runner->init(), Error::Ok);
    set_winograd(1);
    ASSERT_EQ(runner->run(), Error::Ok);
    const std::vector<float> finite = runner->output->data();
    std::vector<float>& x = runner->input->data();
    const float kept = x[5 * 16 + 7];
    x[5 * 16 + 7] = std::numeric_limits<float>::quiet_NaN(); // channel 0, row 5, column 7
    ASSERT_EQ(runner->run(), Error::Ok);
    const std::vector<float>& y = runner->output->data();
    for (size_t c = 0; c < 16; ++c) {
      for (size_t h = 0; h < 16; ++h) {
        for (size_t w = 0; w < 16; ++w) {
          const size_t i = (c * 16 + h) * 16 + w;
          const bool reached = h >= 4 && h <= 6 && w >= 6 && w <= 8; // the 3x3 windows holding (5, 7)
          if (reached) {
            EXPECT_TRUE(std::isnan(y[i])) << "channel " << c << " at " << h << "," << w;
          } else if (winograd == 0) {
            EXPECT_EQ(y[i], finite[i]) << "channel " << c << " at " << h << "," << w;
          } else {
            EXPECT_NEAR(y[i], finite[i], 1e-5f * (1.0f + std::fabs(finite[i])))
                << "channel " << c << " at " << h << "," << w;
          }
        }
      }
    }
    x[5 * 16 + 7] = kept;
    ASSERT_EQ(runner->run(), Error::Ok);
    EXPECT_EQ(runner->output->data(), finite);
  }
}

// Max pooling loses a NaN in oneDNN 3.2: with one in the input, PyTorch's windows run on the host.
TEST(Reliability, MaxPoolingKeepsANaNAndAnInfinityOfItsWindow) {
  Runner runner;
  const uint32_t src = runner.model.input({1, 2, 4, 4});
  const uint32_t dst = runner.model.value({1, 2, 2, 2});
  runner.model.payload.step(
      Kind::Pooling,
      {src},
      {dst},
      {alg(PoolingAlg::Max),
       ints("kernel", {2, 2}),
       ints("strides", {2, 2}),
       ints("padding_l", {0, 0}),
       ints("padding_r", {0, 0}),
       ints("dilation", {1, 1})});
  runner.model.output(dst, {1, 2, 2, 2});
  add_tensors(runner, 43);
  ASSERT_EQ(runner.init(), Error::Ok);
  std::vector<float>& x = runner.input->data();
  x[0] = std::numeric_limits<float>::quiet_NaN();      // channel 0, window (0, 0)
  x[16 + 15] = std::numeric_limits<float>::infinity(); // channel 1, window (1, 1)
  ASSERT_EQ(runner.run(), Error::Ok);
  const std::vector<float>& y = runner.output->data();
  for (size_t c = 0; c < 2; ++c) {
    for (size_t oh = 0; oh < 2; ++oh) {
      for (size_t ow = 0; ow < 2; ++ow) {
        float want = -std::numeric_limits<float>::infinity();
        for (size_t h = 2 * oh; h < 2 * oh + 2; ++h) {
          for (size_t w = 2 * ow; w < 2 * ow + 2; ++w) {
            const float v = x[(c * 4 + h) * 4 + w];
            want = std::isnan(want) || std::isnan(v) ? std::numeric_limits<float>::quiet_NaN() : std::max(want, v);
          }
        }
        const float got = y[(c * 2 + oh) * 2 + ow];
        EXPECT_TRUE(std::isnan(want) ? std::isnan(got) : got == want) << c << "," << oh << "," << ow << ": " << got;
      }
    }
  }
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[4 + 3], std::numeric_limits<float>::infinity());
}

TEST(Reliability, ResidentMemoryStaysFlatOverAThousandInitExecuteDestroyCycles) {
  std::unique_ptr<Runner> runner = matmul_relu(3);
  const std::vector<uint8_t> payload = runner->model.payload.build();
  int failures = 0;
  auto cycle = [&] {
    Result<DelegateHandle*> handle = runner->harness.init(payload, &runner->model.data);
    if (!handle.ok()) {
      ++failures;
      return;
    }
    failures += runner->harness.execute(handle.get(), {runner->input.get(), runner->output.get()}) != Error::Ok;
    runner->harness.destroy(handle.get());
  };
  for (int i = 0; i < 100; ++i) {
    cycle(); // warms oneDNN's primitive cache and the allocator's free lists
  }
  const size_t after_100 = resident_kilobytes();
  for (int i = 100; i < 1000; ++i) {
    cycle();
  }
  const size_t after_1000 = resident_kilobytes();
  ASSERT_EQ(failures, 0);
  ASSERT_GT(after_100, 0u) << "VmRSS not found in /proc/self/status";
  EXPECT_LT(after_1000, after_100 + 4096)
      << "resident memory grew from " << after_100 << " kB to " << after_1000 << " kB";
  EXPECT_EQ(runner->model.data.buffers_out, runner->model.data.buffers_freed);
  EXPECT_EQ(runner->harness.payload_frees, 1000);
}

} // namespace
} // namespace onednn_test
