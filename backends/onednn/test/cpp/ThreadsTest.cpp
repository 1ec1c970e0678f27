// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// The "num_threads" backend option: set/get through ExecuTorch's option API, refusal of bad values,
// correct results across changes, and that the count bounds the threads oneDNN computes on.
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <dirent.h>
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/backend/options.h>
#include <executorch/runtime/kernel/thread_parallel_interface.h>
#include <gtest/gtest.h>

#include "BackendHarness.h"
#include "ReferenceOps.h"

namespace onednn_test {
namespace {

using executorch::runtime::BackendOptions;

constexpr char kBackend[] = "OneDnnBackend";

Error set_threads(int threads) {
  BackendOptions<1> options;
  options.set_option("num_threads", threads);
  return executorch::runtime::set_option(kBackend, options.view());
}

// The count the backend reports, or -1 when get_option fails.
int get_threads() {
  BackendOptions<1> options;
  options.set_option("num_threads", 0);
  if (executorch::runtime::get_option(kBackend, options.view()) != Error::Ok) {
    return -1;
  }
  int threads = -1;
  return options.get_option("num_threads", threads) == Error::Ok ? threads : -1;
}

// a [m, k] x weights [n, k]^T, the shape of a linear layer.
struct Linear : LoadedModel {
  int64_t m, k, n;
  std::vector<float> a = random_values(m * k, 21);
  std::vector<float> w = random_values(n * k, 22);
  HostTensor input{{static_cast<int32_t>(m), static_cast<int32_t>(k)}, a};
  HostTensor output{{static_cast<int32_t>(m), static_cast<int32_t>(n)}};

  Linear(int64_t m_, int64_t k_, int64_t n_) : m(m_), k(k_), n(n_) {
    const uint32_t src = model.input({m, k});
    const uint32_t weights = model.constant({n, k}, w);
    const uint32_t dst = model.value({m, n});
    model.payload.step(Kind::Matmul, {src, weights, kNoValue}, {dst}, {ints("transpose_b", {1})});
    model.output(dst, {m, n});
  }
  Error run() {
    return harness.execute(handle, {&input, &output});
  }
  std::vector<float> expected() const {
    return matmul_ref(a, w, {}, 1, 1, m, k, n, true);
  }
};

class Threads : public ::testing::Test {
 protected:
  void TearDown() override {
    EXPECT_EQ(set_threads(0), Error::Ok) << "could not return to the default thread count";
  }
};

TEST_F(Threads, SetCountIsWhatGetOptionReports) {
  ASSERT_EQ(set_threads(1), Error::Ok);
  EXPECT_EQ(get_threads(), 1);
  ASSERT_EQ(set_threads(3), Error::Ok);
  EXPECT_EQ(get_threads(), 3);
}

TEST_F(Threads, DefaultIsTheSizeOfExecuTorchsThreadpool) {
  ASSERT_EQ(set_threads(0), Error::Ok);
  EXPECT_EQ(get_threads(), static_cast<int>(executorch::extension::get_thread_count()))
      << "with no option and no ONEDNN_BACKEND_NUM_THREADS, oneDNN should get ExecuTorch's threads";
}

TEST_F(Threads, InvalidValuesAreRefusedAndChangeNothing) {
  ASSERT_EQ(set_threads(2), Error::Ok);
  EXPECT_EQ(set_threads(-1), Error::InvalidArgument) << "negative count";
  EXPECT_EQ(set_threads(1 << 20), Error::InvalidArgument) << "more threads than any CPU has";

  BackendOptions<1> as_bool;
  as_bool.set_option("num_threads", true);
  EXPECT_EQ(executorch::runtime::set_option(kBackend, as_bool.view()), Error::InvalidArgument);
  BackendOptions<1> as_string;
  as_string.set_option("num_threads", "4");
  EXPECT_EQ(executorch::runtime::set_option(kBackend, as_string.view()), Error::InvalidArgument);
  BackendOptions<2> with_unknown; // a valid count next to an unknown key: neither applies
  with_unknown.set_option("num_threads", 1);
  with_unknown.set_option("num_treads", 1);
  EXPECT_EQ(executorch::runtime::set_option(kBackend, with_unknown.view()), Error::InvalidArgument);

  EXPECT_EQ(get_threads(), 2) << "a refused option changed the thread count";
}

TEST_F(Threads, GetOptionOfAnUnknownKeyIsNotFound) {
  BackendOptions<1> options;
  options.set_option("num_treads", 0);
  EXPECT_EQ(executorch::runtime::get_option(kBackend, options.view()), Error::NotFound);
}

TEST_F(Threads, ResultsStayCorrectWhenTheCountChangesBetweenExecutions) {
  ASSERT_EQ(set_threads(1), Error::Ok);
  Linear linear(64, 96, 80);
  ASSERT_EQ(linear.init(), Error::Ok);
  for (int threads : {1, 2, 3, 0, 1}) {
    ASSERT_EQ(set_threads(threads), Error::Ok);
    std::fill(linear.output.data().begin(), linear.output.data().end(), 0.0f);
    ASSERT_EQ(linear.run(), Error::Ok) << "with num_threads " << threads;
    expect_close(linear.output.data(), linear.expected(), "linear, num_threads " + std::to_string(threads));
  }
}

// CPU time (clock ticks) each thread of this process has used so far, by thread id.
std::map<long, long> thread_cpu_ticks() {
  std::map<long, long> ticks;
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) {
    return ticks;
  }
  while (const dirent* entry = readdir(tasks)) {
    if (entry->d_name[0] == '.') {
      continue;
    }
    std::ifstream file(std::string("/proc/self/task/") + entry->d_name + "/stat");
    std::string line;
    std::getline(file, line);
    const size_t comm_end = line.rfind(')');
    if (comm_end == std::string::npos) {
      continue;
    }
    std::istringstream fields(line.substr(comm_end + 2)); // from field 3 (state) on
    std::string field;
    long utime = 0, stime = 0;
    for (int index = 3; index <= 15 && fields >> field; ++index) {
      if (index == 14) {
        utime = std::stol(field);
      } else if (index == 15) {
        stime = std::stol(field);
      }
    }
    ticks[std::stol(entry->d_name)] = utime + stime;
  }
  closedir(tasks);
  return ticks;
}

struct Split {
  long caller = 0;        // ticks of the thread that called execute()
  long busiest_other = 0; // ticks of the busiest other thread
  long others = 0;
};

// Executes `linear` for `duration` and splits the CPU time this took among the process's threads.
Split cpu_time_while_running(Linear& linear, std::chrono::milliseconds duration) {
  const long self = static_cast<long>(syscall(SYS_gettid));
  const auto before = thread_cpu_ticks();
  const auto end = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < end) {
    EXPECT_EQ(linear.run(), Error::Ok);
  }
  Split split;
  for (const auto& [tid, ticks] : thread_cpu_ticks()) {
    const auto found = before.find(tid);
    const long used = ticks - (found == before.end() ? 0 : found->second);
    if (tid == self) {
      split.caller = used;
    } else {
      split.others += used;
      split.busiest_other = std::max(split.busiest_other, used);
    }
  }
  return split;
}

TEST_F(Threads, LoweringTheCountToOneKeepsTheNextExecutionsOnTheCallingThread) {
  cpu_set_t cpus;
  ASSERT_EQ(sched_getaffinity(0, sizeof(cpus), &cpus), 0);
  ASSERT_GE(CPU_COUNT(&cpus), 2) << "seeing a second thread compute needs 2 CPUs";
  ASSERT_EQ(set_threads(2), Error::Ok);
  Linear linear(512, 512, 512);
  ASSERT_EQ(linear.init(), Error::Ok);

  // The control: the measurement does see a second thread compute while the count allows one
  // (a few ticks suffice: a busy machine may leave the second thread little of its CPU).
  const Split two = cpu_time_while_running(linear, std::chrono::milliseconds(600));
  EXPECT_GE(two.busiest_other, 3) << "with num_threads 2, no second thread computed (caller " << two.caller
                                  << " ticks, busiest other " << two.busiest_other << ")";

  ASSERT_EQ(set_threads(1), Error::Ok);
  const Split one = cpu_time_while_running(linear, std::chrono::milliseconds(600));
  EXPECT_GT(one.caller, 20) << "the calling thread should have computed for most of 600 ms";
  EXPECT_LE(one.others, 2 + one.caller / 20)
      << "with num_threads 1, other threads used " << one.others << " ticks against the caller's " << one.caller;
  expect_close(linear.output.data(), linear.expected(), "512x512 linear");
}

} // namespace
} // namespace onednn_test
