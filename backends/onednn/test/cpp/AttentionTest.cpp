// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// The ATTENTION step against a reference written out here (scores, mask, causality, softmax,
// values), and the host softmax on rows that need care (NaN, widths that are no multiple of 16).
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "BackendHarness.h"
#include "ReferenceOps.h"

namespace onednn_test {
namespace {

using Kind = executorch::backends::onednn::StepKind;
constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();

struct AttentionCase {
  int64_t batch = 1, heads = 2, kv_heads = 2, queries = 5, keys = 7, width = 8, value_width = 4;
  bool causal = false;
  bool keys_transposed = false;
  bool zero_fully_masked_rows = true;
  std::vector<int64_t> mask_dims; // empty: no mask
  double scale = 0.35;
};

// out[b, h, i] = sum_j p[j] v[b, h / G, j], p = softmax_j(scale * q·k_j + mask) over the keys query
// i may see; a row without any: zeros (or NaN without zero_fully_masked_rows).
std::vector<float> attention_ref(
    const AttentionCase& c,
    const std::vector<float>& q,
    const std::vector<float>& k,
    const std::vector<float>& v,
    const std::vector<float>& mask) {
  const int64_t group = c.heads / c.kv_heads;
  std::vector<int64_t> md = c.mask_dims;
  while (md.size() < 4) {
    md.insert(md.begin(), 1);
  }
  std::vector<float> out(c.batch * c.heads * c.queries * c.value_width, 0.0f);
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t h = 0; h < c.heads; ++h) {
      const int64_t kv = h / group;
      for (int64_t i = 0; i < c.queries; ++i) {
        std::vector<float> scores(c.keys, kMinusInfinity);
        for (int64_t j = 0; j < c.keys && (!c.causal || j <= i); ++j) {
          double dot = 0.0;
          for (int64_t e = 0; e < c.width; ++e) {
            const int64_t key_at = c.keys_transposed ? ((b * c.kv_heads + kv) * c.width + e) * c.keys + j
                                                     : ((b * c.kv_heads + kv) * c.keys + j) * c.width + e;
            dot += q[((b * c.heads + h) * c.queries + i) * c.width + e] * k[key_at];
          }
          float added = 0.0f;
          if (!mask.empty()) {
            const int64_t mb = md[0] == 1 ? 0 : b, mh = md[1] == 1 ? 0 : h, mi = md[2] == 1 ? 0 : i;
            added = mask[((mb * md[1] + mh) * md[2] + mi) * md[3] + j];
          }
          scores[j] = static_cast<float>(dot * c.scale) + added;
        }
        float max = kMinusInfinity;
        for (float s : scores) {
          max = std::max(max, s);
        }
        float* row = &out[((b * c.heads + h) * c.queries + i) * c.value_width];
        if (max == kMinusInfinity) {
          for (int64_t e = 0; e < c.value_width; ++e) {
            row[e] = c.zero_fully_masked_rows ? 0.0f : std::numeric_limits<float>::quiet_NaN();
          }
          continue;
        }
        double sum = 0.0;
        for (float s : scores) {
          sum += std::exp(static_cast<double>(s) - max);
        }
        for (int64_t j = 0; j < c.keys; ++j) {
          const double p = std::exp(static_cast<double>(scores[j]) - max) / sum;
          for (int64_t e = 0; e < c.value_width; ++e) {
            row[e] += static_cast<float>(p * v[((b * c.kv_heads + kv) * c.keys + j) * c.value_width + e]);
          }
        }
      }
    }
  }
  return out;
}

Model attention_model(const AttentionCase& c) {
  Model model;
  const uint32_t q = model.input({c.batch, c.heads, c.queries, c.width});
  const uint32_t k = model.input(
      c.keys_transposed ? std::vector<int64_t>{c.batch, c.kv_heads, c.width, c.keys}
                        : std::vector<int64_t>{c.batch, c.kv_heads, c.keys, c.width});
  const uint32_t v = model.input({c.batch, c.kv_heads, c.keys, c.value_width});
  std::vector<uint32_t> inputs = {q, k, v};
  if (!c.mask_dims.empty()) {
    inputs.push_back(model.input(c.mask_dims));
  }
  const std::vector<int64_t> out_dims = {c.batch, c.heads, c.queries, c.value_width};
  const uint32_t out = model.value(out_dims);
  model.payload.step(
      Kind::Attention,
      inputs,
      {out},
      {ints("causal", {c.causal ? 1 : 0}),
       ints("keys_transposed", {c.keys_transposed ? 1 : 0}),
       ints("zero_fully_masked_rows", {c.zero_fully_masked_rows ? 1 : 0}),
       floats("scale", {c.scale})});
  model.output(out, out_dims);
  return model;
}

void check_attention(const AttentionCase& c, std::vector<float> mask = {}) {
  const auto q = random_values(c.batch * c.heads * c.queries * c.width, 41);
  const auto k = random_values(c.batch * c.kv_heads * c.keys * c.width, 42);
  const auto v = random_values(c.batch * c.kv_heads * c.keys * c.value_width, 43);
  if (!c.mask_dims.empty() && mask.empty()) {
    mask = random_values(element_count(c.mask_dims), 44);
  }
  Model model = attention_model(c);
  std::vector<std::vector<float>> inputs = {q, k, v};
  if (!c.mask_dims.empty()) {
    inputs.push_back(mask);
  }
  const auto outputs = run_model(model, inputs);
  ASSERT_EQ(outputs.size(), 1u);
  expect_close(outputs[0], attention_ref(c, q, k, v, mask), "attention");
}

TEST(Attention, GroupedQueryHeadsShareKeysAndValues) {
  AttentionCase c;
  c.batch = 2, c.heads = 6, c.kv_heads = 2;
  check_attention(c);
}

TEST(Attention, KeysStoredTransposedAreReadInPlace) {
  AttentionCase c;
  c.keys_transposed = true;
  check_attention(c);
}

TEST(Attention, CausalRowsSeeOnlyEarlierKeysAcrossQueryBlocks) {
  // 2 heads x 1100 keys of fp32 scores per row: the 4 MB budget gives blocks of 464 rows, 3 blocks.
  AttentionCase c;
  c.queries = c.keys = 1100;
  c.causal = true;
  check_attention(c);
}

TEST(Attention, MasksBroadcastAlongBatchHeadsAndQueries) {
  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{7}, {5, 7}, {2, 1, 5, 7}, {1, 4, 1, 7}, {2, 4, 5, 7}}) {
    AttentionCase c;
    c.batch = 2, c.heads = 4, c.kv_heads = 2;
    c.mask_dims = dims;
    check_attention(c);
  }
}

TEST(Attention, FullyMaskedRowIsZeroOrNaNAsAsked) {
  for (bool zero : {true, false}) {
    AttentionCase c;
    c.mask_dims = {5, 7};
    c.zero_fully_masked_rows = zero;
    auto mask = random_values(35, 45);
    for (int j = 0; j < 7; ++j) {
      mask[2 * 7 + j] = kMinusInfinity;
    }
    const auto q = random_values(c.batch * c.heads * c.queries * c.width, 41);
    const auto k = random_values(c.batch * c.kv_heads * c.keys * c.width, 42);
    const auto v = random_values(c.batch * c.kv_heads * c.keys * c.value_width, 43);
    Model model = attention_model(c);
    const auto outputs = run_model(model, {q, k, v, mask});
    const auto expected = attention_ref(c, q, k, v, mask);
    for (size_t e = 0; e < expected.size(); ++e) {
      if (std::isnan(expected[e])) {
        EXPECT_TRUE(std::isnan(outputs[0][e])) << "element " << e;
      } else {
        EXPECT_NEAR(outputs[0][e], expected[e], 1e-4) << "element " << e;
      }
    }
  }
}

TEST(Attention, MalformedStepsAreRefusedAtInit) {
  AttentionCase heads; // 3 query heads cannot share 2 key heads
  heads.heads = 3;
  AttentionCase mask; // the mask's last dim must be the key count
  mask.mask_dims = {5, 6};
  AttentionCase broadcast; // nor may it have 3 rows for 5 queries
  broadcast.mask_dims = {3, 7};
  AttentionCase scale;
  scale.scale = std::numeric_limits<double>::infinity();
  for (const AttentionCase& c : {heads, mask, broadcast, scale}) {
    Model model = attention_model(c);
    EXPECT_EQ(init_error(model.payload.build(), &model.data), Error::InvalidProgram);
  }
}

TEST(HostSoftmax, NaNMakesItsRowNaNAndOddWidthsMatch) {
  const std::vector<int64_t> dims = {3, 37};
  auto x = random_values(3 * 37, 46);
  x[37 + 20] = std::numeric_limits<float>::quiet_NaN();
  Model model;
  const uint32_t src = model.input(dims);
  const uint32_t dst = model.value(dims);
  model.payload.step(Kind::Softmax, {src}, {dst}, {ints("axis", {1}), ints("log", {0})});
  model.output(dst, dims);
  const auto outputs = run_model(model, {x});
  const auto expected = softmax_ref(x, dims, 1, false);
  for (size_t e = 0; e < expected.size(); ++e) {
    if (e / 37 == 1) {
      EXPECT_TRUE(std::isnan(outputs[0][e])) << "element " << e;
    } else {
      EXPECT_NEAR(outputs[0][e], expected[e], 1e-6) << "element " << e;
    }
  }
}

} // namespace
} // namespace onednn_test
