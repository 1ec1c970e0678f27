// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// The cached attention kernel (runtime/CachedAttention.h) at every vector width this CPU runs, against
// a double-precision reference: starts across the cache, key counts across its chunks, grouped heads,
// widths off the vector lanes, rows split between calls, and the start positions that do not fit.
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../../runtime/CachedAttention.h"
#include "RunnableIsas.h"

namespace executorch::backends::onednn {
namespace {

struct Case {
  CachedAttentionShape shape;
  std::vector<float> q, k, v;
};

Case make_case(size_t batch, size_t queries, size_t heads, size_t kv_heads, size_t length, size_t width, bool causal) {
  Case c;
  c.shape.batch = batch;
  c.shape.queries = queries;
  c.shape.heads = heads;
  c.shape.kv_heads = kv_heads;
  c.shape.cache_length = length;
  c.shape.width = width;
  c.shape.value_width = width;
  c.shape.scale = 1.0f / std::sqrt(static_cast<float>(width));
  c.shape.causal = causal;
  std::mt19937 generator(static_cast<unsigned>(queries * 131 + length * 7 + width));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto fill = [&](std::vector<float>& values, size_t count) {
    values.resize(count);
    for (float& x : values) {
      x = normal(generator);
    }
  };
  fill(c.q, batch * queries * heads * width);
  fill(c.k, batch * length * kv_heads * width);
  fill(c.v, batch * length * kv_heads * width);
  return c;
}

std::vector<double> reference(const Case& c, int64_t start) {
  const CachedAttentionShape& s = c.shape;
  std::vector<double> out(s.batch * s.queries * s.heads * s.value_width);
  for (size_t b = 0; b < s.batch; ++b) {
    for (size_t i = 0; i < s.queries; ++i) {
      for (size_t h = 0; h < s.heads; ++h) {
        const size_t kv = h / (s.heads / s.kv_heads);
        const size_t visible = static_cast<size_t>(start) + (s.causal ? i + 1 : s.queries);
        const float* q = &c.q[((b * s.queries + i) * s.heads + h) * s.width];
        std::vector<double> scores(visible);
        double max = -std::numeric_limits<double>::infinity();
        for (size_t j = 0; j < visible; ++j) {
          const float* key = &c.k[((b * s.cache_length + j) * s.kv_heads + kv) * s.width];
          double dot = 0.0;
          for (size_t d = 0; d < s.width; ++d) {
            dot += static_cast<double>(q[d]) * key[d];
          }
          scores[j] = dot * s.scale;
          max = std::max(max, scores[j]);
        }
        double sum = 0.0;
        for (double& score : scores) {
          score = std::exp(score - max);
          sum += score;
        }
        double* row = &out[((b * s.queries + i) * s.heads + h) * s.value_width];
        for (size_t j = 0; j < visible; ++j) {
          const float* value = &c.v[((b * s.cache_length + j) * s.kv_heads + kv) * s.value_width];
          for (size_t d = 0; d < s.value_width; ++d) {
            row[d] += scores[j] / sum * value[d];
          }
        }
      }
    }
  }
  return out;
}

std::vector<float> run(const Case& c, RowIsa isa, int64_t start, size_t split) {
  CachedAttentionShape shape = c.shape;
  shape.isa = isa;
  std::vector<float> out(shape.batch * shape.queries * shape.heads * shape.value_width, -1.0f);
  CachedAttentionOperands operands{c.q.data(), c.k.data(), c.v.data(), out.data()};
  const size_t tasks = cached_attention_tasks(shape);
  const size_t middle = std::min(split, tasks);
  cached_attention_tasks_run(shape, operands, start, 0, middle);
  cached_attention_tasks_run(shape, operands, start, middle, tasks);
  return out;
}

TEST(CachedAttention, MatchesADoubleReferenceAtEveryWidthStartAndChunk) {
  struct Shape {
    size_t batch, queries, heads, kv_heads, length, width;
    bool causal;
    std::vector<int64_t> starts;
  };
  const std::vector<Shape> shapes = {
      {1, 1, 8, 2, 200, 64, true, {0, 63, 64, 130, 199}}, // one token, keys across the 64-key chunks
      {1, 7, 4, 4, 40, 32, true, {0, 1, 33}},             // a prompt
      {2, 3, 6, 3, 30, 16, true, {0, 27}},                // batches, grouped heads
      {1, 5, 2, 1, 20, 8, false, {0, 15}},                // AVX2's width, every row sees the whole prompt
      {1, 3, 2, 2, 12, 12, true, {0, 9}},                 // a width off every vector width: scalar
  };
  for (const Shape& s : shapes) {
    const Case c = make_case(s.batch, s.queries, s.heads, s.kv_heads, s.length, s.width, s.causal);
    for (const int64_t start : s.starts) {
      ASSERT_TRUE(cached_attention_start_fits(c.shape, start));
      const std::vector<double> expected = reference(c, start);
      for (const RowIsa isa : runnable_isas()) {
        const std::vector<float> got = run(c, isa, start, 5);
        for (size_t e = 0; e < expected.size(); ++e) {
          ASSERT_NEAR(got[e], expected[e], 2e-5 * (1.0 + std::abs(expected[e])))
              << "isa " << static_cast<int>(isa) << ", width " << s.width << ", start " << start << ", element " << e;
        }
      }
    }
  }
}

TEST(CachedAttention, StartsOutsideTheCacheDoNotFit) {
  const Case c = make_case(1, 4, 2, 2, 16, 16, true);
  EXPECT_TRUE(cached_attention_start_fits(c.shape, 12));
  EXPECT_FALSE(cached_attention_start_fits(c.shape, 13));
  EXPECT_FALSE(cached_attention_start_fits(c.shape, -1));
  EXPECT_FALSE(cached_attention_start_fits(c.shape, std::numeric_limits<int64_t>::max()));
  EXPECT_FALSE(cached_attention_start_fits(c.shape, std::numeric_limits<int64_t>::min()));
}

TEST(CachedAttention, ANaNKeyReachesOnlyTheRowsThatSeeIt) {
  Case c = make_case(1, 4, 1, 1, 8, 16, true);
  c.k[2 * 16 + 3] = std::numeric_limits<float>::quiet_NaN(); // key 2
  for (const RowIsa isa : runnable_isas()) {
    const std::vector<float> got = run(c, isa, 0, 1);
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(std::isnan(got[i * 16]), i >= 2) << "isa " << static_cast<int>(isa) << ", query " << i;
    }
  }
}

} // namespace
} // namespace executorch::backends::onednn
