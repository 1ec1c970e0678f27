// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// Version 2 payloads: dims given as expressions over dynamic sizes. execute() compiles each set of
// sizes it meets (within the exported ranges) and refuses sizes outside them; init() refuses any
// malformed expression.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/backend/options.h>
#include <gtest/gtest.h>

#include "BackendHarness.h"

namespace onednn_test {
namespace {

using Op = executorch::backends::onednn::ShapeOp;
using executorch::runtime::TensorShapeDynamism;

int64_t op(Op code) {
  return static_cast<int64_t>(code);
}

constexpr int64_t kMin = 2;
constexpr int64_t kMax = 12;
constexpr int64_t kWidth = 4;

// x [s, 4] + bias [4] -> relu -> reshape [2s, 2]: a constant, a broadcast, and a dim that is an
// expression of s, all stored at s = kMax.
Model dynamic_model(std::vector<float>& bias) {
  Model model;
  model.payload.dynamic = true;
  const uint32_t s = model.payload.symbol(kMin, kMax);
  bias = random_values(kWidth, 3);
  const uint32_t x = model.input({kMax, kWidth});
  const uint32_t b = model.constant({kWidth}, bias);
  const uint32_t sum = model.value({kMax, kWidth});
  const uint32_t relu = model.value({kMax, kWidth});
  const uint32_t out = model.value({2 * kMax, 2});
  model.payload.step(Kind::Binary, {x, b}, {sum}, {alg(BinaryAlg::Add)});
  model.payload.step(Kind::Eltwise, {sum}, {relu}, {alg(EltwiseAlg::Relu), floats("alpha", {0}), floats("beta", {0})});
  model.payload.step(Kind::Reshape, {relu}, {out});
  model.output(out, {2 * kMax, 2});
  const std::vector<int64_t> bare = {op(Op::Symbol), s};
  for (uint32_t id : {x, sum, relu}) {
    model.payload.symbolic_dim(id, 0, bare);
  }
  model.payload.symbolic_dim(out, 0, {op(Op::Const), 2, op(Op::Symbol), s, op(Op::Mul)});
  return model;
}

class DynamicShapes : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = dynamic_model(bias_);
    Result<DelegateHandle*> handle = harness_.init(model_.payload.build(), &model_.data);
    ASSERT_EQ(handle.error(), Error::Ok);
    handle_ = handle.get();
  }
  void TearDown() override {
    if (handle_ != nullptr) {
      harness_.destroy(handle_);
    }
  }

  // Runs at `rows` rows; the output tensor is bounded by the maximum, as ExecuTorch plans it.
  Error run(int32_t rows, std::vector<float>& result, std::vector<int32_t>* sizes = nullptr) {
    HostTensor input({rows, kWidth}, random_values(static_cast<size_t>(rows) * kWidth, rows));
    HostTensor output(
        {2 * static_cast<int32_t>(kMax), 2},
        {},
        executorch::aten::ScalarType::Float,
        TensorShapeDynamism::DYNAMIC_BOUND);
    const Error error = harness_.execute(handle_, {&input, &output});
    if (error == Error::Ok) {
      std::vector<float> expected(input.data().size());
      for (size_t i = 0; i < expected.size(); ++i) {
        expected[i] = std::max(0.0f, input.data()[i] + bias_[i % kWidth]);
      }
      result.assign(output.data().begin(), output.data().begin() + expected.size());
      expect_close(result, expected, "rows " + std::to_string(rows));
      if (sizes != nullptr) {
        *sizes = output.sizes();
      }
    }
    return error;
  }

  Harness harness_;
  Model model_;
  std::vector<float> bias_;
  DelegateHandle* handle_ = nullptr;
};

TEST_F(DynamicShapes, RunsAtEverySizeWithinTheRangeAndResizesTheOutput) {
  std::vector<float> result;
  for (int32_t rows : {static_cast<int32_t>(kMax), static_cast<int32_t>(kMin), 5, 12, 5, 7}) {
    std::vector<int32_t> sizes;
    ASSERT_EQ(run(rows, result, &sizes), Error::Ok) << rows << " rows";
    EXPECT_EQ(sizes, (std::vector<int32_t>{2 * rows, 2}));
  }
}

TEST_F(DynamicShapes, MoreSizesThanTheCacheHoldsStayCorrect) {
  std::vector<float> result;
  for (int pass = 0; pass < 2; ++pass) {
    for (int32_t rows = kMin; rows <= kMax; ++rows) {
      ASSERT_EQ(run(rows, result), Error::Ok) << rows << " rows, pass " << pass;
    }
  }
}

// The primitives of the graphs a dynamic program builds and evicts are not kept by oneDNN's cache
// beyond 256 of them (OneDnnBackend.cpp): its default of 1024 held ~90 MB of an LLM's.
TEST_F(DynamicShapes, OneDnnKeepsAtMost256PrimitivesOfReleasedGraphs) {
  if (std::getenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY") != nullptr) {
    GTEST_SKIP() << "ONEDNN_PRIMITIVE_CACHE_CAPACITY is set: it decides the capacity";
  }
  executorch::runtime::BackendOptions<1> query;
  query.set_option("primitive_cache_capacity", 0);
  ASSERT_EQ(executorch::runtime::get_option("OneDnnBackend", query.view()), Error::Ok);
  int capacity = 0;
  ASSERT_EQ(query.get_option("primitive_cache_capacity", capacity), Error::Ok);
  EXPECT_EQ(capacity, 256);
}

TEST_F(DynamicShapes, SizesOutsideTheRangeAreRefused) {
  std::vector<float> result;
  EXPECT_EQ(run(static_cast<int32_t>(kMax) + 1, result), Error::InvalidArgument);
  EXPECT_EQ(run(static_cast<int32_t>(kMin) - 1, result), Error::InvalidArgument);
  ASSERT_EQ(run(3, result), Error::Ok); // a refusal leaves the handle usable
}

TEST_F(DynamicShapes, WrongRankIsRefused) {
  HostTensor input({3, 2, 2}, random_values(12, 1));
  HostTensor output(
      {2 * static_cast<int32_t>(kMax), 2}, {}, executorch::aten::ScalarType::Float, TensorShapeDynamism::DYNAMIC_BOUND);
  EXPECT_EQ(harness_.execute(handle_, {&input, &output}), Error::InvalidArgument);
}

TEST(DynamicShapesSizeArguments, IntegerArgumentsAreSkipped) {
  std::vector<float> bias;
  Model model = dynamic_model(bias);
  model.payload.size_args = {0}; // the call passes (rows, x, out)
  Harness harness;
  Result<DelegateHandle*> handle = harness.init(model.payload.build(), &model.data);
  ASSERT_EQ(handle.error(), Error::Ok);
  HostTensor input({3, kWidth}, random_values(3 * kWidth, 5));
  HostTensor output(
      {2 * static_cast<int32_t>(kMax), 2}, {}, executorch::aten::ScalarType::Float, TensorShapeDynamism::DYNAMIC_BOUND);
  executorch::runtime::EValue rows(static_cast<int64_t>(3));
  std::vector<executorch::runtime::EValue*> args = {&rows, input.evalue(), output.evalue()};
  executorch::runtime::BackendExecutionContext context;
  const auto execute = [&]() {
    return harness.backend()->execute(
        context, handle.get(), executorch::runtime::Span<executorch::runtime::EValue*>(args.data(), args.size()));
  };
  ASSERT_EQ(execute(), Error::Ok);
  std::vector<float> expected(3 * kWidth);
  for (size_t i = 0; i < expected.size(); ++i) {
    expected[i] = std::max(0.0f, input.data()[i] + bias[i % kWidth]);
  }
  expect_close(std::vector<float>(output.data().begin(), output.data().begin() + expected.size()), expected, "rows");
  args[0] = input.evalue(); // a tensor where the size belongs
  EXPECT_EQ(execute(), Error::InvalidArgument);
  harness.destroy(handle.get());
}

// x [s, 4] -> the last row x[s - 1] as a slice whose offset is an expression of s.
TEST(DynamicShapesAttributes, SliceOffsetFollowsTheSize) {
  Model model;
  model.payload.dynamic = true;
  const uint32_t s = model.payload.symbol(kMin, kMax);
  const uint32_t x = model.input({kMax, kWidth});
  const uint32_t last = model.value({1, kWidth});
  model.payload.step(Kind::Reorder, {x}, {last}, {ints("offsets", {kMax - 1, 0})});
  model.output(last, {1, kWidth});
  model.payload.symbolic_dim(x, 0, {op(Op::Symbol), s});
  model.payload.symbolic_attribute(0, "offsets", 0, {op(Op::Symbol), s, op(Op::Const), -1, op(Op::Add)});
  Harness harness;
  Result<DelegateHandle*> handle = harness.init(model.payload.build(), &model.data);
  ASSERT_EQ(handle.error(), Error::Ok);
  for (int32_t rows : {3, static_cast<int32_t>(kMax), static_cast<int32_t>(kMin)}) {
    HostTensor input({rows, kWidth}, random_values(static_cast<size_t>(rows) * kWidth, rows));
    HostTensor output({1, kWidth});
    ASSERT_EQ(harness.execute(handle.get(), {&input, &output}), Error::Ok) << rows;
    const std::vector<float> expected(input.data().end() - kWidth, input.data().end());
    expect_close(output.data(), expected, "last of " + std::to_string(rows) + " rows");
  }
  harness.destroy(handle.get());
}

// init() of `model` after `edit` changes its dynamic-shape section.
Error init_with(void (*edit)(Model&)) {
  std::vector<float> bias;
  Model model = dynamic_model(bias);
  edit(model);
  return init_error(model.payload.build(), &model.data);
}

std::vector<int64_t> twice_half_rounded_up(uint32_t symbol) {
  return {
      op(Op::Const),
      2,
      op(Op::Symbol),
      symbol,
      op(Op::Const),
      1,
      op(Op::Add),
      op(Op::Const),
      2,
      op(Op::FloorDiv),
      op(Op::Mul)};
}

TEST(DynamicShapesValidation, MalformedSectionsAreRefused) {
  struct Case {
    const char* what;
    void (*edit)(Model&);
  };
  const Case cases[] = {
      {"unknown opcode", [](Model& m) { m.payload.symbolic_dim(4, 1, {op(Op::Const), 2, 99}); }},
      {"stack underflow", [](Model& m) { m.payload.symbolic_dim(4, 1, {op(Op::Const), 2, op(Op::Add)}); }},
      {"operand missing", [](Model& m) { m.payload.symbolic_dim(4, 1, {op(Op::Symbol)}); }},
      {"unknown symbol", [](Model& m) { m.payload.symbolic_dim(4, 1, {op(Op::Symbol), 7}); }},
      {"two results", [](Model& m) { m.payload.symbolic_dim(4, 1, {op(Op::Const), 2, op(Op::Const), 2}); }},
      {"stored dim differs", [](Model& m) { m.payload.symbolic_dim(4, 1, {op(Op::Const), 3}); }},
      {"dim out of rank", [](Model& m) { m.payload.symbolic_dim(4, 2, {op(Op::Const), 2}); }},
      {"unknown value", [](Model& m) { m.payload.symbolic_dim(99, 0, {op(Op::Const), 2}); }},
      {"described twice", [](Model& m) { m.payload.symbolic_dim(0, 0, {op(Op::Symbol), 0}); }},
      {"constant's dim", [](Model& m) { m.payload.symbolic_dim(1, 0, {op(Op::Const), 4}); }},
      {"division by zero",
       [](Model& m) { m.payload.symbolic_dim(4, 1, {op(Op::Const), 2, op(Op::Const), 0, op(Op::FloorDiv)}); }},
      {"overflow",
       [](Model& m) { m.payload.symbolic_dim(4, 1, {op(Op::Const), INT64_MAX, op(Op::Const), 2, op(Op::Mul)}); }},
      {"size not given by an input", [](Model& m) { m.payload.symbol(1, 4); }},
      {"empty range", [](Model& m) { m.payload.symbolic_dim(0, 1, {op(Op::Symbol), m.payload.symbol(5, 4)}); }},
      {"attribute of an unknown step",
       [](Model& m) { m.payload.symbolic_attribute(9, "alg", 0, {op(Op::Const), code_of(BinaryAlg::Add)}); }},
      {"unknown attribute", [](Model& m) { m.payload.symbolic_attribute(0, "axis", 0, {op(Op::Const), 0}); }},
      {"attribute entry beyond its count",
       [](Model& m) { m.payload.symbolic_attribute(0, "alg", 1, {op(Op::Const), code_of(BinaryAlg::Add)}); }},
      {"attribute differs from its expression",
       [](Model& m) { m.payload.symbolic_attribute(0, "alg", 0, {op(Op::Const), code_of(BinaryAlg::Sub)}); }},
      {"attribute described twice",
       [](Model& m) {
         m.payload.symbolic_attribute(0, "alg", 0, {op(Op::Const), code_of(BinaryAlg::Add)});
         m.payload.symbolic_attribute(0, "alg", 0, {op(Op::Const), code_of(BinaryAlg::Add)});
       }},
      {"size argument beyond the inputs", [](Model& m) { m.payload.size_args = {2}; }},
      {"size arguments out of order", [](Model& m) { m.payload.size_args = {1, 0}; }},
      {"minimum below 1", [](Model& m) { m.payload.symbolic_dim(0, 1, {op(Op::Symbol), m.payload.symbol(0, 4)}); }},
      {"size given by no input dim one to one", // 2 * ((s + 1) // 2) is 4 for s = 3 and s = 4
       [](Model& m) { m.payload.symbolic_dim(0, 1, twice_half_rounded_up(m.payload.symbol(3, 4))); }},
  };
  EXPECT_EQ(init_with([](Model&) {}), Error::Ok);
  EXPECT_EQ(
      init_with([](Model& m) { m.payload.symbolic_attribute(0, "alg", 0, {op(Op::Const), code_of(BinaryAlg::Add)}); }),
      Error::Ok);
  EXPECT_EQ(
      init_with([](Model& m) { m.payload.symbolic_dim(0, 1, {op(Op::Symbol), m.payload.symbol(1, 4)}); }), Error::Ok);
  // 2 * ((s + 1) // 2) + s - 4 gives 3 at s = 3 and 4 at s = 4: solvable.
  EXPECT_EQ(
      init_with([](Model& m) {
        const uint32_t s = m.payload.symbol(3, 4);
        std::vector<int64_t> code = twice_half_rounded_up(s);
        code.insert(code.end(), {op(Op::Symbol), s, op(Op::Add), op(Op::Const), -4, op(Op::Add)});
        m.payload.symbolic_dim(0, 1, code);
      }),
      Error::Ok);
  for (const Case& c : cases) {
    EXPECT_EQ(init_with(c.edit), Error::InvalidProgram) << c.what;
  }
}

TEST(DynamicShapesValidation, FloorDivisionAndModuloFollowPython) {
  // Stored dim 1 of value 4 (the output, [2s, 2]) written as (-7 // 2) + (-7 % 2) + 5 = -4 + 1 + 5.
  const Error error = init_with([](Model& m) {
    m.payload.symbolic_dim(
        4,
        1,
        {op(Op::Const),
         -7,
         op(Op::Const),
         2,
         op(Op::FloorDiv),
         op(Op::Const),
         -7,
         op(Op::Const),
         2,
         op(Op::Mod),
         op(Op::Add),
         op(Op::Const),
         5,
         op(Op::Add)});
  });
  EXPECT_EQ(error, Error::Ok);
}

} // namespace
} // namespace onednn_test
