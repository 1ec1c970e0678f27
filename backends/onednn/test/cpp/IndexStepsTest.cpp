// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// ARG_REDUCTION, GATHER, HOST_ELEMENTWISE and INDEX_PUT: the host steps that read and write S64 and BOOL
// values, checked against hand-computed PyTorch results, and the payloads init() must refuse.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "BackendHarness.h"

namespace onednn_test {
namespace {

using executorch::aten::ScalarType;
using executorch::backends::onednn::DType;

constexpr uint8_t kF32 = static_cast<uint8_t>(DType::F32);
constexpr uint8_t kBF16 = static_cast<uint8_t>(DType::BF16);
constexpr uint8_t kS64 = static_cast<uint8_t>(DType::S64);
constexpr uint8_t kBool = static_cast<uint8_t>(DType::Bool);
constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// A graph input or output: its dims, dtype code and (inputs) bytes.
struct Operand {
  std::vector<int64_t> dims;
  uint8_t dtype;
  std::vector<uint8_t> bytes = {};
};

Operand f32(std::vector<int64_t> dims, const std::vector<float>& values) {
  return {std::move(dims), kF32, to_bytes(values)};
}

Operand s64(std::vector<int64_t> dims, const std::vector<int64_t>& values) {
  return {std::move(dims), kS64, to_bytes(values)};
}

Operand boolean(std::vector<int64_t> dims, const std::vector<uint8_t>& values) {
  return {std::move(dims), kBool, values};
}

// bf16 keeps the upper half of an f32: exact for the small values used here.
Operand bf16(std::vector<int64_t> dims, const std::vector<float>& values) {
  std::vector<uint16_t> halves;
  for (float v : values) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    halves.push_back(static_cast<uint16_t>(bits >> 16));
  }
  return {std::move(dims), kBF16, to_bytes(halves)};
}

// One `kind` step from graph inputs to a graph output.
Model one_step(Kind kind, const std::vector<Operand>& inputs, const Operand& dst, std::vector<Attr> attrs) {
  Model model;
  std::vector<uint32_t> ids;
  for (const Operand& input : inputs) {
    ids.push_back(model.input(input.dims, input.dtype));
  }
  const uint32_t out = model.value(dst.dims, dst.dtype);
  model.payload.step(kind, ids, {out}, std::move(attrs));
  model.output(out, dst.dims);
  return model;
}

// Runs one_step on the inputs' bytes, expecting execute() to return `expected`; dst's bytes.
std::vector<uint8_t> run_step(
    Kind kind,
    const std::vector<Operand>& inputs,
    const Operand& dst,
    std::vector<Attr> attrs,
    Error expected = Error::Ok) {
  Model model = one_step(kind, inputs, dst, std::move(attrs));
  std::vector<std::vector<uint8_t>> bytes;
  for (const Operand& input : inputs) {
    bytes.push_back(input.bytes);
  }
  const auto outputs = run_model_bytes(model, bytes, expected);
  return outputs.empty() ? std::vector<uint8_t>{} : outputs[0];
}

std::vector<uint8_t> elementwise(
    HostElementwiseAlg which, const std::vector<Operand>& operands, const Operand& dst, Error expected = Error::Ok) {
  return run_step(Kind::HostElementwise, operands, dst, {alg(which)}, expected);
}

std::vector<int64_t> arg_reduce(
    const Operand& src, ArgReductionAlg which, std::vector<int64_t> axis, std::vector<int64_t> dst_dims) {
  const auto bytes =
      run_step(Kind::ArgReduction, {src}, {std::move(dst_dims), kS64}, {alg(which), ints("axis", std::move(axis))});
  return from_bytes<int64_t>(bytes);
}

// [2, 3, 2]; along dim 1 the (0, *, 1) and (1, *, 1) rows tie at their maximum, and (0, *, 0) at 3.
const std::vector<float> kArgSrc = {1, 5, 3, 5, 3, -2, 0, 7, -1, 7, 4, -9};

TEST(IndexSteps, ArgReductionPicksTheFirstExtremeAlongAnAxis) {
  struct Case {
    ArgReductionAlg which;
    std::vector<int64_t> axis, dst_dims, expected;
  };
  const Case cases[] = {
      {ArgReductionAlg::Max, {1}, {2, 2}, {1, 0, 2, 0}},
      {ArgReductionAlg::Min, {1}, {2, 2}, {0, 2, 1, 2}},
      {ArgReductionAlg::Max, {-1}, {2, 3, 1}, {1, 1, 0, 1, 1, 0}}, // keepdim
      {ArgReductionAlg::Min, {-1}, {2, 3, 1}, {0, 0, 1, 0, 0, 1}},
      {ArgReductionAlg::Max, {}, {}, {7}}, // 7 is at 7 and 9
      {ArgReductionAlg::Min, {}, {1}, {11}},
  };
  for (const Case& c : cases) {
    const std::string what = std::string(c.which == ArgReductionAlg::Max ? "argmax" : "argmin") + " over " +
                             (c.axis.empty() ? "everything" : "axis " + std::to_string(c.axis[0]));
    EXPECT_EQ(arg_reduce(f32({2, 3, 2}, kArgSrc), c.which, c.axis, c.dst_dims), c.expected) << what;
  }
}

TEST(IndexSteps, ArgReductionOfBf16MatchesF32) {
  const auto indices = arg_reduce(bf16({2, 3, 2}, kArgSrc), ArgReductionAlg::Max, {1}, {2, 2});
  EXPECT_EQ(indices, (std::vector<int64_t>{1, 0, 2, 0}));
}

// PyTorch: NaN is both the maximum and the minimum, and the first NaN of a row wins.
TEST(IndexSteps, ArgReductionPicksTheFirstNaN) {
  const Operand src = f32({2, 4}, {1, kNaN, 5, kNaN, 3, 1, kNaN, 9});
  for (ArgReductionAlg which : {ArgReductionAlg::Max, ArgReductionAlg::Min}) {
    EXPECT_EQ(arg_reduce(src, which, {1}, {2}), (std::vector<int64_t>{1, 2})) << static_cast<int>(which);
  }
}

TEST(IndexSteps, GatherPicksRowsAlongAxisZero) {
  const Operand data = f32({3, 2}, {0, 1, 10, 11, 20, 21});
  const auto dst = run_step(Kind::Gather, {data, s64({2}, {2, 0})}, {{2, 2}, kF32}, {ints("axis", {0})});
  EXPECT_EQ(from_bytes<float>(dst), (std::vector<float>{20, 21, 0, 1}));
}

// Constant [2, 2] indices (an S64 value from the named data map), repeated, along dim 1 of [2, 3, 2].
TEST(IndexSteps, GatherWithConstantRepeatedIndicesAlongAMiddleAxis) {
  Model model;
  const uint32_t data = model.input({2, 3, 2});
  model.data.add("indices", to_bytes(std::vector<int64_t>{2, 0, 2, 1}));
  const uint32_t indices = model.payload.value({2, 2}, "indices", kS64);
  const uint32_t dst = model.value({2, 2, 2, 2});
  model.payload.step(Kind::Gather, {data, indices}, {dst}, {ints("axis", {1})});
  model.output(dst, {2, 2, 2, 2});
  const auto outputs = run_model(model, {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}});
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0], (std::vector<float>{4, 5, 0, 1, 4, 5, 2, 3, 10, 11, 6, 7, 10, 11, 8, 9}));
}

TEST(IndexSteps, GatherOfAnIndexOutOfRangeFailsExecute) {
  for (const std::vector<int64_t>& bad : {std::vector<int64_t>{0, 3}, std::vector<int64_t>{-1, 0}}) {
    SCOPED_TRACE("indices " + std::to_string(bad[0]) + ", " + std::to_string(bad[1]));
    run_step(
        Kind::Gather,
        {f32({3, 2}, {0, 1, 10, 11, 20, 21}), s64({2}, bad)},
        {{2, 2}, kF32},
        {ints("axis", {0})},
        Error::InvalidArgument);
  }
}

TEST(IndexSteps, FloatDivisionRoundsDownOrTowardZero) {
  const Operand a = f32({6}, {-7, 7, -7.5f, 7.5f, 1, -1});
  const Operand b = f32({6}, {2, -2, 2.5f, -2, 3, 3});
  const auto floor = elementwise(HostElementwiseAlg::FloorDivide, {a, b}, {{6}, kF32});
  EXPECT_EQ(from_bytes<float>(floor), (std::vector<float>{-4, -4, -3, -4, 0, -1}));
  const auto trunc = elementwise(HostElementwiseAlg::TruncDivide, {a, b}, {{6}, kF32});
  EXPECT_EQ(from_bytes<float>(trunc), (std::vector<float>{-3, -3, -3, -3, 0, 0}));
}

// A [2, 3] dividend over a [3] divisor; INT64_MIN / -1 wraps around to INT64_MIN.
TEST(IndexSteps, IntegerDivisionRoundsDownOrTowardZeroUnderBroadcast) {
  const Operand a = s64({2, 3}, {-7, 7, kMin64, -9, 9, 5});
  const Operand b = s64({3}, {2, -2, -1});
  const auto floor = elementwise(HostElementwiseAlg::FloorDivide, {a, b}, {{2, 3}, kS64});
  EXPECT_EQ(from_bytes<int64_t>(floor), (std::vector<int64_t>{-4, -4, kMin64, -5, -5, -5}));
  const auto trunc = elementwise(HostElementwiseAlg::TruncDivide, {a, b}, {{2, 3}, kS64});
  EXPECT_EQ(from_bytes<int64_t>(trunc), (std::vector<int64_t>{-3, -3, kMin64, -4, -4, -5}));
}

TEST(IndexSteps, IntegerDivisionByZeroFailsExecute) {
  for (HostElementwiseAlg which : {HostElementwiseAlg::FloorDivide, HostElementwiseAlg::TruncDivide}) {
    elementwise(which, {s64({2}, {1, 2}), s64({2}, {1, 0})}, {{2}, kS64}, Error::InvalidArgument);
  }
}

// [2, 3] against a broadcast [3] of twos; a NaN is unequal to everything and ordered with nothing.
TEST(IndexSteps, ComparisonsUnderBroadcastAndNaN) {
  const Operand a = f32({2, 3}, {1, 2, kNaN, 3, 2, 1});
  const Operand b = f32({3}, {2, 2, 2});
  const std::pair<HostElementwiseAlg, std::vector<uint8_t>> cases[] = {
      {HostElementwiseAlg::Eq, {0, 1, 0, 0, 1, 0}},
      {HostElementwiseAlg::Ne, {1, 0, 1, 1, 0, 1}},
      {HostElementwiseAlg::Lt, {1, 0, 0, 0, 0, 1}},
      {HostElementwiseAlg::Le, {1, 1, 0, 0, 1, 1}},
      {HostElementwiseAlg::Gt, {0, 0, 0, 1, 0, 0}},
      {HostElementwiseAlg::Ge, {0, 1, 0, 1, 1, 0}},
  };
  for (const auto& [which, expected] : cases) {
    EXPECT_EQ(elementwise(which, {a, b}, {{2, 3}, kBool}), expected) << "alg " << static_cast<int>(which);
  }
  const auto less = elementwise(HostElementwiseAlg::Lt, {s64({2}, {kMin64, 5}), s64({2}, {0, 5})}, {{2}, kBool});
  EXPECT_EQ(less, (std::vector<uint8_t>{1, 0})) << "S64 operands";
}

// [2, 3] against a broadcast [3]: a NaN in either operand gives NaN (PyTorch's maximum and minimum),
// infinities compare as numbers, and max(-0, 0) is the second operand.
TEST(IndexSteps, MaximumAndMinimumKeepANaNOfEitherOperand) {
  const float inf = std::numeric_limits<float>::infinity();
  const Operand a = f32({2, 3}, {1, kNaN, -inf, 3, 2, -0.0f});
  const Operand b = f32({3}, {kNaN, 2, 0});
  const auto maximum = from_bytes<float>(elementwise(HostElementwiseAlg::Maximum, {a, b}, {{2, 3}, kF32}));
  const auto minimum = from_bytes<float>(elementwise(HostElementwiseAlg::Minimum, {a, b}, {{2, 3}, kF32}));
  const std::vector<float> want_max = {kNaN, kNaN, 0, kNaN, 2, 0};
  const std::vector<float> want_min = {kNaN, kNaN, -inf, kNaN, 2, 0};
  ASSERT_EQ(maximum.size(), 6u);
  ASSERT_EQ(minimum.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_TRUE(std::isnan(want_max[i]) ? std::isnan(maximum[i]) : maximum[i] == want_max[i]) << "maximum " << i;
    EXPECT_TRUE(std::isnan(want_min[i]) ? std::isnan(minimum[i]) : minimum[i] == want_min[i]) << "minimum " << i;
  }
  EXPECT_FALSE(std::signbit(maximum[5])) << "max(-0, 0)";
}

// A [2, 1] condition whose true byte is 2, a [2, 3] operand and a scalar one (dims {} for f32, {1}
// for s64).
TEST(IndexSteps, WhereBroadcastsConditionAndScalar) {
  const Operand condition = boolean({2, 1}, {2, 0});
  const auto picked = elementwise(
      HostElementwiseAlg::Where, {condition, f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({}, {-1})}, {{2, 3}, kF32});
  EXPECT_EQ(from_bytes<float>(picked), (std::vector<float>{1, 2, 3, -1, -1, -1}));
  const auto longs = elementwise(
      HostElementwiseAlg::Where, {condition, s64({1}, {kMin64}), s64({2, 3}, {1, 2, 3, 4, 5, 6})}, {{2, 3}, kS64});
  EXPECT_EQ(from_bytes<int64_t>(longs), (std::vector<int64_t>{kMin64, kMin64, kMin64, 4, 5, 6}));
}

// x -> argmax rows (S64, also an output) -> gather those rows of x -> where(> 0, rows, constant 0)
// through a BOOL mask -> 2x + 1 on oneDNN: S64 and BOOL values between steps.
TEST(IndexSteps, ChainThroughS64AndBoolIntermediates) {
  Model model;
  const uint32_t x = model.input({2, 3});
  const uint32_t zero = model.constant({1}, {0.0f});
  const uint32_t rows = model.value({2}, kS64);
  const uint32_t picked = model.value({2, 3});
  const uint32_t positive = model.value({2, 3}, kBool);
  const uint32_t kept = model.value({2, 3});
  const uint32_t dst = model.value({2, 3});
  model.payload.step(Kind::ArgReduction, {x}, {rows}, {alg(ArgReductionAlg::Max), ints("axis", {1})});
  model.payload.step(Kind::Gather, {x, rows}, {picked}, {ints("axis", {0})});
  model.payload.step(Kind::HostElementwise, {picked, zero}, {positive}, {alg(HostElementwiseAlg::Gt)});
  model.payload.step(Kind::HostElementwise, {positive, picked, zero}, {kept}, {alg(HostElementwiseAlg::Where)});
  model.payload.step(
      Kind::Eltwise, {kept}, {dst}, {alg(EltwiseAlg::Linear), floats("alpha", {2}), floats("beta", {1})});
  model.output(dst, {2, 3});
  model.output(rows, {2});
  const auto outputs = run_model_bytes(model, {to_bytes(std::vector<float>{-1, 5, 2, 3, -4, 0})});
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(from_bytes<float>(outputs[0]), (std::vector<float>{7, 1, 1, 1, 11, 5})); // rows 1, 0
  EXPECT_EQ(from_bytes<int64_t>(outputs[1]), (std::vector<int64_t>{1, 0}));
}

// [2, 2] against a broadcast [2]; any nonzero byte is true, results are 0 or 1.
TEST(IndexSteps, LogicalOperationsUnderBroadcast) {
  const Operand a = boolean({2, 2}, {0, 1, 2, 0});
  const Operand b = boolean({2}, {1, 0});
  const std::pair<HostElementwiseAlg, std::vector<uint8_t>> cases[] = {
      {HostElementwiseAlg::LogicalAnd, {0, 0, 1, 0}},
      {HostElementwiseAlg::LogicalOr, {1, 1, 1, 0}},
      {HostElementwiseAlg::LogicalXor, {1, 1, 0, 0}},
  };
  for (const auto& [which, expected] : cases) {
    EXPECT_EQ(elementwise(which, {a, b}, {{2, 2}, kBool}), expected) << static_cast<int>(which);
  }
}

// x [3, 2, 2]; points (0, 1), (-1, 0), (0, 1) again: accumulating adds twice, setting keeps one value.
TEST(IndexSteps, IndexPutSetsOrAccumulatesBroadcastValuesAtIndexedPoints) {
  const Operand x = f32({3, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  const Operand rows = s64({3}, {0, -1, 0});
  const Operand columns = s64({3}, {1, 0, 1});
  const Operand values = f32({2}, {100, 200}); // broadcast to [3 points, 2]
  const auto set = run_step(Kind::IndexPut, {x, values, rows, columns}, {{3, 2, 2}, kF32}, {ints("accumulate", {0})});
  EXPECT_EQ(from_bytes<float>(set), (std::vector<float>{0, 1, 100, 200, 4, 5, 6, 7, 100, 200, 10, 11}));
  const auto added = run_step(Kind::IndexPut, {x, values, rows, columns}, {{3, 2, 2}, kF32}, {ints("accumulate", {1})});
  EXPECT_EQ(from_bytes<float>(added), (std::vector<float>{0, 1, 202, 403, 4, 5, 6, 7, 108, 209, 10, 11}));
}

// A KV cache's write x[:, positions] = values: x [2 heads, 3 positions, 2], positions (2, -3), values
// [2 heads, 2 positions, 2]; the sliced head dim walks x in blocks of 3 * 2.
TEST(IndexSteps, IndexPutAfterWholeLeadingDimsWritesEveryBlock) {
  const Operand x = f32({2, 3, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  const Operand positions = s64({2}, {2, -3});
  const Operand values = f32({2, 2, 2}, {100, 101, 102, 103, 200, 201, 202, 203});
  const auto bytes = run_step(
      Kind::IndexPut, {x, values, positions}, {{2, 3, 2}, kF32}, {ints("accumulate", {0}), ints("sliced", {1})});
  EXPECT_EQ(from_bytes<float>(bytes), (std::vector<float>{102, 103, 2, 3, 100, 101, 202, 203, 8, 9, 200, 201}));
}

TEST(IndexSteps, IndexPutOfAnIndexOutOfRangeFailsExecute) {
  for (int64_t bad : {int64_t{3}, int64_t{-4}}) {
    SCOPED_TRACE("index " + std::to_string(bad));
    run_step(
        Kind::IndexPut,
        {f32({3, 2}, {0, 1, 2, 3, 4, 5}), f32({1}, {9}), s64({2}, {0, bad})},
        {{3, 2}, kF32},
        {ints("accumulate", {0})},
        Error::InvalidArgument);
  }
}

TEST(IndexSteps, InvalidIndexStepsAreRejectedAtInit) {
  struct Case {
    const char* what;
    Kind kind;
    std::vector<Operand> inputs;
    Operand dst;
    std::vector<Attr> attrs;
  };
  const Attr axis0 = ints("axis", {0});
  const Case cases[] = {
      {"S64 input of an ELTWISE step",
       Kind::Eltwise,
       {{{4}, kS64}},
       {{4}, kF32},
       {alg(EltwiseAlg::Relu), floats("alpha", {0}), floats("beta", {0})}},
      {"GATHER into S64", Kind::Gather, {{{3, 2}, kF32}, {{2}, kS64}}, {{2, 2}, kS64}, {axis0}},
      {"GATHER with F32 indices", Kind::Gather, {{{3, 2}, kF32}, {{2}, kF32}}, {{2, 2}, kF32}, {axis0}},
      {"WHERE with an F32 condition",
       Kind::HostElementwise,
       {{{2}, kF32}, {{2}, kF32}, {{2}, kF32}},
       {{2}, kF32},
       {alg(HostElementwiseAlg::Where)}},
      {"comparison into F32",
       Kind::HostElementwise,
       {{{2}, kF32}, {{2}, kF32}},
       {{2}, kF32},
       {alg(HostElementwiseAlg::Lt)}},
      {"HOST_ELEMENTWISE alg one past the last",
       Kind::HostElementwise,
       {{{2}, kF32}, {{2}, kF32}},
       {{2}, kBool},
       {ints("alg", {executorch::backends::onednn::kNumHostElementwiseAlgs})}},
      {"MAXIMUM of S64 operands",
       Kind::HostElementwise,
       {{{2}, kS64}, {{2}, kS64}},
       {{2}, kS64},
       {alg(HostElementwiseAlg::Maximum)}},
      {"MINIMUM into BOOL",
       Kind::HostElementwise,
       {{{2}, kF32}, {{2}, kF32}},
       {{2}, kBool},
       {alg(HostElementwiseAlg::Minimum)}},
      {"INDEX_PUT with index tensors of different dims",
       Kind::IndexPut,
       {{{3, 2}, kF32}, {{1}, kF32}, {{2}, kS64}, {{3}, kS64}},
       {{3, 2}, kF32},
       {ints("accumulate", {0})}},
      {"INDEX_PUT with values that do not broadcast",
       Kind::IndexPut,
       {{{3, 2}, kF32}, {{3}, kF32}, {{2}, kS64}},
       {{3, 2}, kF32},
       {ints("accumulate", {0})}},
      {"INDEX_PUT with more sliced and indexed dims than x has",
       Kind::IndexPut,
       {{{3, 2}, kF32}, {{1}, kF32}, {{2}, kS64}},
       {{3, 2}, kF32},
       {ints("accumulate", {0}), ints("sliced", {2})}},
      {"logical and of F32 operands",
       Kind::HostElementwise,
       {{{2}, kF32}, {{2}, kF32}},
       {{2}, kBool},
       {alg(HostElementwiseAlg::LogicalAnd)}},
      {"ARG_REDUCTION over two axes",
       Kind::ArgReduction,
       {{{2, 3}, kF32}},
       {{1}, kS64},
       {alg(ArgReductionAlg::Max), ints("axis", {0, 1})}},
  };
  for (const Case& c : cases) {
    Model model = one_step(c.kind, c.inputs, c.dst, c.attrs);
    EXPECT_EQ(init_error(model.payload.build(), &model.data), Error::InvalidProgram) << c.what;
  }
}

TEST(IndexSteps, Int32IndicesFailExecute) {
  Model model = one_step(Kind::Gather, {{{3, 2}, kF32}, {{2}, kS64}}, {{2, 2}, kF32}, {ints("axis", {0})});
  Harness harness;
  Result<DelegateHandle*> handle = harness.init(model.payload.build(), &model.data);
  ASSERT_TRUE(handle.ok());
  HostTensor data({3, 2});
  HostTensor indices({2}, ScalarType::Int, to_bytes(std::vector<int32_t>{2, 0}));
  HostTensor dst({2, 2});
  EXPECT_EQ(harness.execute(handle.get(), {&data, &indices, &dst}), Error::InvalidArgument);
  harness.destroy(handle.get());
}

} // namespace
} // namespace onednn_test
