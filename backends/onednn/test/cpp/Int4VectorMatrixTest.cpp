// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// The 8da4w kernels (runtime/Int4VectorMatrix.h): the activations' quantization bit for bit against
// torchao's formula written out in f32; the int4 row-times-matrix on every path this CPU runs (scalar,
// AVX2 with and without AVX-VNNI, AVX-512 with and without AVX512-VNNI) against a double reference,
// over the shapes that pick each of its ways of scaling; the zero-point helpers exactly; the f32-row
// (4w) kernel on its paths (scalar, AVX2, AVX-512) against torchao's dequantize-then-linear in double;
// the f32-row int8 kernel (runtime/Int8VectorMatrix.h, export_llm's qmode=int8) on the same paths; the
// 4-bit kernels on bf16 scales bit for bit against their f32 values.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "../../runtime/Int4VectorMatrix.h"
#include "../../runtime/Int8VectorMatrix.h"
#include "../../runtime/RowKernels.h"
#include "Int4Matrices.h"

namespace executorch::backends::onednn {
namespace {

using namespace int4_testing;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Quantized {
  std::vector<int8_t> q;
  float scale = 0.0f;
  int32_t zero_point = 0;
};

// torchao's choose_qparams_affine + quantize_affine for one row, as the header states them, in f32.
Quantized reference_quantize(const std::vector<float>& x) {
  float min_neg = 0.0f, max_pos = 0.0f;
  for (const float v : x) {
    min_neg = std::min(min_neg, v);
    max_pos = std::max(max_pos, v);
  }
  Quantized out;
  out.scale = std::max((max_pos - min_neg) / 255.0f, std::numeric_limits<float>::min());
  const float zero = std::clamp(-128.0f - std::nearbyint(min_neg / out.scale), -128.0f, 127.0f);
  out.zero_point = static_cast<int32_t>(zero);
  const float inverse = 1.0f / out.scale;
  for (const float v : x) {
    out.q.push_back(static_cast<int8_t>(std::clamp(std::nearbyint(v * inverse) + zero, -128.0f, 127.0f)));
  }
  return out;
}

Quantized quantize(const std::vector<float>& x) {
  Quantized out;
  out.q.assign(x.size(), 99);
  out.zero_point = 99;
  quantize_row_affine_int8(x.data(), x.size(), out.q.data(), &out.scale, &out.zero_point);
  return out;
}

void expect_bit_exact(const std::vector<float>& x, const std::string& what) {
  const Quantized want = reference_quantize(x), got = quantize(x);
  uint32_t want_bits, got_bits;
  std::memcpy(&want_bits, &want.scale, 4);
  std::memcpy(&got_bits, &got.scale, 4);
  EXPECT_EQ(got_bits, want_bits) << what << ": scale " << got.scale << " against " << want.scale;
  EXPECT_EQ(got.zero_point, want.zero_point) << what;
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(got.q[i], want.q[i]) << what << ": q[" << i << "] of x = " << x[i];
  }
}

TEST(Int4VectorMatrix, QuantizationMatchesTorchaoBitForBit) {
  std::mt19937 generator(3);
  const std::vector<std::pair<float, float>> ranges{
      {-1.0f, 1.0f}, {-1000.0f, 3.0f}, {0.5f, 2.0f}, {-3.0f, -0.1f}, {-1e-3f, 5e4f}};
  for (const size_t k : {1, 3, 4, 15, 16, 17, 31, 64, 100, 2048}) {
    for (const auto& [low, high] : ranges) {
      std::uniform_real_distribution<float> uniform(low, high);
      std::vector<float> x(k);
      for (float& v : x) {
        v = uniform(generator);
      }
      expect_bit_exact(x, "k " + std::to_string(k) + " in [" + std::to_string(low) + ", " + std::to_string(high) + "]");
    }
    expect_bit_exact(std::vector<float>(k, 0.0f), "zeros, k " + std::to_string(k));
    std::vector<float> single(k, 0.0f);
    single[k / 2] = -0.37f;
    expect_bit_exact(single, "one negative value, k " + std::to_string(k));
    single[k / 2] = 1e-40f; // denormal: the scale clamps to FLT_MIN
    expect_bit_exact(single, "one denormal value, k " + std::to_string(k));
  }
  // Finite values whose exponent bits are nearly all ones, in the vector loop and after it.
  expect_bit_exact({std::numeric_limits<float>::max(), 0.0f, -1.0f, 2e38f, 5.0f}, "FLT_MAX");
}

TEST(Int4VectorMatrix, QuantizationRoundsHalvesToEven) {
  // max 255, min 0: scale 1, zero point -128, and x * (1 / scale) is x exactly.
  const Quantized positive = quantize(
      {255.0f, 0.5f, 1.5f, 2.5f, 3.5f, -0.0f, 254.5f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 2.5f});
  EXPECT_EQ(positive.scale, 1.0f);
  EXPECT_EQ(positive.zero_point, -128);
  const std::vector<int8_t> want_positive{
      127, -128, -126, -126, -124, -128, 126, -128, -128, -128, -128, -128, -128, -128, -128, -128, -126};
  EXPECT_EQ(positive.q, want_positive);
  // min -100.5, max 154.5: scale 1, and -128 - round(-100.5) = -128 + 100.
  const Quantized shifted = quantize({-100.5f, 154.5f, -2.5f});
  EXPECT_EQ(shifted.scale, 1.0f);
  EXPECT_EQ(shifted.zero_point, -28);
  EXPECT_EQ(shifted.q, (std::vector<int8_t>{-128, 126, -30})); // 154.5 rounds to 154
}

TEST(Int4VectorMatrix, NonFiniteRowsGetANaNScaleAndZeros) {
  for (const size_t k : {1, 7, 16, 33}) {
    for (const float bad : {kNaN, kInf, -kInf}) {
      for (const size_t at : {size_t{0}, k / 2, k - 1}) {
        std::vector<float> x(k, 0.25f);
        x[at] = bad;
        const Quantized got = quantize(x);
        EXPECT_TRUE(std::isnan(got.scale)) << "k " << k << " value " << bad << " at " << at;
        EXPECT_EQ(got.zero_point, 0);
        EXPECT_EQ(got.q, std::vector<int8_t>(k, 0)) << "k " << k << " value " << bad << " at " << at;
      }
    }
  }
  // Finite, but a range beyond FLT_MAX: torchao's scale would be inf.
  const Quantized wide = quantize({3e38f, -3e38f});
  EXPECT_TRUE(std::isnan(wide.scale));
}

TEST(Int4VectorMatrix, QuantizingRowsTouchesOnlyTheRange) {
  const size_t rows = 4, k = 21;
  std::vector<float> x(rows * k);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = std::sin(0.7f * static_cast<float>(i)) * static_cast<float>(i % 5);
  }
  std::vector<int8_t> q(rows * k, 99);
  std::vector<float> scales(rows, -1.0f);
  std::vector<int32_t> zero_points(rows, 99);
  quantize_rows_affine_int8(x.data(), rows, k, q.data(), scales.data(), zero_points.data(), 1, 3);
  for (size_t m = 0; m < rows; ++m) {
    const bool inside = m >= 1 && m < 3;
    const Quantized want = reference_quantize(std::vector<float>(x.begin() + m * k, x.begin() + (m + 1) * k));
    EXPECT_EQ(scales[m], inside ? want.scale : -1.0f) << "row " << m;
    EXPECT_EQ(zero_points[m], inside ? want.zero_point : 99) << "row " << m;
    EXPECT_EQ(
        std::vector<int8_t>(q.begin() + m * k, q.begin() + (m + 1) * k), inside ? want.q : std::vector<int8_t>(k, 99))
        << "row " << m;
  }
}

// The column terms (a row's zero point times them is taken off the products) against a sum of the
// unpacked values, for groups of whole bytes and for groups that split a byte.
TEST(Int4ColumnTerms, MatchTheScaledSumsOfEachRowsGroups) {
  std::mt19937 generator(11);
  for (const size_t group : {size_t{2}, size_t{3}, size_t{32}, size_t{96}}) {
    const Int4Matrix m(5, 96, group, generator);
    for (size_t r = 0; r < m.n; ++r) {
      double expected = 0.0;
      for (size_t g = 0; g < m.k / group; ++g) {
        int32_t values = 0;
        for (size_t k = g * group; k < (g + 1) * group; ++k) {
          values += m.values[r * m.k + k];
        }
        expected += static_cast<double>(m.scales[r * (m.k / group) + g]) * values;
      }
      EXPECT_NEAR(m.terms[r], expected, 1e-5) << "group " << group << ", row " << r;
    }
  }
}

struct Path {
  const char* name;
  RowIsa isa;
  bool vnni;
};

std::string path_name(const testing::TestParamInfo<Path>& info) {
  return info.param.name;
}

void PrintTo(const Path& path, std::ostream* out) {
  *out << path.name;
}

// What the CPU (and oneDNN's instruction-set cap, through host_row_isa()) lacks for a path, or "".
std::string missing_feature(const Path& path) {
  const RowIsa host = host_row_isa();
  if (path.isa == RowIsa::avx2 && host == RowIsa::scalar) {
    return "AVX2";
  }
  if (path.isa == RowIsa::avx512 && host != RowIsa::avx512) {
    return "AVX-512 (avx512_core)";
  }
  if (path.vnni && path.isa == RowIsa::avx2 && !__builtin_cpu_supports("avxvnni")) {
    return "AVX-VNNI";
  }
  if (path.vnni && path.isa == RowIsa::avx512 && !__builtin_cpu_supports("avx512vnni")) {
    return "AVX512-VNNI";
  }
  return "";
}

class Int4Path : public testing::TestWithParam<Path> {
 protected:
  void SetUp() override {
    const std::string missing = missing_feature(GetParam());
    if (!missing.empty()) {
      GTEST_SKIP() << "this CPU has no " << missing;
    }
  }
};

INSTANTIATE_TEST_SUITE_P(
    Int4VectorMatrix,
    Int4Path,
    testing::Values(
        Path{"scalar", RowIsa::scalar, false},
        Path{"avx2", RowIsa::avx2, false},
        Path{"avx2_vnni", RowIsa::avx2, true},
        Path{"avx512", RowIsa::avx512, false},
        Path{"avx512_vnni", RowIsa::avx512, true}),
    path_name);

// Every way the vector kernels scale their lanes, with and without a last step of 64 values, and the
// shapes every path leaves to the scalar loop.
const std::vector<Case> kCases{
    {16, 64, 32},    // only a last step of 64
    {37, 128, 32},   // groups of 32
    {64, 256, 64},   // groups of 64
    {8, 512, 128},   // a group per step
    {5, 2048, 32},   // groups of 32, a long row
    {3, 96, 32},     // k % 64 != 0: the scalar loop
    {4, 320, 32},    // groups of 32, and a last step of 64
    {6, 192, 64},    // groups of 64, and a last step of 64
    {5, 576, 64},    // groups of 64, and a last step of 64
    {7, 384, 96},    // other multiples of 32: a table of the segments' groups
    {3, 192, 192},   // the same, and a last step of 64
    {3, 640, 320},   // the same
    {9, 1024, 256},  // groups of two steps
    {3, 1536, 512},  // an odd number of groups of four steps
    {3, 2048, 2048}, // one group
    {3, 30, 6},      // groups of 6: the scalar loop
    {3, 30, 5},      // odd groups: the scalar loop by values
    {1, 64, 64},     // less than a cache line of weights
};

// dst[r] as the header states it, in double, and the sum of its terms' magnitudes.
void reference(
    const Int4Matrix& matrix,
    const std::vector<int8_t>& q,
    float row_scale,
    int32_t zero_point,
    const float* bias,
    size_t r,
    double& want,
    double& magnitude) {
  const size_t groups = matrix.k / matrix.group;
  double sum = 0.0, size = 0.0;
  for (size_t g = 0; g < groups; ++g) {
    int64_t dot = 0, size_dot = 0;
    for (size_t k = g * matrix.group; k < (g + 1) * matrix.group; ++k) {
      dot += q[k] * matrix.values[r * matrix.k + k];
      size_dot += std::abs(q[k] * matrix.values[r * matrix.k + k]);
    }
    sum += static_cast<double>(matrix.scales[r * groups + g]) * static_cast<double>(dot);
    size += std::fabs(matrix.scales[r * groups + g]) * static_cast<double>(size_dot);
  }
  const double zero_term = static_cast<double>(zero_point) * matrix.terms[r];
  want = row_scale * (sum - zero_term) + (bias != nullptr ? bias[r] : 0.0);
  magnitude = std::fabs(row_scale) * (size + std::fabs(zero_term)) + (bias != nullptr ? std::fabs(bias[r]) : 0.0);
}

TEST_P(Int4Path, MatchesADoubleReferenceOnItsRangeOnly) {
  const Path path = GetParam();
  std::mt19937 generator(11);
  std::uniform_int_distribution<int> byte(-128, 127);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (const Case& c : kCases) {
    const Int4Matrix matrix(c.n, c.k, c.group, generator);
    std::vector<int8_t> q(c.k);
    for (int8_t& v : q) {
      v = static_cast<int8_t>(byte(generator));
    }
    std::vector<float> bias(c.n);
    for (float& v : bias) {
      v = uniform(generator);
    }
    for (const bool has_bias : {false, true}) {
      for (const int32_t zero_point : {0, -128, 37, 127}) {
        const float row_scale = 0.013f;
        // Columns 0 and n - 1 stay outside; the split falls anywhere.
        std::vector<float> dst(c.n, -7.0f);
        Int4RowOperands operands;
        operands.q = q.data();
        operands.row_scale = row_scale;
        operands.zero_point = zero_point;
        operands.weights = matrix.packed.data();
        operands.scales = matrix.scales.data();
        operands.terms = matrix.terms.data();
        operands.bias = has_bias ? bias.data() : nullptr;
        operands.dst = dst.data();
        const Int4MatrixShape shape = matrix.shape(path.isa, path.vnni);
        const size_t split = c.n / 2;
        int4_vector_matrix(shape, operands, 1, split);
        int4_vector_matrix(shape, operands, std::max<size_t>(split, 1), c.n - 1);
        for (size_t r = 0; r < c.n; ++r) {
          const std::string where = "n " + std::to_string(c.n) + " k " + std::to_string(c.k) + " group " +
                                    std::to_string(c.group) + (has_bias ? " bias" : "") + " zero point " +
                                    std::to_string(zero_point) + " column " + std::to_string(r);
          if (r == 0 || r == c.n - 1) {
            EXPECT_EQ(dst[r], -7.0f) << where << ": written outside the range";
            continue;
          }
          double want, magnitude;
          reference(matrix, q, row_scale, zero_point, operands.bias, r, want, magnitude);
          EXPECT_NEAR(dst[r], want, 1e-5 * magnitude) << where;
        }
      }
    }
  }
}

// bf16 scales (GroupScales.h) are widened exactly, a row at a time: every kernel must then give, bit for
// bit, what it gives on f32 scales of the same values, column terms included. k 32768 in groups of 32
// takes the widening's heap buffer (more than 512 groups a row).
TEST_P(Int4Path, Bf16ScalesGiveWhatTheirF32ValuesGive) {
  const Path path = GetParam();
  std::mt19937 generator(23);
  std::uniform_int_distribution<int> byte(-128, 127);
  std::vector<Case> cases = kCases;
  cases.push_back({3, 32768, 32});
  for (const Case& c : cases) {
    Int4Matrix matrix(c.n, c.k, c.group, generator);
    const std::vector<uint16_t> bits = round_scales_to_bf16(matrix);
    const Int4MatrixShape shape = matrix.shape(path.isa, path.vnni);
    std::vector<float> terms(c.n);
    int4_column_terms(shape, matrix.packed.data(), GroupScales(bits.data()), terms.data(), 0, c.n);
    std::vector<int8_t> q(c.k);
    for (int8_t& v : q) {
      v = static_cast<int8_t>(byte(generator));
    }
    std::vector<float> from_f32(c.n), from_bf16(c.n);
    Int4RowOperands operands;
    operands.q = q.data();
    operands.row_scale = 0.013f;
    operands.zero_point = 37;
    operands.weights = matrix.packed.data();
    operands.terms = matrix.terms.data();
    operands.scales = matrix.scales.data();
    operands.dst = from_f32.data();
    int4_vector_matrix(shape, operands, 0, c.n);
    operands.scales = GroupScales(bits.data());
    operands.dst = from_bf16.data();
    int4_vector_matrix(shape, operands, 0, c.n);
    for (size_t r = 0; r < c.n; ++r) {
      const std::string where = "n " + std::to_string(c.n) + " k " + std::to_string(c.k) + " group " +
                                std::to_string(c.group) + " column " + std::to_string(r);
      EXPECT_TRUE(same_bits(terms[r], matrix.terms[r])) << where << ": terms " << terms[r] << ", " << matrix.terms[r];
      EXPECT_TRUE(same_bits(from_bf16[r], from_f32[r])) << where << ": " << from_bf16[r] << ", " << from_f32[r];
    }
  }
}

TEST_P(Int4Path, ExtremeProductsStayExact) {
  // Every product at its largest (q -128 or 127 times w -8 or 7, up to 1024 each): a 16-bit pair sum
  // that saturated would show.
  const Path path = GetParam();
  std::mt19937 generator(5);
  for (const int8_t w : {int8_t{-8}, int8_t{7}}) {
    for (const int8_t value : {int8_t{-128}, int8_t{127}}) {
      Int4Matrix matrix(4, 512, 128, generator);
      std::fill(matrix.values.begin(), matrix.values.end(), w);
      std::fill(matrix.scales.begin(), matrix.scales.end(), 1.0f);
      matrix.pack();
      const std::vector<int8_t> q(matrix.k, value);
      std::vector<float> dst(matrix.n);
      Int4RowOperands operands;
      operands.q = q.data();
      operands.row_scale = 1.0f;
      operands.weights = matrix.packed.data();
      operands.scales = matrix.scales.data();
      operands.terms = matrix.terms.data();
      operands.dst = dst.data();
      int4_vector_matrix(matrix.shape(path.isa, path.vnni), operands, 0, matrix.n);
      for (size_t r = 0; r < matrix.n; ++r) {
        EXPECT_EQ(dst[r], static_cast<float>(512 * w * value)) << "w " << int{w} << " q " << int{value};
      }
    }
  }
}

TEST_P(Int4Path, ANaNRowScaleMakesEveryColumnNaN) {
  const Path path = GetParam();
  std::mt19937 generator(9);
  for (const Case& c : kCases) {
    const Int4Matrix matrix(c.n, c.k, c.group, generator);
    const std::vector<int8_t> q(c.k, 0); // a NaN row quantizes to zeros
    std::vector<float> dst(c.n, 0.0f);
    Int4RowOperands operands;
    operands.q = q.data();
    operands.row_scale = kNaN;
    operands.weights = matrix.packed.data();
    operands.scales = matrix.scales.data();
    operands.terms = matrix.terms.data();
    operands.dst = dst.data();
    int4_vector_matrix(matrix.shape(path.isa, path.vnni), operands, 0, c.n);
    for (size_t r = 0; r < c.n; ++r) {
      EXPECT_TRUE(std::isnan(dst[r])) << "n " << c.n << " k " << c.k << " column " << r << " = " << dst[r];
    }
  }
}

TEST(Int4VectorMatrix, ColumnTermsAreTheScaledGroupSumsInGroupOrder) {
  std::mt19937 generator(13);
  for (const Case& c : kCases) {
    const Int4Matrix matrix(c.n, c.k, c.group, generator);
    const size_t groups = c.k / c.group;
    for (size_t r = 0; r < c.n; ++r) {
      float want = 0.0f;
      for (size_t g = 0; g < groups; ++g) {
        int32_t sum = 0;
        for (size_t k = g * c.group; k < (g + 1) * c.group; ++k) {
          sum += matrix.values[r * c.k + k];
        }
        want += matrix.scales[r * groups + g] * static_cast<float>(sum);
      }
      EXPECT_EQ(matrix.terms[r], want) << "n " << c.n << " k " << c.k << " group " << c.group << " row " << r;
    }
  }
}

TEST(Int4VectorMatrix, SubtractingZeroPointTermsTouchesOnlyTheRange) {
  const size_t rows = 5, n = 19;
  std::vector<float> dst(rows * n), terms(n), row_scales{0.5f, 0.02f, 1.25f, 3.0f, 0.001f};
  const std::vector<int32_t> zero_points{3, -128, 127, 0, -7};
  for (size_t i = 0; i < dst.size(); ++i) {
    dst[i] = std::cos(0.3f * static_cast<float>(i));
  }
  for (size_t r = 0; r < n; ++r) {
    terms[r] = std::sin(1.1f * static_cast<float>(r)) * 40.0f;
  }
  // Offset 128: the rows were multiplied as u8 (q + 128), as the widened matmul does.
  for (const float offset : {0.0f, 128.0f}) {
    std::vector<float> got = dst;
    subtract_zero_point_terms(got.data(), rows, n, row_scales.data(), zero_points.data(), offset, terms.data(), 1, 4);
    for (size_t m = 0; m < rows; ++m) {
      const float factor = row_scales[m] * (static_cast<float>(zero_points[m]) + offset);
      for (size_t r = 0; r < n; ++r) {
        const float want = m >= 1 && m < 4 ? dst[m * n + r] - factor * terms[r] : dst[m * n + r];
        EXPECT_EQ(got[m * n + r], want) << "offset " << offset << " row " << m << " column " << r;
      }
    }
  }
}

// ---- f32 rows times int4 weights (4w) ----

// The f32 kernel's paths: one per vector width, VNNI playing no part.
class Int4FloatPath : public Int4Path {};

INSTANTIATE_TEST_SUITE_P(
    Int4FloatVectorMatrix,
    Int4FloatPath,
    testing::Values(
        Path{"scalar", RowIsa::scalar, false},
        Path{"avx2", RowIsa::avx2, false},
        Path{"avx512", RowIsa::avx512, false}),
    path_name);

TEST_P(Int4FloatPath, MatchesTorchaosDequantizeThenLinearOnItsRangeOnly) {
  const Path path = GetParam();
  std::mt19937 generator(17);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (const Case& c : kFloatCases) {
    const Int4Matrix matrix(c.n, c.k, c.group, generator);
    std::vector<float> x(c.k), bias(c.n);
    for (size_t k = 0; k < c.k; ++k) {
      x[k] = uniform(generator) * (k % 7 == 0 ? 30.0f : 1.0f); // some larger values among the rest
    }
    for (float& v : bias) {
      v = uniform(generator);
    }
    for (const ZeroPoints kind : {ZeroPoints::none, ZeroPoints::random, ZeroPoints::extreme}) {
      const std::vector<int8_t> zero_points = make_zero_points(matrix, kind, generator);
      const int8_t* zeros = kind == ZeroPoints::none ? nullptr : zero_points.data();
      for (const bool has_bias : {false, true}) {
        // Columns 0 and n - 1 stay outside; the split falls anywhere.
        std::vector<float> dst(c.n, -7.0f);
        const Int4FloatRowOperands operands = float_operands(matrix, x, zeros, has_bias ? bias.data() : nullptr, dst);
        const Int4MatrixShape shape = matrix.shape(path.isa, false);
        const size_t split = c.n / 2;
        int4_float_vector_matrix(shape, operands, 1, split);
        int4_float_vector_matrix(shape, operands, std::max<size_t>(split, 1), c.n - 1);
        for (size_t r = 0; r < c.n; ++r) {
          const std::string where = float_case_name(c, kind, has_bias) + ", column " + std::to_string(r);
          if (r == 0 || r == c.n - 1) {
            EXPECT_EQ(dst[r], -7.0f) << where << ": written outside the range";
            continue;
          }
          double want, magnitude;
          float_reference(matrix, x, zeros, operands.bias, r, want, magnitude);
          EXPECT_NEAR(dst[r], want, 1e-5 * magnitude) << where;
        }
      }
    }
  }
}

TEST_P(Int4FloatPath, Bf16ScalesGiveWhatTheirF32ValuesGive) {
  const Path path = GetParam();
  std::mt19937 generator(29);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (const Case& c : kFloatCases) {
    Int4Matrix matrix(c.n, c.k, c.group, generator);
    const std::vector<uint16_t> bits = round_scales_to_bf16(matrix);
    std::vector<float> x(c.k);
    for (float& v : x) {
      v = uniform(generator);
    }
    for (const ZeroPoints kind : {ZeroPoints::none, ZeroPoints::random}) {
      const std::vector<int8_t> zero_points = make_zero_points(matrix, kind, generator);
      const int8_t* zeros = kind == ZeroPoints::none ? nullptr : zero_points.data();
      std::vector<float> from_f32(c.n), from_bf16(c.n);
      Int4FloatRowOperands operands = float_operands(matrix, x, zeros, nullptr, from_f32);
      const Int4MatrixShape shape = matrix.shape(path.isa, false);
      int4_float_vector_matrix(shape, operands, 0, c.n);
      operands.scales = GroupScales(bits.data());
      operands.dst = from_bf16.data();
      int4_float_vector_matrix(shape, operands, 0, c.n);
      for (size_t r = 0; r < c.n; ++r) {
        EXPECT_TRUE(same_bits(from_bf16[r], from_f32[r]))
            << float_case_name(c, kind, false) << ", column " << r << ": " << from_bf16[r] << ", " << from_f32[r];
      }
    }
  }
}

TEST_P(Int4FloatPath, NaNAndInfinityInTheRowPropagateAsInTheReference) {
  // An infinity times a nonzero weight gives an infinity of its sign, times a zero weight (w equal
  // to its zero point) NaN; infinities of both signs in one column add to NaN; NaN gives NaN.
  const Path path = GetParam();
  std::mt19937 generator(23);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (const Case& c : kFloatCases) {
    Int4Matrix matrix(c.n, c.k, c.group, generator);
    const size_t groups = c.k / c.group, at = c.k / 3, other = c.k - 1;
    std::vector<int8_t> zero_points = make_zero_points(matrix, ZeroPoints::random, generator);
    for (size_t r = 0; r < c.n; r += 2) {
      // Even columns: a zero weight where the row is not finite.
      matrix.values[r * c.k + at] = zero_points[r * groups + at / c.group];
      matrix.values[r * c.k + other] = zero_points[r * groups + other / c.group];
    }
    for (size_t r = 1; r < c.n; r += 2) {
      // Odd columns: nonzero weights of both signs there.
      const int8_t zero = zero_points[r * groups + at / c.group];
      matrix.values[r * c.k + at] = static_cast<int8_t>(zero <= 0 ? zero + 3 : zero - 5);
      const int8_t other_zero = zero_points[r * groups + other / c.group];
      matrix.values[r * c.k + other] = static_cast<int8_t>(other_zero <= 0 ? other_zero + 1 : other_zero - 2);
    }
    matrix.pack();
    const std::vector<std::pair<float, float>> specials{
        {kInf, 0.5f}, {-kInf, 0.5f}, {kNaN, 0.5f}, {kInf, -kInf}, {kInf, kInf}, {0.25f, kNaN}};
    for (const bool has_zero_points : {false, true}) {
      const int8_t* zeros = has_zero_points ? zero_points.data() : nullptr;
      for (const auto& [first, second] : specials) {
        std::vector<float> x(c.k);
        for (float& v : x) {
          v = uniform(generator);
        }
        x[at] = first;
        x[other] = second;
        std::vector<float> dst(c.n, -7.0f);
        int4_float_vector_matrix(matrix.shape(path.isa, false), float_operands(matrix, x, zeros, nullptr, dst), 0, c.n);
        for (size_t r = 0; r < c.n; ++r) {
          double want, magnitude;
          float_reference(matrix, x, zeros, nullptr, r, want, magnitude);
          const std::string where = float_case_name(c, has_zero_points ? ZeroPoints::random : ZeroPoints::none, false) +
                                    ", row values " + std::to_string(first) + " and " + std::to_string(second) +
                                    ", column " + std::to_string(r) + ": " + std::to_string(dst[r]) + " against " +
                                    std::to_string(want);
          if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(dst[r])) << where;
          } else if (std::isinf(want)) {
            EXPECT_EQ(dst[r], static_cast<float>(want)) << where;
          } else {
            EXPECT_NEAR(dst[r], want, 1e-5 * magnitude) << where;
          }
        }
      }
    }
  }
}

TEST_P(Int4FloatPath, ThreadsOnDisjointRangesGetWhatOneThreadGets) {
  // Each thread keeps its own rearranged row and tables; two shapes alternate so that they regrow.
  const Path path = GetParam();
  std::mt19937 generator(29);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const Int4Matrix wide(64, 2048, 32, generator), narrow(64, 320, 64, generator);
  const std::vector<int8_t> wide_zeros = make_zero_points(wide, ZeroPoints::random, generator);
  const std::vector<int8_t> narrow_zeros = make_zero_points(narrow, ZeroPoints::random, generator);
  std::vector<float> wide_x(wide.k), narrow_x(narrow.k);
  for (float& v : wide_x) {
    v = uniform(generator);
  }
  for (float& v : narrow_x) {
    v = uniform(generator);
  }
  std::vector<float> wide_want(wide.n), narrow_want(narrow.n);
  int4_float_vector_matrix(
      wide.shape(path.isa, false), float_operands(wide, wide_x, wide_zeros.data(), nullptr, wide_want), 0, wide.n);
  int4_float_vector_matrix(
      narrow.shape(path.isa, false), float_operands(narrow, narrow_x, nullptr, nullptr, narrow_want), 0, narrow.n);
  constexpr size_t kThreads = 4;
  std::vector<float> wide_got(wide.n, -7.0f), narrow_got(narrow.n, -7.0f);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const size_t begin = t * wide.n / kThreads, end = (t + 1) * wide.n / kThreads;
      for (int round = 0; round < 20; ++round) {
        int4_float_vector_matrix(
            wide.shape(path.isa, false),
            float_operands(wide, wide_x, wide_zeros.data(), nullptr, wide_got),
            begin,
            end);
        int4_float_vector_matrix(
            narrow.shape(path.isa, false), float_operands(narrow, narrow_x, nullptr, nullptr, narrow_got), begin, end);
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  for (size_t r = 0; r < wide.n; ++r) {
    EXPECT_EQ(wide_got[r], wide_want[r]) << "k 2048 group 32, zero points, column " << r;
    EXPECT_EQ(narrow_got[r], narrow_want[r]) << "k 320 group 64, column " << r;
  }
}

// ---- f32 rows times int8 weights (qmode=int8) ----

class Int8FloatPath : public Int4Path {};

INSTANTIATE_TEST_SUITE_P(
    Int8FloatVectorMatrix,
    Int8FloatPath,
    testing::Values(
        Path{"scalar", RowIsa::scalar, false},
        Path{"avx2", RowIsa::avx2, false},
        Path{"avx512", RowIsa::avx512, false}),
    path_name);

TEST_P(Int8FloatPath, MatchesADoubleReferenceOnItsRangeOnly) {
  // One group a row (qmode=int8) and several; steps of 64 (32 on AVX2) with and without the shorter
  // ones after them; groups of 8 (AVX2's steps; AVX-512 leaves them to AVX2) and of 12 (the scalar loop).
  const std::vector<Case> cases{
      {9, 2048, 2048}, {33, 128, 128}, {17, 96, 96}, {40, 192, 64}, {5, 64, 16}, {7, 48, 8}, {6, 36, 12}};
  const Path path = GetParam();
  std::mt19937 generator(29);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::uniform_int_distribution<int> byte(-128, 127);
  for (const Case& c : cases) {
    std::vector<int8_t> weights(c.n * c.k);
    for (int8_t& w : weights) {
      w = static_cast<int8_t>(byte(generator));
    }
    std::vector<float> x(c.k), scales(c.n * (c.k / c.group)), bias(c.n);
    for (float& v : x) {
      v = uniform(generator);
    }
    for (float& v : scales) {
      v = 0.01f + 0.01f * uniform(generator);
    }
    for (float& v : bias) {
      v = uniform(generator);
    }
    for (const bool has_bias : {false, true}) {
      std::vector<float> dst(c.n, -7.0f); // columns 0 and n - 1 stay outside the range
      Int8FloatRowOperands operands;
      operands.row = x.data();
      operands.weights = weights.data();
      operands.scales = scales.data();
      operands.bias = has_bias ? bias.data() : nullptr;
      operands.dst = dst.data();
      Int4MatrixShape shape;
      shape.isa = path.isa;
      shape.n = c.n;
      shape.k = c.k;
      shape.group = c.group;
      int8_float_vector_matrix(shape, operands, 1, c.n / 2);
      int8_float_vector_matrix(shape, operands, c.n / 2, c.n - 1);
      const size_t groups = c.k / c.group;
      for (size_t r = 0; r < c.n; ++r) {
        const std::string where = "n " + std::to_string(c.n) + " k " + std::to_string(c.k) + " group " +
                                  std::to_string(c.group) + (has_bias ? ", bias" : "") + ", column " +
                                  std::to_string(r);
        if (r == 0 || r == c.n - 1) {
          EXPECT_EQ(dst[r], -7.0f) << where << ": written outside the range";
          continue;
        }
        double want = has_bias ? bias[r] : 0.0, magnitude = std::abs(want);
        for (size_t k = 0; k < c.k; ++k) {
          const double product = double{x[k]} * weights[r * c.k + k] * scales[r * groups + k / c.group];
          want += product;
          magnitude += std::abs(product);
        }
        EXPECT_NEAR(dst[r], want, 1e-6 * magnitude) << where;
      }
    }
  }
}

TEST_P(Int8FloatPath, NaNAndInfinityInTheRowPropagate) {
  const Path path = GetParam();
  constexpr size_t kN = 3, kK = 128;
  std::vector<int8_t> weights(kN * kK, 1);
  weights[2 * kK + 5] = 0; // column 2 multiplies the infinity by a zero weight
  std::vector<float> x(kK, 0.5f), scales(kN, 1.0f), dst(kN);
  x[5] = kInf;
  Int8FloatRowOperands operands;
  operands.row = x.data();
  operands.weights = weights.data();
  operands.scales = scales.data();
  operands.dst = dst.data();
  Int4MatrixShape shape;
  shape.isa = path.isa;
  shape.n = kN;
  shape.k = kK;
  shape.group = kK;
  int8_float_vector_matrix(shape, operands, 0, kN);
  EXPECT_EQ(dst[0], kInf);
  EXPECT_EQ(dst[1], kInf);
  EXPECT_TRUE(std::isnan(dst[2]));
  x[5] = kNaN;
  int8_float_vector_matrix(shape, operands, 0, kN);
  for (const float v : dst) {
    EXPECT_TRUE(std::isnan(v));
  }
}

} // namespace
} // namespace executorch::backends::onednn
