// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// The interleaved rotary embedding's rows (runtime/Rotary.h) against the products and sums the unfused
// steps compute: f32 bit for bit, bf16 rounded once; each row's table row, a sub-range of rows, and
// non-finite values.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../../runtime/Bf16.h"
#include "../../runtime/Rotary.h"

namespace executorch::backends::onednn {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// Stored through a volatile, so that the compiler cannot fuse the product into the sum that reads it.
float product(float a, float b) {
  volatile float rounded = a * b;
  return rounded;
}

uint32_t bits_of(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

// NaN matches any NaN (its sign and payload are not specified); anything else matches its own bits, so
// that -0 and +0 differ.
bool same_value(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || bits_of(a) == bits_of(b);
}

// Pairs [rows, pairs, 2], tables [table rows, pairs]: what the separate multiplies and the subtract and
// add of the unfused graph give.
std::vector<float> reference_rotary(
    const std::vector<float>& x,
    const std::vector<float>& cos,
    const std::vector<float>& sin,
    const std::vector<uint32_t>& table_rows,
    size_t pairs) {
  std::vector<float> out(x.size());
  for (size_t row = 0; row < table_rows.size(); ++row) {
    for (size_t p = 0; p < pairs; ++p) {
      const size_t pair = 2 * (row * pairs + p), entry = table_rows[row] * pairs + p;
      const float x0 = x[pair], x1 = x[pair + 1], c = cos[entry], s = sin[entry];
      out[pair] = product(x0, c) - product(x1, s);
      out[pair + 1] = product(x0, s) + product(x1, c);
    }
  }
  return out;
}

// cos and sin tables of `table_rows` positions over `pairs` frequencies, as Llama's precompute gives.
struct Tables {
  std::vector<float> cos, sin;
  Tables(size_t table_rows, size_t pairs) {
    for (size_t position = 0; position < table_rows; ++position) {
      for (size_t p = 0; p < pairs; ++p) {
        const double angle = (position + 1.0) * std::pow(10000.0, -2.0 * p / (2.0 * pairs));
        cos.push_back(static_cast<float>(std::cos(angle)));
        sin.push_back(static_cast<float>(std::sin(angle)));
      }
    }
  }
};

std::vector<float> normal_values(size_t count, uint32_t seed) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> values(count);
  for (float& value : values) {
    value = normal(generator);
  }
  return values;
}

RotaryRows rotary_rows_of(size_t pairs, bool bf16, std::vector<uint32_t> table_rows) {
  RotaryRows rows;
  rows.rows = table_rows.size();
  rows.pairs = pairs;
  rows.bf16 = bf16;
  rows.table_rows = std::move(table_rows);
  return rows;
}

// Runs rows [begin, end) of `x` (f32, or bf16 bits) into a copy of `dst`.
template <typename T>
std::vector<T> run(
    const RotaryRows& rows,
    const std::vector<T>& x,
    const Tables& tables,
    std::vector<T> dst,
    size_t begin,
    size_t end) {
  rotary_rows(rows, x.data(), tables.cos.data(), tables.sin.data(), dst.data(), begin, end);
  return dst;
}

std::vector<uint16_t> to_bf16(const std::vector<float>& values) {
  std::vector<uint16_t> out;
  for (float value : values) {
    out.push_back(to_bf16_bits(value));
  }
  return out;
}

std::vector<float> widen_all(const std::vector<uint16_t>& values) {
  std::vector<float> out;
  for (uint16_t value : values) {
    out.push_back(from_bf16_bits(value));
  }
  return out;
}

void expect_same_f32(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(same_value(got[i], want[i]))
        << what << " value " << i << ": " << got[i] << " (0x" << std::hex << bits_of(got[i]) << "), want " << want[i]
        << " (0x" << bits_of(want[i]) << ")" << std::dec;
  }
}

// The f32 reference rounded once to bf16.
void expect_rounded_bf16(const std::vector<uint16_t>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(same_value(from_bf16_bits(got[i]), from_bf16_bits(to_bf16_bits(want[i]))))
        << what << " value " << i << ": 0x" << std::hex << got[i] << ", want 0x" << to_bf16_bits(want[i]) << " (f32 "
        << std::dec << want[i] << ")";
  }
}

std::vector<uint32_t> identity_rows(size_t rows) {
  std::vector<uint32_t> table_rows(rows);
  for (size_t r = 0; r < rows; ++r) {
    table_rows[r] = static_cast<uint32_t>(r);
  }
  return table_rows;
}

TEST(Rotary, F32MatchesTheUnfusedProductsBitForBit) {
  const size_t pairs = 7;
  const RotaryRows rows = rotary_rows_of(pairs, false, identity_rows(5));
  const Tables tables(5, pairs);
  const std::vector<float> x = normal_values(5 * pairs * 2, 1);
  const std::vector<float> want = reference_rotary(x, tables.cos, tables.sin, rows.table_rows, pairs);
  expect_same_f32(run(rows, x, tables, std::vector<float>(x.size()), 0, 5), want, "f32");

  // A fused multiply-add would give other bits on these values, so the comparison above can tell.
  size_t fused_differs = 0;
  for (size_t row = 0; row < 5; ++row) {
    for (size_t p = 0; p < pairs; ++p) {
      const size_t pair = 2 * (row * pairs + p), entry = row * pairs + p;
      const float fused = std::fma(x[pair], tables.cos[entry], -product(x[pair + 1], tables.sin[entry]));
      fused_differs += bits_of(fused) != bits_of(want[pair]) ? 1 : 0;
    }
  }
  EXPECT_GT(fused_differs, 0u);
}

TEST(Rotary, Bf16RoundsTheF32ResultOnceToNearestEven) {
  const size_t pairs = 9;
  const RotaryRows rows = rotary_rows_of(pairs, true, identity_rows(4));
  const Tables tables(4, pairs);
  const std::vector<uint16_t> x = to_bf16(normal_values(4 * pairs * 2, 2));
  const std::vector<float> want = reference_rotary(widen_all(x), tables.cos, tables.sin, rows.table_rows, pairs);
  const std::vector<uint16_t> got = run(rows, x, tables, std::vector<uint16_t>(x.size()), 0, 4);
  expect_rounded_bf16(got, want, "bf16");

  // Truncating instead of rounding would give other bits on these values.
  size_t truncation_differs = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    truncation_differs += static_cast<uint16_t>(bits_of(want[i]) >> 16) != got[i] ? 1 : 0;
  }
  EXPECT_GT(truncation_differs, 0u);
}

TEST(Rotary, EachRowReadsTheTableRowItIsGiven) {
  const size_t pairs = 5;
  // Not the identity and not row % 3: rows of one position are not adjacent, as with heads before positions.
  const std::vector<uint32_t> table_rows = {2, 0, 1, 1, 0, 2};
  const Tables tables(3, pairs);
  const std::vector<float> x = normal_values(table_rows.size() * pairs * 2, 3);
  const std::vector<float> want = reference_rotary(x, tables.cos, tables.sin, table_rows, pairs);
  expect_same_f32(
      run(rotary_rows_of(pairs, false, table_rows), x, tables, std::vector<float>(x.size()), 0, 6), want, "f32");
  const std::vector<uint16_t> x_bf16 = to_bf16(x);
  expect_rounded_bf16(
      run(rotary_rows_of(pairs, true, table_rows), x_bf16, tables, std::vector<uint16_t>(x.size()), 0, 6),
      reference_rotary(widen_all(x_bf16), tables.cos, tables.sin, table_rows, pairs),
      "bf16");

  // Given row 1's x, rows 1 and 4 (table row 0) agree, and row 0 (table row 2) does not.
  const size_t row_values = 2 * pairs;
  std::vector<float> same_x = x;
  for (size_t i = 0; i < row_values; ++i) {
    same_x[i] = same_x[4 * row_values + i] = x[row_values + i];
  }
  const std::vector<float> got =
      run(rotary_rows_of(pairs, false, table_rows), same_x, tables, std::vector<float>(x.size()), 0, 6);
  size_t row_4_differs = 0, row_0_differs = 0;
  for (size_t i = 0; i < row_values; ++i) {
    row_4_differs += got[4 * row_values + i] != got[row_values + i] ? 1 : 0;
    row_0_differs += got[i] != got[row_values + i] ? 1 : 0;
  }
  EXPECT_EQ(row_4_differs, 0u);
  EXPECT_GT(row_0_differs, 0u);
}

TEST(Rotary, SubRangeWritesOnlyItsRows) {
  const size_t pairs = 6, row_count = 5, begin = 1, end = 4;
  const Tables tables(row_count, pairs);
  const std::vector<float> x = normal_values(row_count * pairs * 2, 4);
  const std::vector<float> want = reference_rotary(x, tables.cos, tables.sin, identity_rows(row_count), pairs);
  const size_t row_values = 2 * pairs;

  const RotaryRows f32_rows = rotary_rows_of(pairs, false, identity_rows(row_count));
  const std::vector<float> got = run(f32_rows, x, tables, std::vector<float>(x.size(), -7.0f), begin, end);
  for (size_t i = 0; i < got.size(); ++i) {
    const bool inside = i >= begin * row_values && i < end * row_values;
    EXPECT_TRUE(same_value(got[i], inside ? want[i] : -7.0f)) << "f32 value " << i << " is " << got[i];
  }
  // Two ranges that meet give what one range over both gives.
  std::vector<float> halves = run(f32_rows, x, tables, std::vector<float>(x.size()), 0, 2);
  halves = run(f32_rows, x, tables, halves, 2, row_count);
  expect_same_f32(halves, want, "f32 in two ranges");

  const std::vector<uint16_t> x_bf16 = to_bf16(x);
  const std::vector<float> want_bf16 =
      reference_rotary(widen_all(x_bf16), tables.cos, tables.sin, identity_rows(row_count), pairs);
  const uint16_t sentinel = 0xBEEF;
  const std::vector<uint16_t> got_bf16 =
      run(rotary_rows_of(pairs, true, identity_rows(row_count)),
          x_bf16,
          tables,
          std::vector<uint16_t>(x.size(), sentinel),
          begin,
          end);
  for (size_t i = 0; i < got_bf16.size(); ++i) {
    const bool inside = i >= begin * row_values && i < end * row_values;
    EXPECT_EQ(got_bf16[i], inside ? to_bf16_bits(want_bf16[i]) : sentinel) << "bf16 value " << i;
  }
}

TEST(Rotary, NonFiniteValuesPropagateAsTheProductsDo) {
  // Each pair once against (cos, sin) = (1, 0), where inf * 0 is NaN, and once against a general angle.
  const std::vector<float> x = {
      kNan, 1.0f, 1.0f, kNan, kInf, 1.0f, -kInf, 2.0f, kInf, kInf, kInf, -kInf, 0.0f, kInf, -0.0f, -0.0f};
  const size_t pairs = x.size() / 2;
  Tables tables(2, pairs);
  for (size_t p = 0; p < pairs; ++p) {
    tables.cos[p] = 1.0f, tables.sin[p] = 0.0f;
    tables.cos[pairs + p] = 0.6f, tables.sin[pairs + p] = -0.8f;
  }
  std::vector<float> both_rows = x;
  both_rows.insert(both_rows.end(), x.begin(), x.end());
  const std::vector<uint32_t> table_rows = {0, 1};
  const std::vector<float> want = reference_rotary(both_rows, tables.cos, tables.sin, table_rows, pairs);

  // The reference's own values where the products decide them: inf * 0 and inf - inf are NaN.
  ASSERT_TRUE(std::isnan(want[0]) && std::isnan(want[1]));                     // (NaN, 1)
  ASSERT_TRUE(std::isnan(want[2]) && std::isnan(want[3]));                     // (1, NaN)
  ASSERT_TRUE(want[4] == kInf && std::isnan(want[5]));                         // (inf, 1) at angle 0
  ASSERT_TRUE(std::isnan(want[8]) && std::isnan(want[9]));                     // (inf, inf) at angle 0
  ASSERT_TRUE(want[2 * pairs + 8] == kInf && std::isnan(want[2 * pairs + 9])); // (inf, inf): inf + 0.6 inf - inf
  // (-0, -0) at angle 0: -0 - (-0 * 0) is +0, -0 * 0 + -0 * 1 is -0.
  ASSERT_TRUE(bits_of(want[14]) == bits_of(0.0f) && bits_of(want[15]) == bits_of(-0.0f));

  const std::vector<float> got =
      run(rotary_rows_of(pairs, false, table_rows), both_rows, tables, std::vector<float>(x.size() * 2), 0, 2);
  expect_same_f32(got, want, "f32");
  const std::vector<uint16_t> got_bf16 = run(
      rotary_rows_of(pairs, true, table_rows), to_bf16(both_rows), tables, std::vector<uint16_t>(x.size() * 2), 0, 2);
  expect_rounded_bf16(got_bf16, want, "bf16");
}

} // namespace
} // namespace executorch::backends::onednn
