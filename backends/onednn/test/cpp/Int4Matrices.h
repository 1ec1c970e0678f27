// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// What the tests of the 4-bit one-row kernels (runtime/Int4VectorMatrix.h) share: a packed int4 matrix
// with its scales, the shapes that take each of the kernels' ways, zero points, and torchao's
// dequantize-then-linear in double.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../../runtime/Bf16.h"
#include "../../runtime/Int4VectorMatrix.h"

namespace executorch::backends::onednn::int4_testing {

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
    int4_column_terms(shape(RowIsa::scalar, false), packed.data(), scales.data(), terms.data(), 0, n);
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

struct Case {
  size_t n, k, group;
};

// The matrix's scales rounded to bf16: their raw bits, and the matrix with its f32 scales (and terms)
// set to the values those bits stand for.
inline std::vector<uint16_t> round_scales_to_bf16(Int4Matrix& matrix) {
  std::vector<uint16_t> bits(matrix.scales.size());
  for (size_t i = 0; i < bits.size(); ++i) {
    bits[i] = to_bf16_bits(matrix.scales[i]);
    matrix.scales[i] = from_bf16_bits(bits[i]);
  }
  matrix.pack();
  return bits;
}

inline bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof(a)) == 0;
}

// Every way the f32 kernels find a chunk's group, with and without a last 64 values past whole steps
// of 128, and shapes left to the scalar loop.
inline const std::vector<Case> kFloatCases{
    {16, 64, 32},    // only a last 64 values
    {37, 128, 32},   // groups of 32
    {64, 256, 64},   // groups of 64
    {8, 512, 128},   // a group per step of 128
    {5, 2048, 32},   // groups of 32, more than 16 of them
    {3, 96, 32},     // k % 64 != 0: the scalar loop
    {4, 2048, 2048}, // one group
    {4, 320, 32},    // groups of 32, and a last 64 values
    {6, 192, 64},    // an odd number of groups of 64, and a last 64 values
    {7, 384, 96},    // groups of other multiples of 32: AVX-512 lists them, AVX2 halves a block
    {5, 192, 96},    // the same, and a last 64 values
    {3, 320, 160},   // the same
    {3, 192, 192},   // a group per three 64s
    {9, 1024, 256},  // a group per two steps
    {3, 30, 6},      // groups of 6: the scalar loop
    {3, 30, 5},      // odd groups: the scalar loop by values
    {1, 64, 64},     // less than a cache line of weights
};

enum class ZeroPoints { none, random, extreme };

inline const char* zero_points_name(ZeroPoints kind) {
  return kind == ZeroPoints::none     ? "no zero points"
         : kind == ZeroPoints::random ? "random zero points"
                                      : "extreme zero points";
}

// [n, k / group] zero points: none, random in [-8, 7], or random with row 1 alternating -8 and 7 and
// row n - 2 all 7.
inline std::vector<int8_t> make_zero_points(const Int4Matrix& matrix, ZeroPoints kind, std::mt19937& generator) {
  const size_t groups = matrix.k / matrix.group;
  std::vector<int8_t> out(matrix.n * groups, 0);
  if (kind == ZeroPoints::none) {
    return out;
  }
  std::uniform_int_distribution<int> nibble(-8, 7);
  for (int8_t& z : out) {
    z = static_cast<int8_t>(nibble(generator));
  }
  if (kind == ZeroPoints::extreme) {
    for (size_t g = 0; g < groups; ++g) {
      if (matrix.n > 1) {
        out[groups + g] = static_cast<int8_t>(g % 2 == 0 ? -8 : 7);
      }
      if (matrix.n > 3) {
        out[(matrix.n - 2) * groups + g] = 7;
      }
    }
  }
  return out;
}

// dst[r] as torchao's dequantize_affine then linear, in double: x @ ((w - zero point) * scale)^T, and
// the sum of the products' magnitudes.
inline void float_reference(
    const Int4Matrix& matrix,
    const std::vector<float>& x,
    const int8_t* zero_points,
    const float* bias,
    size_t r,
    double& want,
    double& magnitude) {
  const size_t groups = matrix.k / matrix.group;
  want = 0.0;
  magnitude = 0.0;
  for (size_t k = 0; k < matrix.k; ++k) {
    const size_t g = r * groups + k / matrix.group;
    const int zero = zero_points != nullptr ? zero_points[g] : 0;
    const double weight = static_cast<double>(matrix.values[r * matrix.k + k] - zero) * matrix.scales[g];
    want += x[k] * weight;
    magnitude += std::fabs(x[k] * weight);
  }
  if (bias != nullptr) {
    want += bias[r];
    magnitude += std::fabs(bias[r]);
  }
}

inline Int4FloatRowOperands float_operands(
    const Int4Matrix& matrix,
    const std::vector<float>& x,
    const int8_t* zero_points,
    const float* bias,
    std::vector<float>& dst) {
  Int4FloatRowOperands operands;
  operands.row = x.data();
  operands.weights = matrix.packed.data();
  operands.scales = matrix.scales.data();
  operands.zero_points = zero_points;
  operands.bias = bias;
  operands.dst = dst.data();
  return operands;
}

inline std::string float_case_name(const Case& c, ZeroPoints zero_points, bool has_bias) {
  return "n " + std::to_string(c.n) + " k " + std::to_string(c.k) + " group " + std::to_string(c.group) + ", " +
         zero_points_name(zero_points) + (has_bias ? ", bias" : "");
}

} // namespace executorch::backends::onednn::int4_testing
