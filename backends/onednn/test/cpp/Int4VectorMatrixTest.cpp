// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// The 8da4w kernels (runtime/Int4VectorMatrix.h): the activations' quantization bit for bit against
// torchao's formula written out in f32; the int4 row-times-matrix on every path this CPU runs (scalar,
// AVX2 with and without AVX-VNNI, AVX-512 with and without AVX512-VNNI) against a double reference,
// over the shapes that pick each of its ways of scaling; the zero-point helpers exactly.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../../runtime/Int4VectorMatrix.h"
#include "../../runtime/RowKernels.h"

namespace executorch::backends::onednn {
namespace {

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

// n rows of k int4 values, packed as the header states, with their grouped scales.
struct Int4Matrix {
  size_t n, k, group;
  std::vector<int8_t> values; // [n, k], in [-8, 7]
  std::vector<uint8_t> packed;
  std::vector<float> scales;
  std::vector<float> terms;
  Int4Matrix(size_t rows, size_t columns, size_t group_size, std::mt19937& generator)
      : n(rows),
        k(columns),
        group(group_size),
        values(rows * columns),
        packed(rows * columns / 2),
        scales(rows * columns / group_size),
        terms(rows) {
    std::uniform_int_distribution<int> nibble(-8, 7);
    std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
    for (int8_t& v : values) {
      v = static_cast<int8_t>(nibble(generator));
    }
    for (float& s : scales) {
      s = scale(generator);
    }
    pack();
  }
  void pack() {
    for (size_t i = 0; i < packed.size(); ++i) {
      packed[i] = static_cast<uint8_t>((values[2 * i] & 0x0F) | ((values[2 * i + 1] & 0x0F) << 4));
    }
    int4_column_terms(shape(RowIsa::scalar, false), packed.data(), scales.data(), terms.data());
  }
  Int4MatrixShape shape(RowIsa isa, bool vnni) const {
    Int4MatrixShape out;
    out.isa = isa;
    out.vnni = vnni;
    out.n = n;
    out.k = k;
    out.group = group;
    return out;
  }
};

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

struct Case {
  size_t n, k, group;
};

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
  std::vector<float> got = dst;
  subtract_zero_point_terms(got.data(), rows, n, row_scales.data(), zero_points.data(), terms.data(), 1, 4);
  for (size_t m = 0; m < rows; ++m) {
    const float factor = row_scales[m] * static_cast<float>(zero_points[m]);
    for (size_t r = 0; r < n; ++r) {
      const float want = m >= 1 && m < 4 ? dst[m * n + r] - factor * terms[r] : dst[m * n + r];
      EXPECT_EQ(got[m * n + r], want) << "row " << m << " column " << r;
    }
  }
}

} // namespace
} // namespace executorch::backends::onednn
