// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// COMPRESSED_MATMUL through init() and execute(): int4 and int8 weights kept compressed, with and
// without rows quantized per row (FORMAT.md), against a double-precision reference; and the payloads
// init() must refuse.
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/backend/options.h>

#include "../../runtime/Bf16.h"
#include "../../runtime/Int4VectorMatrix.h"
#include "BackendHarness.h"

namespace onednn_test {
namespace {

using executorch::backends::onednn::DType;
using Op = executorch::backends::onednn::ShapeOp;

constexpr int64_t kN = 24, kK = 128, kGroup = 32;

struct Weights {
  int64_t group = kGroup;
  std::vector<int8_t> values;      // [kN, kK] in [-8, 7]
  std::vector<float> scales;       // [kN, kK / group]
  std::vector<int8_t> zero_points; // [kN, kK / group], or empty
};

Weights make_weights(int64_t group = kGroup, uint64_t seed = 7) {
  Weights w;
  w.group = group;
  const std::vector<float> noise = random_values(kN * kK, seed);
  for (float v : noise) {
    w.values.push_back(static_cast<int8_t>(std::lround(v * 7.5f - 0.5f)));
  }
  for (float v : random_values(kN * kK / group, seed + 1)) {
    w.scales.push_back(0.02f + 0.01f * v);
  }
  return w;
}

std::vector<uint8_t> packed_int4(const std::vector<int8_t>& values) {
  std::vector<uint8_t> bytes(values.size() / 2);
  for (size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<uint8_t>((values[2 * i] & 0x0F) | ((values[2 * i + 1] & 0x0F) << 4));
  }
  return bytes;
}

uint32_t raw_constant(Model& model, std::vector<int64_t> dims, std::vector<uint8_t> bytes, DType dtype) {
  const std::string key = "raw_" + std::to_string(model.constants++);
  model.data.add(key, std::move(bytes));
  return model.payload.value(std::move(dims), key, static_cast<uint8_t>(dtype));
}

// rows [m, kK] -> COMPRESSED_MATMUL -> [m, kN]; with `dynamic_rows`, m is any count in [2, rows].
Model compressed_model(
    int64_t rows, const Weights& w, DType weight_type, bool quantize_rows, bool bias, bool dynamic_rows = false) {
  // inputs: src, weights, scales, [bias], [zero points]
  Model model;
  const uint32_t src = model.input({rows, kK});
  const uint32_t weights = weight_type == DType::S4 ? raw_constant(model, {kN, kK}, packed_int4(w.values), DType::S4)
                                                    : raw_constant(model, {kN, kK}, to_bytes(w.values), DType::S8);
  const uint32_t scales = model.constant({kN, kK / w.group}, w.scales);
  std::vector<uint32_t> inputs{src, weights, scales};
  if (bias || !w.zero_points.empty()) {
    inputs.push_back(bias ? model.constant({kN}, random_values(kN, 9)) : kNoValue);
  }
  if (!w.zero_points.empty()) {
    inputs.push_back(raw_constant(model, {kN, kK / w.group}, to_bytes(w.zero_points), DType::S8));
  }
  const uint32_t dst = model.value({rows, kN});
  model.payload.step(
      Kind::CompressedMatmul, inputs, {dst}, {ints("group_size", {w.group}), ints("quantize_rows", {quantize_rows})});
  model.output(dst, {rows, kN});
  if (dynamic_rows) {
    model.payload.dynamic = true;
    const uint32_t count = model.payload.symbol(2, rows);
    for (const uint32_t id : {src, dst}) {
      model.payload.symbolic_dim(id, 0, {static_cast<int64_t>(Op::Symbol), count});
    }
  }
  return model;
}

// The rows quantized as torchao's 8da4w does, then dequantized: what the program multiplies.
std::vector<float> dequantized_rows(const std::vector<float>& x, int64_t rows) {
  std::vector<float> src(x.size());
  std::vector<int8_t> q(kK);
  for (int64_t r = 0; r < rows; ++r) {
    float scale = 0;
    int32_t zero_point = 0;
    executorch::backends::onednn::quantize_row_affine_int8(&x[r * kK], kK, q.data(), &scale, &zero_point);
    for (int64_t k = 0; k < kK; ++k) {
      src[r * kK + k] = static_cast<float>(q[k] - zero_point) * scale;
    }
  }
  return src;
}

// Per result, the sum of its products' magnitudes (with `magnitudes`) or of the products, in double.
std::vector<float> summed_products(const std::vector<float>& src, int64_t rows, const Weights& w, bool magnitudes) {
  std::vector<float> out(rows * kN);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t n = 0; n < kN; ++n) {
      double sum = 0;
      for (int64_t k = 0; k < kK; ++k) {
        const size_t g = n * (kK / w.group) + k / w.group;
        const int zero = w.zero_points.empty() ? 0 : w.zero_points[g];
        const double product = double{src[r * kK + k]} * float(w.values[n * kK + k] - zero) * w.scales[g];
        sum += magnitudes ? std::abs(product) : product;
      }
      out[r * kN + n] = static_cast<float>(sum);
    }
  }
  return out;
}

std::vector<float> reference(
    const std::vector<float>& x,
    int64_t rows,
    const Weights& w,
    bool quantize_rows,
    bool bias,
    uint64_t bias_seed = 9) {
  std::vector<float> out = summed_products(quantize_rows ? dequantized_rows(x, rows) : x, rows, w, false);
  if (bias) {
    const std::vector<float> biases = random_values(kN, bias_seed);
    for (int64_t i = 0; i < rows * kN; ++i) {
      out[i] += biases[i % kN];
    }
  }
  return out;
}

// Within 1e-5 of the largest result, plus `relative` of each result's product magnitudes when given.
void expect_close(
    const std::vector<float>& actual,
    const std::vector<float>& expected,
    const std::vector<float>& magnitudes = {},
    float relative = 0) {
  ASSERT_EQ(actual.size(), expected.size());
  float largest = 0;
  for (float v : expected) {
    largest = std::max(largest, std::abs(v));
  }
  for (size_t i = 0; i < actual.size(); ++i) {
    const float slack = magnitudes.empty() ? 0 : relative * magnitudes[i];
    EXPECT_NEAR(actual[i], expected[i], 1e-5f * largest + slack) << "at " << i;
  }
}

// A backend option that takes an int ("int4_products": 0 fast, 1 exact; "huge_pages": 0 never, 1
// large, 2 always), set for one test and `restored` after it.
template <size_t N>
class ScopedChoice {
 public:
  ScopedChoice(const char (&key)[N], int value, int restored) : key_(key), restored_(restored) {
    EXPECT_EQ(set(value), executorch::runtime::Error::Ok);
  }
  ~ScopedChoice() {
    set(restored_);
  }

 private:
  executorch::runtime::Error set(int value) const {
    executorch::runtime::BackendOptions<1> options;
    options.set_option(key_, value);
    return executorch::runtime::set_option("OneDnnBackend", options.view());
  }
  const char (&key_)[N];
  int restored_;
};

// Whether the effective instruction set widens int4 weights for several quantized rows on the "fast"
// setting: one with VNNI (AVX-VNNI, AVX512-VNNI) or AMX.
bool widens_int4_weights() {
  executorch::runtime::BackendOptions<1> query;
  query.set_option("max_isa", "");
  const char* name = nullptr;
  if (executorch::runtime::get_option("OneDnnBackend", query.view()) != executorch::runtime::Error::Ok ||
      query.get_option("max_isa", name) != executorch::runtime::Error::Ok || name == nullptr) {
    return false;
  }
  for (const char* isa :
       {"avx2_vnni", "avx2_vnni_2", "avx512_core_vnni", "avx512_core_bf16", "avx512_core_fp16", "avx512_core_amx"}) {
    if (std::strcmp(name, isa) == 0) {
      return true;
    }
  }
  return false;
}

TEST(CompressedMatmul, MatchesTheReferenceForEachPath) {
  const ScopedChoice exact("int4_products", 1, 0); // the rounding products of several quantized rows on AMX: below
  Weights zero_pointed = make_weights();
  for (float v : random_values(kN * kK / kGroup, 10)) {
    zero_pointed.zero_points.push_back(static_cast<int8_t>(std::lround(v * 7.5f - 0.5f)));
  }
  for (const Weights& w : {make_weights(), zero_pointed}) {
    // One row (the host kernel), several (oneDNN), int8 and int4 weights, rows quantized or not.
    for (const int64_t rows : {1, 5}) {
      for (const DType type : {DType::S4, DType::S8}) {
        for (const bool quantize_rows : {false, true}) {
          for (const bool bias : {false, true}) {
            Model model = compressed_model(rows, w, type, quantize_rows, bias);
            std::vector<float> x = random_values(rows * kK, 11);
            for (float& v : x) {
              v *= 3.0f;
            }
            const auto outputs = run_model(model, {x});
            SCOPED_TRACE(
                ::testing::Message() << "rows " << rows << " s4 " << (type == DType::S4) << " quantize_rows "
                                     << quantize_rows << " bias " << bias);
            expect_close(outputs[0], reference(x, rows, w, quantize_rows, bias));
          }
        }
      }
    }
  }
}

TEST(CompressedMatmul, WeightsMovedIntoHugePagesGiveTheSameBits) {
  // "huge_pages" = 2 copies every constant a step reads in place (HostMemory.h) into 2 MiB pages at init:
  // each path reads the copy, whose values are the program's.
  const ScopedChoice exact("int4_products", 1, 0); // several quantized rows within 1e-5 of the reference
  const Weights w = make_weights();
  for (const int64_t rows : {1, 5}) {
    for (const DType type : {DType::S4, DType::S8}) {
      for (const bool quantize_rows : {false, true}) {
        Model model = compressed_model(rows, w, type, quantize_rows, true);
        const std::vector<float> x = random_values(rows * kK, 13);
        std::vector<float> in_place, moved;
        {
          const ScopedChoice never("huge_pages", 0, 1);
          in_place = run_model(model, {x})[0];
        }
        {
          const ScopedChoice always("huge_pages", 2, 1);
          moved = run_model(model, {x})[0];
        }
        SCOPED_TRACE(
            ::testing::Message() << "rows " << rows << " s4 " << (type == DType::S4) << " quantize_rows "
                                 << quantize_rows);
        ASSERT_EQ(moved.size(), in_place.size());
        EXPECT_EQ(std::memcmp(moved.data(), in_place.data(), moved.size() * sizeof(float)), 0);
        expect_close(moved, reference(x, rows, w, quantize_rows, true));
      }
    }
  }
}

TEST(CompressedMatmul, Int8WeightsInOneGroupARowMatchTheReference) {
  // export_llm's qmode=int8: one scale per output channel, f32 rows, oneDNN's weight decompression.
  const Weights w = make_weights(kK);
  for (const int64_t rows : {1, 5}) {
    for (const bool bias : {false, true}) {
      Model model = compressed_model(rows, w, DType::S8, false, bias);
      const std::vector<float> x = random_values(rows * kK, 12);
      SCOPED_TRACE(::testing::Message() << "rows " << rows << " bias " << bias);
      expect_close(run_model(model, {x})[0], reference(x, rows, w, false, bias));
    }
  }
}

// Per result, what widening the weights to s8 (Int4Widening.h) may add: each weight off by at most
// 0.502 of its column's grid s_col = max |scale| * 8 / 127, times the magnitudes of the row's values.
std::vector<float> widening_slack(const std::vector<float>& src, int64_t rows, const Weights& w) {
  std::vector<float> slack(rows * kN);
  for (int64_t n = 0; n < kN; ++n) {
    float largest = 0;
    for (int64_t g = 0; g < kK / w.group; ++g) {
      largest = std::max(largest, std::abs(w.scales[n * (kK / w.group) + g]));
    }
    for (int64_t r = 0; r < rows; ++r) {
      double magnitude = 0;
      for (int64_t k = 0; k < kK; ++k) {
        magnitude += std::abs(src[r * kK + k]);
      }
      slack[r * kN + n] = static_cast<float>(magnitude * 0.502 * largest * 8 / 127);
    }
  }
  return slack;
}

TEST(CompressedMatmul, SeveralQuantizedRowsTimesInt4WeightsUnderEachProductsSetting) {
  // "fast" widens the weights to s8 per column for oneDNN's u8 x s8 matmul (K = 128, groups of 32) with
  // VNNI or AMX; "exact" is oneDNN's s8 x s4 kernel on AMX. Elsewhere both multiply the
  // rows quantized and dequantized by the dequantized weights in f32. 24 columns: a block of 16 and a
  // narrower last one on two threads.
  const Weights w = make_weights();
  for (const int products : {1, 0}) {
    const ScopedChoice setting("int4_products", products, 0);
    for (const int64_t rows : {2, 5, 40}) {
      for (const bool bias : {false, true}) {
        Model model = compressed_model(rows, w, DType::S4, /*quantize_rows=*/true, bias);
        std::vector<float> x = random_values(rows * kK, 12);
        for (float& v : x) {
          v = 3.0f * v + 0.5f;
        }
        const auto outputs = run_model(model, {x});
        SCOPED_TRACE(
            ::testing::Message() << "products " << (products == 0 ? "fast" : "exact") << " rows " << rows << " bias "
                                 << bias);
        const std::vector<float> expected = reference(x, rows, w, true, bias);
        if (products == 0 && widens_int4_weights()) {
          expect_close(outputs[0], expected, widening_slack(dequantized_rows(x, rows), rows, w), 1.0f);
          float largest_error = 0;
          for (size_t i = 0; i < expected.size(); ++i) {
            largest_error = std::max(largest_error, std::abs(outputs[0][i] - expected[i]));
          }
          EXPECT_GT(largest_error, 1e-4f) << "the exact kernel ran, not the widened one";
        } else {
          expect_close(outputs[0], expected);
        }
      }
    }
  }
}

TEST(CompressedMatmul, ADynamicCountOfQuantizedRowsMatchesAtEachCount) {
  // A prompt of any length: each new count builds a graph inside execute(), which takes the column
  // terms and grids the first graph computed (GraphBuilder::derived_floats).
  constexpr int64_t kMaxRows = 40;
  const Weights w = make_weights();
  for (const int products : {0, 1}) {
    const ScopedChoice setting("int4_products", products, 0);
    LoadedModel loaded;
    loaded.model = compressed_model(kMaxRows, w, DType::S4, /*quantize_rows=*/true, /*bias=*/true, true);
    ASSERT_EQ(loaded.init(), executorch::runtime::Error::Ok);
    for (const int32_t rows : {40, 5, 2, 17, 5, 40}) {
      std::vector<float> x = random_values(static_cast<size_t>(rows) * kK, 20 + rows);
      HostTensor input({rows, static_cast<int32_t>(kK)}, x);
      HostTensor output(
          {static_cast<int32_t>(kMaxRows), static_cast<int32_t>(kN)},
          {},
          executorch::aten::ScalarType::Float,
          executorch::runtime::TensorShapeDynamism::DYNAMIC_BOUND);
      ASSERT_EQ(loaded.harness.execute(loaded.handle, {&input, &output}), executorch::runtime::Error::Ok);
      SCOPED_TRACE(::testing::Message() << "products " << products << " rows " << rows);
      EXPECT_EQ(output.sizes(), (std::vector<int32_t>{rows, static_cast<int32_t>(kN)}));
      const std::vector<float> actual(output.data().begin(), output.data().begin() + rows * kN);
      const bool widened = products == 0 && widens_int4_weights();
      expect_close(
          actual,
          reference(x, rows, w, true, true),
          widened ? widening_slack(dequantized_rows(x, rows), rows, w) : std::vector<float>(),
          widened ? 1.0f : 0.0f);
    }
  }
}

TEST(CompressedMatmul, LayersOfOneShapeKeepTheirOwnWeightsAtEachCount) {
  // Two layers of one shape read one input: on the "fast" setting they share the widened matmul's
  // primitives and memory objects (GraphBuilder::shared_by_steps), and the graph of each new count
  // reads the column grids and terms the first graph derived, in place. Each layer must still see its
  // own weights, scales and bias.
  constexpr int64_t kMaxRows = 40;
  const Weights first = make_weights(kGroup, 7), second = make_weights(kGroup, 11);
  for (const int products : {0, 1}) {
    const ScopedChoice setting("int4_products", products, 0);
    LoadedModel loaded;
    Model& model = loaded.model;
    const uint32_t src = model.input({kMaxRows, kK});
    model.payload.dynamic = true;
    const uint32_t count = model.payload.symbol(2, kMaxRows);
    model.payload.symbolic_dim(src, 0, {static_cast<int64_t>(Op::Symbol), count});
    uint64_t bias_seed = 9;
    for (const Weights* w : {&first, &second}) {
      const uint32_t weights = raw_constant(model, {kN, kK}, packed_int4(w->values), DType::S4);
      const uint32_t scales = model.constant({kN, kK / kGroup}, w->scales);
      const uint32_t bias = model.constant({kN}, random_values(kN, bias_seed++));
      const uint32_t dst = model.value({kMaxRows, kN});
      model.payload.step(
          Kind::CompressedMatmul,
          {src, weights, scales, bias},
          {dst},
          {ints("group_size", {kGroup}), ints("quantize_rows", {1})});
      model.output(dst, {kMaxRows, kN});
      model.payload.symbolic_dim(dst, 0, {static_cast<int64_t>(Op::Symbol), count});
    }
    ASSERT_EQ(loaded.init(), executorch::runtime::Error::Ok);
    for (const int32_t rows : {40, 3, 17, 3}) {
      std::vector<float> x = random_values(static_cast<size_t>(rows) * kK, 30 + rows);
      HostTensor input({rows, static_cast<int32_t>(kK)}, x);
      const std::vector<int32_t> bound{static_cast<int32_t>(kMaxRows), static_cast<int32_t>(kN)};
      HostTensor first_out(
          bound, {}, executorch::aten::ScalarType::Float, executorch::runtime::TensorShapeDynamism::DYNAMIC_BOUND);
      HostTensor second_out(
          bound, {}, executorch::aten::ScalarType::Float, executorch::runtime::TensorShapeDynamism::DYNAMIC_BOUND);
      HostTensor* outputs[2] = {&first_out, &second_out};
      ASSERT_EQ(
          loaded.harness.execute(loaded.handle, {&input, &first_out, &second_out}), executorch::runtime::Error::Ok);
      const bool widened = products == 0 && widens_int4_weights();
      for (int i = 0; i < 2; ++i) {
        SCOPED_TRACE(::testing::Message() << "products " << products << " rows " << rows << " layer " << i);
        const Weights& w = i == 0 ? first : second;
        EXPECT_EQ(outputs[i]->sizes(), (std::vector<int32_t>{rows, static_cast<int32_t>(kN)}));
        const std::vector<float> actual(outputs[i]->data().begin(), outputs[i]->data().begin() + rows * kN);
        expect_close(
            actual,
            reference(x, rows, w, true, true, 9 + i),
            widened ? widening_slack(dequantized_rows(x, rows), rows, w) : std::vector<float>(),
            widened ? 1.0f : 0.0f);
      }
    }
  }
}

TEST(CompressedMatmul, FourBitValuesOutsideConstantsAreRefused) {
  Model model;
  const uint32_t src = model.input({1, kK});
  const uint32_t weights = model.value({kN, kK}, static_cast<uint8_t>(DType::S4)); // not a constant
  const uint32_t scales = model.constant({kN, kK / kGroup}, make_weights().scales);
  const uint32_t dst = model.value({1, kN});
  model.payload.step(Kind::CompressedMatmul, {src, weights, scales}, {dst}, {ints("group_size", {kGroup})});
  model.output(dst, {1, kN});
  EXPECT_NE(init_error(model.payload.build(), &model.data), Error::Ok);
}

// One row times int4 weights stored as `bytes`, read in groups of `group`.
Error init_with(const Weights& w, std::vector<uint8_t> bytes, int64_t group) {
  Model model;
  const uint32_t src = model.input({1, kK});
  const uint32_t weights = raw_constant(model, {kN, kK}, std::move(bytes), DType::S4);
  const uint32_t scales = model.constant({kN, kK / w.group}, w.scales);
  const uint32_t dst = model.value({1, kN});
  model.payload.step(Kind::CompressedMatmul, {src, weights, scales}, {dst}, {ints("group_size", {group})});
  model.output(dst, {1, kN});
  return init_error(model.payload.build(), &model.data);
}

// One row times `weight_type` weights whose scales the program stores as bf16.
Error init_with_bf16_scales(DType weight_type) {
  const Weights w = make_weights();
  Model model;
  const uint32_t src = model.input({1, kK});
  const uint32_t weights = weight_type == DType::S4 ? raw_constant(model, {kN, kK}, packed_int4(w.values), DType::S4)
                                                    : raw_constant(model, {kN, kK}, to_bytes(w.values), DType::S8);
  std::vector<uint8_t> bytes;
  for (const float scale : w.scales) {
    const uint16_t bits = executorch::backends::onednn::to_bf16_bits(scale);
    bytes.push_back(static_cast<uint8_t>(bits & 0xFF));
    bytes.push_back(static_cast<uint8_t>(bits >> 8));
  }
  const uint32_t scales = raw_constant(model, {kN, kK / kGroup}, std::move(bytes), DType::BF16);
  const uint32_t dst = model.value({1, kN});
  model.payload.step(Kind::CompressedMatmul, {src, weights, scales}, {dst}, {ints("group_size", {kGroup})});
  model.output(dst, {1, kN});
  return init_error(model.payload.build(), &model.data);
}

TEST(CompressedMatmul, Bf16ScalesAreTakenForInt4WeightsOnly) {
  EXPECT_EQ(init_with_bf16_scales(DType::S4), Error::Ok);
  EXPECT_EQ(init_with_bf16_scales(DType::S8), Error::InvalidProgram);
}

TEST(CompressedMatmul, MismatchedScalesGroupsAndBytesAreRefused) {
  const Weights w = make_weights();
  EXPECT_EQ(init_with(w, packed_int4(w.values), kGroup), Error::Ok);
  for (const int64_t group : {0, 48, 64}) { // 64: the scales hold K / 32 columns
    EXPECT_EQ(init_with(w, packed_int4(w.values), group), Error::InvalidProgram) << group;
  }
  // A byte per value where S4 holds two: the constant's size is checked.
  EXPECT_EQ(init_with(w, to_bytes(w.values), kGroup), Error::InvalidProgram);
}

} // namespace
} // namespace onednn_test
