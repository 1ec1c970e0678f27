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
  BackendOptions<1> options;
  options.set_option("max_isa", "");
  ASSERT_EQ(executorch::runtime::get_option(kBackend, options.view()), Error::Ok);
  const char* name = nullptr;
  ASSERT_EQ(options.get_option("max_isa", name), Error::Ok);
  ASSERT_NE(name, nullptr);
  // An x86-64 CPU has at least SSE4.1 under any cap.
  EXPECT_NE(std::string(name), "none");
  EXPECT_NE(std::string(name), "");
}

TEST(CpuIsaOption, CapRefusedOnceOneDnnHasStartedChangesNothing) {
  BackendOptions<1> query;
  query.set_option("max_isa", "");
  ASSERT_EQ(executorch::runtime::get_option(kBackend, query.view()), Error::Ok);
  const char* before = nullptr;
  ASSERT_EQ(query.get_option("max_isa", before), Error::Ok);
  const std::string effective(before);

  BackendOptions<1> cap;
  cap.set_option("max_isa", "sse41");
  EXPECT_EQ(executorch::runtime::set_option(kBackend, cap.view()), Error::InvalidArgument);
  ASSERT_EQ(executorch::runtime::get_option(kBackend, query.view()), Error::Ok);
  const char* after = nullptr;
  ASSERT_EQ(query.get_option("max_isa", after), Error::Ok);
  EXPECT_EQ(std::string(after), effective);
}

} // namespace
