// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// The "max_isa" backend option through ExecuTorch's option API. Setting a cap that oneDNN accepts is
// checked from Python in fresh processes (test_isa.py): in this binary oneDNN has started already.
#include <cstring>
#include <string>

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/backend/options.h>
#include <gtest/gtest.h>

namespace {

using executorch::runtime::BackendOptions;
using executorch::runtime::Error;

constexpr char kBackend[] = "OneDnnBackend";

// The instruction set the backend reports through get_option ("" when it fails).
std::string effective_isa() {
  BackendOptions<1> query;
  query.set_option("max_isa", "");
  const char* name = nullptr;
  if (executorch::runtime::get_option(kBackend, query.view()) != Error::Ok ||
      query.get_option("max_isa", name) != Error::Ok || name == nullptr) {
    return "";
  }
  return name;
}

TEST(CpuIsaOption, UnknownInstructionSetIsRefused) {
  BackendOptions<1> options;
  options.set_option("max_isa", "avx9000");
  EXPECT_EQ(executorch::runtime::set_option(kBackend, options.view()), Error::InvalidArgument);
}

TEST(CpuIsaOption, NonStringValueIsRefused) {
  BackendOptions<1> options;
  options.set_option("max_isa", 2);
  EXPECT_EQ(executorch::runtime::set_option(kBackend, options.view()), Error::InvalidArgument);
}

TEST(CpuIsaOption, ReportsTheEffectiveInstructionSet) {
  const std::string name = effective_isa();
  // An x86-64 CPU has at least SSE4.1 under any cap.
  EXPECT_NE(name, "none");
  EXPECT_NE(name, "");
}

TEST(CpuIsaOption, CapRefusedOnceOneDnnHasStartedChangesNothing) {
  const std::string effective = effective_isa();
  ASSERT_NE(effective, "");

  BackendOptions<1> cap;
  cap.set_option("max_isa", "sse41");
  EXPECT_EQ(executorch::runtime::set_option(kBackend, cap.view()), Error::InvalidArgument);
  EXPECT_EQ(effective_isa(), effective);
}

} // namespace

namespace {

// An int option as get_option reports it (-1 when it fails).
template <size_t N>
int int_option(const char (&key)[N]) {
  BackendOptions<1> query;
  query.set_option(key, -1);
  int value = -1;
  if (executorch::runtime::get_option(kBackend, query.view()) != Error::Ok ||
      query.get_option(key, value) != Error::Ok) {
    return -1;
  }
  return value;
}

int verbose_level() {
  return int_option("verbose");
}

// set_option of one int option, or of a string under an int option's key.
template <size_t N, typename Value>
Error set_one_option(const char (&key)[N], Value value) {
  BackendOptions<1> options;
  options.set_option(key, value);
  return executorch::runtime::set_option(kBackend, options.view());
}

} // namespace

// "verbose" sets oneDNN's log level; a level it lacks, or a refused list, changes nothing.
TEST(VerboseOption, SetsAndReportsTheLevelAndRefusesOthers) {
  BackendOptions<1> on;
  on.set_option("verbose", 1);
  ASSERT_EQ(executorch::runtime::set_option(kBackend, on.view()), Error::Ok);
  EXPECT_EQ(verbose_level(), 1);
  BackendOptions<2> refused;
  refused.set_option("verbose", 0);
  refused.set_option("num_threads", -3);
  EXPECT_EQ(executorch::runtime::set_option(kBackend, refused.view()), Error::InvalidArgument);
  EXPECT_EQ(verbose_level(), 1);
  BackendOptions<1> too_high;
  too_high.set_option("verbose", 3);
  EXPECT_EQ(executorch::runtime::set_option(kBackend, too_high.view()), Error::InvalidArgument);
  BackendOptions<1> off;
  off.set_option("verbose", 0);
  ASSERT_EQ(executorch::runtime::set_option(kBackend, off.view()), Error::Ok);
  EXPECT_EQ(verbose_level(), 0);
}

// "huge_pages" (HostMemory.h): 1 ("large") until set; a value outside 0..2 changes nothing.
TEST(HugePagesOption, DefaultsToLargeSetsAndRefusesOthers) {
  EXPECT_EQ(int_option("huge_pages"), 1);
  ASSERT_EQ(set_one_option("huge_pages", 2), Error::Ok);
  EXPECT_EQ(int_option("huge_pages"), 2);
  for (const int refused : {-1, 3}) {
    EXPECT_EQ(set_one_option("huge_pages", refused), Error::InvalidArgument);
  }
  EXPECT_EQ(set_one_option("huge_pages", "always"), Error::InvalidArgument);
  EXPECT_EQ(int_option("huge_pages"), 2);
  ASSERT_EQ(set_one_option("huge_pages", 1), Error::Ok);
  EXPECT_EQ(int_option("huge_pages"), 1);
}
