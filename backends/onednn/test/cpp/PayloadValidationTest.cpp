// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// init() must reject every malformed or unsupported payload with an error (never crash) and must
// release everything it took, however often it runs.
#include <cmath>
#include <cstdio>
#include <cstring>

#include <gtest/gtest.h>

#include "BackendHarness.h"

namespace onednn_test {
namespace {

// input [1,2,5,5] -> conv(3x3, 2->3, bias) -> relu -> output [1,3,5,5].
Model valid_model() {
  Model model;
  const uint32_t src = model.input({1, 2, 5, 5});
  const uint32_t weights = model.constant({3, 2, 3, 3}, random_values(54, 1));
  const uint32_t bias = model.constant({3}, random_values(3, 2));
  const uint32_t conv = model.value({1, 3, 5, 5});
  const uint32_t dst = model.value({1, 3, 5, 5});
  model.payload.step(
      Kind::Convolution,
      {src, weights, bias},
      {conv},
      {ints("strides", {1, 1}),
       ints("padding_l", {1, 1}),
       ints("padding_r", {1, 1}),
       ints("dilation", {1, 1}),
       ints("groups", {1})});
  model.payload.step(Kind::Eltwise, {conv}, {dst}, {alg(EltwiseAlg::Relu), floats("alpha", {0}), floats("beta", {0})});
  model.output(dst, {1, 3, 5, 5});
  return model;
}

void set_u32(std::vector<uint8_t>& bytes, size_t offset, uint32_t value) {
  for (int i = 0; i < 4; ++i) {
    bytes[offset + i] = static_cast<uint8_t>(value >> (8 * i));
  }
}

void set_u64(std::vector<uint8_t>& bytes, size_t offset, uint64_t value) {
  for (int i = 0; i < 8; ++i) {
    bytes[offset + i] = static_cast<uint8_t>(value >> (8 * i));
  }
}

TEST(PayloadValidation, ValidPayloadInitializes) {
  Model model = valid_model();
  EXPECT_EQ(init_error(model.payload.build(), &model.data), Error::Ok);
}

TEST(PayloadValidation, BadMagicIsRejected) {
  Model model = valid_model();
  auto bytes = model.payload.build();
  bytes[0] = 'X';
  EXPECT_EQ(init_error(bytes, &model.data), Error::InvalidProgram);
}

TEST(PayloadValidation, UnknownVersionIsRejected) {
  for (const uint32_t version : {1u, 2u, 4u}) { // 1 and 2: the versions before the checksum
    Model model = valid_model();
    model.payload.version = version;
    EXPECT_EQ(init_error(model.payload.build(), &model.data), Error::InvalidProgram) << version;
  }
}

TEST(PayloadValidation, EveryChangedByteAfterTheSizeIsCaughtByTheChecksum) {
  Model model = valid_model();
  const auto bytes = model.payload.build();
  for (size_t offset = 16; offset < bytes.size(); ++offset) {
    auto changed = bytes;
    changed[offset] ^= 0x01;
    EXPECT_EQ(init_error(changed, &model.data), Error::InvalidProgram) << "byte " << offset;
  }
}

TEST(PayloadValidation, UnknownHeaderFlagsAreRejected) {
  Model model = valid_model();
  auto bytes = model.payload.build();
  set_u32(bytes, 20, 0x80);
  seal(bytes);
  EXPECT_EQ(init_error(bytes, &model.data), Error::InvalidProgram);
}

TEST(PayloadValidation, TotalSizeMismatchIsRejected) {
  Model model = valid_model();
  auto bytes = model.payload.build();
  bytes.push_back(0); // one byte more than total_size says
  EXPECT_EQ(init_error(bytes, &model.data), Error::InvalidProgram);
  bytes.pop_back();
  set_u64(bytes, 8, bytes.size() + 100);
  EXPECT_EQ(init_error(bytes, &model.data), Error::InvalidProgram);
}

TEST(PayloadValidation, TruncationAtEveryOffsetIsRejected) {
  Model model = valid_model();
  const auto bytes = model.payload.build();
  for (size_t length = 0; length < bytes.size(); ++length) {
    std::vector<uint8_t> truncated(bytes.begin(), bytes.begin() + length);
    EXPECT_NE(init_error(truncated, &model.data), Error::Ok) << "truncated to " << length;
    // Same cut with total_size and the checksum patched to match, so the field readers' bounds checks
    // are hit.
    if (length >= 20) {
      set_u64(truncated, 8, length);
      seal(truncated);
      EXPECT_NE(init_error(truncated, &model.data), Error::Ok)
          << "truncated to " << length << " with matching total_size";
    }
  }
}

TEST(PayloadValidation, OutOfRangeValueIdIsRejected) {
  Model model = valid_model();
  auto bytes = model.payload.build();
  set_u32(bytes, 40, 1000); // the first graph input id
  seal(bytes);
  EXPECT_EQ(init_error(bytes, &model.data), Error::InvalidProgram);

  Model step_model = valid_model();
  const uint32_t out = step_model.value({1, 3, 5, 5});
  step_model.payload.step(
      Kind::Eltwise, {77}, {out}, {alg(EltwiseAlg::Relu), floats("alpha", {0}), floats("beta", {0})});
  EXPECT_EQ(init_error(step_model.payload.build(), &step_model.data), Error::InvalidProgram);
}

TEST(PayloadValidation, WrongAttributeCountIsRejected) {
  Model model;
  const uint32_t src = model.input({1, 2, 5, 5});
  const uint32_t weights = model.constant({3, 2, 3, 3}, random_values(54, 1));
  const uint32_t dst = model.value({1, 3, 5, 5});
  model.payload.step(
      Kind::Convolution,
      {src, weights, kNoValue},
      {dst},
      {ints("strides", {1, 1, 1}),
       ints("padding_l", {1, 1}),
       ints("padding_r", {1, 1}),
       ints("dilation", {1, 1}),
       ints("groups", {1})});
  model.output(dst, {1, 3, 5, 5});
  EXPECT_EQ(init_error(model.payload.build(), &model.data), Error::InvalidProgram);
}

TEST(PayloadValidation, MissingAttributeIsRejected) {
  Model model;
  const uint32_t src = model.input({4});
  const uint32_t dst = model.value({4});
  model.payload.step(Kind::Eltwise, {src}, {dst}, {alg(EltwiseAlg::Relu), floats("alpha", {0})});
  model.output(dst, {4});
  EXPECT_EQ(init_error(model.payload.build(), &model.data), Error::InvalidProgram);
}

TEST(PayloadValidation, NoValueInRequiredSlotIsRejected) {
  Model model;
  const uint32_t src = model.input({2, 4});
  const uint32_t dst = model.value({2, 3});
  model.payload.step(Kind::Matmul, {src, kNoValue, kNoValue}, {dst});
  model.output(dst, {2, 3});
  EXPECT_EQ(init_error(model.payload.build(), &model.data), Error::InvalidProgram);
}

// QUANTIZE_ROWS writes two values (quantized rows and their scales); one output, or scales of the wrong
// type, is a malformed program.
TEST(PayloadValidation, QuantizeRowsWithWrongOutputsIsRejected) {
  for (const bool both_outputs : {false, true}) {
    Model model;
    const uint32_t src = model.input({2, 4});
    const uint32_t quantized = model.payload.value({2, 4}, "", /*S8*/ 4);
    const uint32_t scales = model.payload.value({2, 1}, "", /*S8, should be F32*/ 4);
    const uint32_t dst = model.value({2, 4});
    std::vector<uint32_t> outputs = {quantized};
    if (both_outputs) {
      outputs.push_back(scales);
    }
    model.payload.step(Kind::QuantizeRows, {src}, outputs);
    model.payload.step(Kind::Reorder, {quantized}, {dst}, {floats("src_scale", {0.5})});
    model.output(dst, {2, 4});
    EXPECT_EQ(init_error(model.payload.build(), &model.data), Error::InvalidProgram)
        << (both_outputs ? "S8 scales" : "one output");
  }
}

TEST(PayloadValidation, ValueReadBeforeItIsProducedIsRejected) {
  Model model;
  const uint32_t src = model.input({4});
  const uint32_t a = model.value({4});
  const uint32_t b = model.value({4});
  const std::vector<Attr> relu = {alg(EltwiseAlg::Relu), floats("alpha", {0}), floats("beta", {0})};
  model.payload.step(Kind::Eltwise, {a}, {b}, relu); // a is produced only by the next step
  model.payload.step(Kind::Eltwise, {src}, {a}, relu);
  model.output(b, {4});
  EXPECT_EQ(init_error(model.payload.build(), &model.data), Error::InvalidProgram);
}

// Algorithm tables are keyed by code (Algorithms.h): one past an enumeration's last code has no row and
// is refused, where the last code itself builds.
TEST(PayloadValidation, AlgorithmCodePastItsEnumerationIsRejected) {
  namespace schema = executorch::backends::onednn;
  struct Case {
    const char* name;
    Kind kind;
    int64_t last; // the largest code of the enumeration
    std::vector<int64_t> src_dims, dst_dims;
    std::vector<Attr> other_attrs;
  };
  const std::vector<Attr> pooling_window = {
      ints("kernel", {2, 2}),
      ints("strides", {2, 2}),
      ints("padding_l", {0, 0}),
      ints("padding_r", {0, 0}),
      ints("dilation", {1, 1})};
  const Case cases[] = {
      {"ELTWISE",
       Kind::Eltwise,
       schema::kNumEltwiseAlgs - 1,
       {2, 4},
       {2, 4},
       {floats("alpha", {0}), floats("beta", {0})}},
      {"BINARY", Kind::Binary, schema::kNumBinaryAlgs - 1, {2, 4}, {2, 4}, {}},
      {"POOLING", Kind::Pooling, schema::kNumPoolingAlgs - 1, {1, 2, 4, 4}, {1, 2, 2, 2}, pooling_window},
      {"REDUCTION", Kind::Reduction, schema::kNumReductionAlgs - 1, {2, 4}, {2, 1}, {}},
      {"RESAMPLING", Kind::Resampling, schema::kNumResamplingAlgs - 1, {1, 2, 4, 4}, {1, 2, 8, 8}, {}},
  };
  for (const Case& c : cases) {
    for (const int64_t code : {c.last, c.last + 1}) {
      Model model;
      std::vector<uint32_t> inputs = {model.input(c.src_dims)};
      if (c.kind == Kind::Binary) {
        inputs.push_back(model.input(c.src_dims));
      }
      const uint32_t dst = model.value(c.dst_dims);
      std::vector<Attr> attrs = c.other_attrs;
      attrs.push_back(ints("alg", {code}));
      model.payload.step(c.kind, inputs, {dst}, attrs);
      model.output(dst, c.dst_dims);
      EXPECT_EQ(init_error(model.payload.build(), &model.data), code == c.last ? Error::Ok : Error::InvalidProgram)
          << c.name << " alg " << code;
    }
  }
  // A post-op's eltwise alg is looked up in the same table; one computed on the host is refused there.
  for (const int64_t code : {code_of(EltwiseAlg::Square), code_of(EltwiseAlg::Floor), schema::kNumEltwiseAlgs}) {
    Model model;
    const uint32_t a = model.input({2, 4});
    const uint32_t b = model.input({2, 4});
    const uint32_t dst = model.value({2, 4});
    model.payload.step(
        Kind::Binary,
        {a, b},
        {dst},
        {alg(BinaryAlg::Add),
         ints("post_ops", {code_of(PostOpKind::Eltwise), code}),
         floats("post_op_params", {0, 0})});
    model.output(dst, {2, 4});
    EXPECT_EQ(
        init_error(model.payload.build(), &model.data),
        code == code_of(EltwiseAlg::Square) ? Error::Ok : Error::InvalidProgram)
        << "post-op eltwise alg " << code;
  }
}

TEST(PayloadValidation, ReshapeWithDifferentElementCountIsRejected) {
  Model model;
  const uint32_t src = model.input({2, 3});
  const uint32_t dst = model.value({7});
  model.payload.step(Kind::Reshape, {src}, {dst});
  model.output(dst, {7});
  EXPECT_EQ(init_error(model.payload.build(), &model.data), Error::InvalidProgram);
}

TEST(PayloadValidation, MissingNamedDataKeyIsRejected) {
  Model model = valid_model();
  InMemoryDataMap empty;
  EXPECT_NE(init_error(model.payload.build(), &empty), Error::Ok);
  EXPECT_NE(init_error(model.payload.build(), nullptr), Error::Ok);
}

TEST(PayloadValidation, WrongConstantByteSizeIsRejected) {
  Model model = valid_model();
  model.data.add("constant_0", std::vector<uint8_t>(54 * 4 - 4)); // one float short
  EXPECT_NE(init_error(model.payload.build(), &model.data), Error::Ok);
  EXPECT_EQ(model.data.buffers_out, model.data.buffers_freed);
}

// With weight checksums, init() reads every weight once and refuses one that no longer matches.
TEST(PayloadValidation, WeightChecksumsAcceptIntactWeightsAndRefuseDamagedOnes) {
  Model model = valid_model();
  model.payload.weight_checksums = true;
  const std::vector<float> weights = random_values(54, 1);
  const std::vector<float> bias = random_values(3, 2);
  const uint32_t weights_crc = crc32_bitwise(reinterpret_cast<const uint8_t*>(weights.data()), 54 * 4);
  const uint32_t bias_crc = crc32_bitwise(reinterpret_cast<const uint8_t*>(bias.data()), 3 * 4);
  model.payload.set_checksum(1, weights_crc);
  model.payload.set_checksum(2, bias_crc);
  EXPECT_EQ(init_error(model.payload.build(), &model.data), Error::Ok);

  model.payload.set_checksum(2, bias_crc ^ 0x10);
  EXPECT_EQ(init_error(model.payload.build(), &model.data), Error::InvalidProgram);
  model.payload.set_checksum(2, bias_crc);

  std::vector<float> damaged = weights;
  damaged[17] = std::nextafter(damaged[17], 2.0f); // the smallest change a float can take
  std::vector<uint8_t> bytes(damaged.size() * 4);
  std::memcpy(bytes.data(), damaged.data(), bytes.size());
  model.data.add("constant_0", std::move(bytes));
  EXPECT_EQ(init_error(model.payload.build(), &model.data), Error::InvalidProgram);
  EXPECT_EQ(model.data.buffers_out, model.data.buffers_freed);
}

TEST(PayloadValidation, UnsupportedDtypeIsRejected) {
  Model model;
  const uint32_t src = model.payload.value({4}, "", /*dtype F16*/ 2);
  model.payload.input(src);
  const uint32_t dst = model.payload.value({4}, "", 2);
  model.payload.step(Kind::Eltwise, {src}, {dst}, {alg(EltwiseAlg::Relu), floats("alpha", {0}), floats("beta", {0})});
  model.payload.output(dst);
  EXPECT_EQ(init_error(model.payload.build(), &model.data), Error::NotSupported);
}

// int8 values exist only inside a graph: its inputs and outputs are F32 or BF16 tensors.
TEST(PayloadValidation, Int8GraphInputIsRejected) {
  Model model;
  const uint32_t src = model.payload.value({4}, "", /*U8*/ 5);
  model.payload.input(src);
  const uint32_t dst = model.payload.value({4});
  model.payload.step(Kind::Reorder, {src}, {dst}, {floats("src_scale", {0.5}), ints("src_zero_point", {0})});
  model.payload.output(dst);
  EXPECT_NE(init_error(model.payload.build(), &model.data), Error::Ok);
}

// Layout codes (FORMAT.md): 0 native, 1 plain, on any value; nothing else.
TEST(PayloadValidation, UnknownLayoutIsRejected) {
  // valid_model(): value 0 is the graph input, 1 the weights, 3 the convolution's result.
  const auto with_layout = [](uint32_t id, uint8_t layout) {
    Model model = valid_model();
    model.payload.set_layout(id, layout);
    return init_error(model.payload.build(), &model.data);
  };
  EXPECT_EQ(with_layout(3, 1), Error::Ok);
  EXPECT_EQ(with_layout(0, 1), Error::Ok);
  EXPECT_EQ(with_layout(1, 1), Error::Ok);
  EXPECT_EQ(with_layout(3, 2), Error::InvalidProgram);
  EXPECT_EQ(with_layout(0, 0xFF), Error::InvalidProgram);
}

TEST(PayloadValidation, RmsNormWithBadEpsOrWeightIsRejected) {
  for (const auto& [eps, weight_dims] :
       {std::pair<double, std::vector<int64_t>>{-1.0, {8}}, {1e-5, {7}}, {1e-5, {2, 8}}}) {
    Model model;
    const uint32_t src = model.input({3, 8});
    const uint32_t weight = model.constant(weight_dims, std::vector<float>(element_count(weight_dims), 1.0f));
    const uint32_t dst = model.value({3, 8});
    model.payload.step(Kind::RmsNorm, {src, weight}, {dst}, {floats("eps", {eps})});
    model.output(dst, {3, 8});
    EXPECT_EQ(init_error(model.payload.build(), &model.data), Error::InvalidProgram)
        << "eps " << eps << ", weight of " << weight_dims.size() << " dims";
  }
}

struct RotaryDims {
  std::vector<int64_t> src, dst, cos, sin;
  const char* fault;
};

Error rotary_init_error(const RotaryDims& dims) {
  Model model;
  const uint32_t src = model.input(dims.src);
  const uint32_t cos = model.input(dims.cos);
  const uint32_t sin = model.input(dims.sin);
  const uint32_t dst = model.value(dims.dst);
  model.payload.step(Kind::Rotary, {src, cos, sin}, {dst});
  model.output(dst, dims.dst);
  return init_error(model.payload.build(), &model.data);
}

TEST(PayloadValidation, RotaryWithMismatchedDimsIsRejected) {
  const std::vector<int64_t> pairs = {1, 3, 4, 8, 2}, table = {1, 3, 1, 8};
  // The same step with valid dims initializes: each rejection below is its one fault's.
  ASSERT_EQ(rotary_init_error({pairs, pairs, table, table, "none"}), Error::Ok);
  for (const RotaryDims& dims : std::vector<RotaryDims>{
           {{1, 3, 4, 8, 3}, {1, 3, 4, 8, 3}, table, table, "src's last dim is not 2"},
           {{2}, {2}, {1}, {1}, "src has no pairs dim"},
           {pairs, {1, 3, 4, 16, 1}, table, table, "dst's dims differ from src's"},
           {pairs, pairs, {1, 3, 2, 8}, {1, 3, 2, 8}, "tables have 2 heads against 4"},
           {pairs, pairs, {3, 8}, {3, 8}, "tables [3, 8] align with the heads"},
           {pairs, pairs, table, {1, 3, 4, 8}, "cos and sin dims differ"},
           {pairs, pairs, {1, 3, 1, 4}, {1, 3, 1, 4}, "tables' last dim is not P"},
           {pairs, pairs, {1, 1, 3, 1, 8}, {1, 1, 3, 1, 8}, "tables rank above src's without the last"},
       }) {
    EXPECT_EQ(rotary_init_error(dims), Error::InvalidProgram) << dims.fault;
  }
}

TEST(PayloadValidation, InitDestroyThousandTimesReleasesEverything) {
  Model model = valid_model();
  const auto bytes = model.payload.build();
  Harness harness;
  auto cycle = [&]() {
    Result<DelegateHandle*> handle = harness.init(bytes, &model.data);
    ASSERT_TRUE(handle.ok());
    harness.destroy(handle.get());
  };
  for (int i = 0; i < 50; ++i) {
    cycle(); // warm up oneDNN's caches before measuring
  }
  const size_t before = resident_kilobytes();
  for (int i = 0; i < 1000; ++i) {
    cycle();
  }
  const size_t after = resident_kilobytes();
  EXPECT_EQ(model.data.buffers_out, model.data.buffers_freed);
  EXPECT_EQ(harness.payload_frees, 1050);
  EXPECT_LT(after, before + 4096) << "resident memory grew from " << before << " kB to " << after
                                  << " kB over 1000 init/destroy cycles";
}

} // namespace
} // namespace onednn_test
