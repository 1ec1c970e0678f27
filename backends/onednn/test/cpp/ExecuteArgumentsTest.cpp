// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// execute() checks its arguments before touching any data.
#include <gtest/gtest.h>

#include "BackendHarness.h"

namespace onednn_test {
namespace {

using executorch::aten::ScalarType;
using executorch::runtime::TensorShapeDynamism;

class ExecuteArguments : public ::testing::Test {
 protected:
  void SetUp() override {
    const uint32_t src = model_.input({2, 3});
    const uint32_t dst = model_.value({2, 3});
    model_.payload.step(
        Kind::Eltwise, {src}, {dst}, {alg(EltwiseAlg::Linear), floats("alpha", {2}), floats("beta", {1})});
    model_.output(dst, {2, 3});
    Result<DelegateHandle*> handle = harness_.init(model_.payload.build(), &model_.data);
    ASSERT_TRUE(handle.ok());
    handle_ = handle.get();
  }
  void TearDown() override {
    if (handle_ != nullptr) {
      harness_.destroy(handle_);
    }
  }

  Model model_;
  Harness harness_;
  DelegateHandle* handle_ = nullptr;
};

TEST_F(ExecuteArguments, CorrectArgumentsRun) {
  HostTensor input({2, 3}, {0, 1, 2, 3, 4, 5});
  HostTensor output({2, 3});
  ASSERT_EQ(harness_.execute(handle_, {&input, &output}), Error::Ok);
  EXPECT_EQ(output.data(), (std::vector<float>{1, 3, 5, 7, 9, 11}));
}

TEST_F(ExecuteArguments, WrongNumberOfArgumentsIsInvalid) {
  HostTensor input({2, 3});
  HostTensor output({2, 3});
  EXPECT_EQ(harness_.execute(handle_, {&input}), Error::InvalidArgument);
  EXPECT_EQ(harness_.execute(handle_, {&input, &output, &output}), Error::InvalidArgument);
}

TEST_F(ExecuteArguments, WrongInputShapeIsInvalid) {
  HostTensor input({3, 2});
  HostTensor rank_changed({6});
  HostTensor output({2, 3});
  EXPECT_EQ(harness_.execute(handle_, {&input, &output}), Error::InvalidArgument);
  EXPECT_EQ(harness_.execute(handle_, {&rank_changed, &output}), Error::InvalidArgument);
}

TEST_F(ExecuteArguments, WrongInputDtypeIsInvalid) {
  HostTensor input({2, 3}, {}, ScalarType::Int);
  HostTensor output({2, 3});
  EXPECT_EQ(harness_.execute(handle_, {&input, &output}), Error::InvalidArgument);
}

TEST_F(ExecuteArguments, StaticOutputOfWrongShapeIsInvalid) {
  HostTensor input({2, 3});
  HostTensor output({3, 3});
  EXPECT_EQ(harness_.execute(handle_, {&input, &output}), Error::InvalidArgument);
}

TEST_F(ExecuteArguments, DynamicOutputIsResizedToCompiledShape) {
  HostTensor input({2, 3}, {0, 0, 0, 0, 0, 0});
  HostTensor output({4, 4}, {}, ScalarType::Float, TensorShapeDynamism::DYNAMIC_BOUND);
  ASSERT_EQ(harness_.execute(handle_, {&input, &output}), Error::Ok);
  EXPECT_EQ(output.sizes(), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(output.data()[5], 1.0f);
}

} // namespace
} // namespace onednn_test
