// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// The host row kernels (runtime/RowKernels.h) at every vector width this CPU runs (scalar, AVX2,
// AVX-512), against a double-precision reference: row lengths around the vector widths (tails), f32
// and bf16 sides, masks, causal rows, log-softmax, and the rows PyTorch gives NaN or zeros; the tanh
// GELU's and the sigmoid family's values, non-finite ones included; one row times a packed matrix
// (runtime/VectorMatrix.h); an int8 value rounded to its grid in f32 (runtime/HostLoops.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../../runtime/HostLoops.h"
#include "../../runtime/RowKernels.h"
#include "../../runtime/VectorMatrix.h"
#include "RunnableIsas.h"

namespace executorch::backends::onednn {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::string name(RowIsa isa) {
  return isa == RowIsa::avx512 ? "avx512" : isa == RowIsa::avx2 ? "avx2" : "scalar";
}

float widen(uint16_t bits) {
  const uint32_t widened = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &widened, sizeof(value));
  return value;
}

// A row stored as f32 or bf16 bytes; values() reads it back as f32.
struct Row {
  bool bf16;
  std::vector<uint8_t> bytes;
  Row(bool is_bf16, const std::vector<float>& values) : bf16(is_bf16), bytes(values.size() * (is_bf16 ? 2 : 4)) {
    for (size_t i = 0; i < values.size(); ++i) {
      if (bf16) {
        reinterpret_cast<uint16_t*>(bytes.data())[i] = to_bf16_bits(values[i]);
      } else {
        reinterpret_cast<float*>(bytes.data())[i] = values[i];
      }
    }
  }
  std::vector<float> values() const {
    const size_t count = bytes.size() / (bf16 ? 2 : 4);
    std::vector<float> out(count);
    for (size_t i = 0; i < count; ++i) {
      out[i] = bf16 ? widen(reinterpret_cast<const uint16_t*>(bytes.data())[i])
                    : reinterpret_cast<const float*>(bytes.data())[i];
    }
    return out;
  }
};

// PyTorch's softmax / log_softmax of x (+ mask) over the first `valid` values, in double.
std::vector<double> reference_softmax(const std::vector<float>& x, const float* mask, size_t valid, bool log) {
  double max = -kInf;
  for (size_t i = 0; i < valid; ++i) {
    max = std::max(max, static_cast<double>(x[i]) + (mask != nullptr ? mask[i] : 0.0f));
  }
  double sum = 0.0;
  for (size_t i = 0; i < valid; ++i) {
    sum += std::exp(static_cast<double>(x[i]) + (mask != nullptr ? mask[i] : 0.0f) - max);
  }
  std::vector<double> out(x.size(), 0.0);
  for (size_t i = 0; i < valid; ++i) {
    const double shifted = static_cast<double>(x[i]) + (mask != nullptr ? mask[i] : 0.0f) - max;
    out[i] = log ? shifted - std::log(sum) : std::exp(shifted) / sum;
  }
  return out;
}

std::vector<float> run_softmax(RowIsa isa, SoftmaxRows rows, const Row& src, bool dst_bf16, const float* mask) {
  rows.isa = isa;
  rows.src_bf16 = src.bf16;
  rows.dst_bf16 = dst_bf16;
  Row dst(dst_bf16, std::vector<float>(rows.rows * rows.extent, -7.0f));
  softmax_rows(rows, src.bytes.data(), dst.bytes.data(), mask, 0, rows.rows);
  return dst.values();
}

TEST(RowKernels, SoftmaxMatchesTheReferenceAtEveryWidthAndTail) {
  std::mt19937 generator(7);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (const RowIsa isa : runnable_isas()) {
    for (const size_t extent : {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 197}) {
      for (const bool src_bf16 : {false, true}) {
        for (const bool dst_bf16 : {false, true}) {
          for (const bool log : {false, true}) {
            for (const bool masked : {false, true}) {
              std::vector<float> x(extent), mask(extent);
              for (size_t i = 0; i < extent; ++i) {
                x[i] = normal(generator);
                mask[i] = masked && i % 5 == 1 ? -kInf : normal(generator);
              }
              mask[0] = 0.0f; // every row keeps a key
              const Row src(src_bf16, x);
              SoftmaxRows rows;
              rows.rows = 1;
              rows.extent = extent;
              rows.log = log;
              rows.has_mask = masked;
              const std::vector<float> got = run_softmax(isa, rows, src, dst_bf16, masked ? mask.data() : nullptr);
              const std::vector<double> want =
                  reference_softmax(src.values(), masked ? mask.data() : nullptr, extent, log);
              for (size_t i = 0; i < extent; ++i) {
                const double tolerance = (dst_bf16 ? 8e-3 : 2e-6) * std::max(1.0, std::fabs(want[i]));
                if (std::isinf(want[i])) {
                  EXPECT_EQ(got[i], want[i]);
                } else {
                  EXPECT_NEAR(got[i], want[i], tolerance)
                      << name(isa) << " extent " << extent << " value " << i << (src_bf16 ? " bf16 src" : "")
                      << (dst_bf16 ? " bf16 dst" : "") << (log ? " log" : "") << (masked ? " masked" : "");
                }
              }
            }
          }
        }
      }
    }
  }
}

TEST(RowKernels, ExponentialsFarBelowTheMaxUnderflowToZeroAsInDouble) {
  const std::vector<float> x = {0.0f, -20.0f, -87.0f, -88.5f, -100.0f, -103.9f, -104.0f, -150.0f, -1e30f, -kInf, 1.0f};
  for (const RowIsa isa : runnable_isas()) {
    SoftmaxRows rows;
    rows.rows = 1;
    rows.extent = x.size();
    const std::vector<float> got = run_softmax(isa, rows, Row(false, x), false, nullptr);
    const std::vector<double> want = reference_softmax(x, nullptr, x.size(), false);
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 1e-6 * want[i] + 1e-44) << name(isa) << " x = " << x[i];
    }
  }
}

TEST(RowKernels, NonFiniteRowsBecomeNaNOrZerosAsPyTorchGives) {
  for (const RowIsa isa : runnable_isas()) {
    for (const size_t extent : {5, 8, 21}) {
      SoftmaxRows rows;
      rows.rows = 4;
      rows.extent = extent;
      std::vector<float> x(4 * extent, 1.0f);
      x[0 * extent + extent - 1] = std::numeric_limits<float>::quiet_NaN(); // row 0: NaN
      x[1 * extent + extent / 2] = kInf;                                    // row 1: +inf - inf
      for (size_t i = 0; i < extent; ++i) {
        x[2 * extent + i] = -kInf; // row 2: fully masked
      }
      for (const bool zero_fully_masked : {false, true}) {
        rows.zero_fully_masked = zero_fully_masked;
        const std::vector<float> got = run_softmax(isa, rows, Row(false, x), false, nullptr);
        for (size_t i = 0; i < extent; ++i) {
          EXPECT_TRUE(std::isnan(got[i])) << name(isa) << " NaN row, value " << i;
          EXPECT_TRUE(std::isnan(got[extent + i])) << name(isa) << " +inf row, value " << i;
          if (zero_fully_masked) {
            EXPECT_EQ(got[2 * extent + i], 0.0f) << name(isa) << " fully masked row, value " << i;
          } else {
            EXPECT_TRUE(std::isnan(got[2 * extent + i])) << name(isa) << " fully masked row, value " << i;
          }
          EXPECT_NEAR(got[3 * extent + i], 1.0 / static_cast<double>(extent), 1e-6) << name(isa);
        }
      }
    }
  }
}

TEST(RowKernels, CausalRowsSeeTheirKeysAndWriteZerosAfterThem) {
  const size_t extent = 19;
  for (const RowIsa isa : runnable_isas()) {
    SoftmaxRows rows;
    rows.rows = extent;
    rows.extent = extent;
    rows.causal = true;
    rows.block_rows = extent;
    std::vector<float> x(extent * extent);
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<float>(i % 11) * 0.37f;
    }
    const std::vector<float> got = run_softmax(isa, rows, Row(false, x), false, nullptr);
    for (size_t query = 0; query < extent; ++query) {
      const std::vector<float> row(x.begin() + query * extent, x.begin() + (query + 1) * extent);
      const std::vector<double> want = reference_softmax(row, nullptr, query + 1, false);
      for (size_t key = 0; key < extent; ++key) {
        EXPECT_NEAR(got[query * extent + key], want[key], 2e-6) << name(isa) << " query " << query << " key " << key;
      }
    }
  }
}

TEST(RowKernels, RmsNormMatchesTheReferenceAtEveryWidthAndTail) {
  std::mt19937 generator(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (const RowIsa isa : runnable_isas()) {
    for (const size_t extent : {1, 7, 8, 9, 17, 64, 100}) {
      for (const bool bf16 : {false, true}) {
        for (const bool weighted : {false, true}) {
          std::vector<float> x(2 * extent), weight(extent);
          for (float& value : x) {
            value = normal(generator);
          }
          for (float& value : weight) {
            value = normal(generator);
          }
          const Row src(bf16, x);
          Row dst(bf16, std::vector<float>(2 * extent, -7.0f));
          RmsNormRows rows;
          rows.isa = isa;
          rows.rows = 2;
          rows.extent = extent;
          rows.src_bf16 = rows.dst_bf16 = bf16;
          rows.has_weight = weighted;
          rows.eps = 1e-5f;
          rms_norm_rows(rows, src.bytes.data(), dst.bytes.data(), weight.data(), 0, 2);
          const std::vector<float> in = src.values(), got = dst.values();
          for (size_t row = 0; row < 2; ++row) {
            double squares = 0.0;
            for (size_t i = 0; i < extent; ++i) {
              squares += static_cast<double>(in[row * extent + i]) * in[row * extent + i];
            }
            const double scale = 1.0 / std::sqrt(squares / static_cast<double>(extent) + 1e-5);
            for (size_t i = 0; i < extent; ++i) {
              const double want = in[row * extent + i] * scale * (weighted ? weight[i] : 1.0);
              EXPECT_NEAR(got[row * extent + i], want, (bf16 ? 8e-3 : 2e-6) * std::max(1.0, std::fabs(want)))
                  << name(isa) << " extent " << extent << " row " << row << " value " << i;
            }
          }
        }
      }
    }
  }
}

// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), in double, as PyTorch's tanh GELU (and GPT-2's
// written-out one) defines it.
double reference_gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

// The sigmoid family and GELU in double, with oneDNN's alpha and beta, as PyTorch's modules lower: SiLU
// is swish(1), Hardsigmoid and Hardswish (1/6, 1/2).
double logistic(double z) {
  return 1.0 / (1.0 + std::exp(-z));
}
double hard(double alpha, double beta, double z) {
  return std::min(std::max(alpha * z + beta, 0.0), 1.0);
}

struct ActivationCase {
  Activation activation;
  float alpha, beta;
  const char* label;
  double (*reference)(double alpha, double beta, double x);
};
const ActivationCase kActivations[] = {
    {Activation::logistic, 0.0f, 0.0f, "logistic", [](double, double, double x) { return logistic(x); }},
    {Activation::swish, 1.0f, 0.0f, "swish", [](double a, double, double x) { return x * logistic(a * x); }},
    {Activation::hardsigmoid,
     1.0f / 6.0f,
     0.5f,
     "hardsigmoid",
     [](double a, double b, double x) { return hard(a, b, x); }},
    {Activation::hardswish,
     1.0f / 6.0f,
     0.5f,
     "hardswish",
     [](double a, double b, double x) { return x * hard(a, b, x); }},
    {Activation::gelu_tanh, 0.0f, 0.0f, "gelu_tanh", [](double, double, double x) { return reference_gelu_tanh(x); }},
    {Activation::gelu_erf,
     0.0f,
     0.0f,
     "gelu_erf",
     [](double, double, double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }},
};

TEST(RowKernels, ActivationsMatchTheReferenceAtEveryWidthAndTail) {
  for (const RowIsa isa : runnable_isas()) {
    for (const ActivationCase& c : kActivations) {
      for (const size_t count : {1, 7, 8, 9, 17, 100}) {
        std::vector<float> x(count), got(count + 1, -7.0f); // one value more: it stays untouched
        for (size_t i = 0; i < count; ++i) {
          x[i] = -12.0f + 24.0f * static_cast<float>(i) / static_cast<float>(count);
        }
        activation_values(isa, c.activation, c.alpha, c.beta, false, x.data(), got.data(), 0, count);
        for (size_t i = 0; i < count; ++i) {
          const double want = c.reference(c.alpha, c.beta, x[i]);
          EXPECT_NEAR(got[i], want, 2e-6 * std::max(1.0, std::fabs(want)))
              << name(isa) << " " << c.label << " count " << count << " x " << x[i];
        }
        EXPECT_EQ(got[count], -7.0f) << name(isa) << " " << c.label << " wrote past its range";
      }
    }
  }
}

TEST(RowKernels, ActivationsOfNonFiniteAndHugeValuesAreWhatPyTorchGives) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x{nan, kInf, -kInf, 200.0f, -200.0f, 0.0f, 1e20f, -1e20f};
  // PyTorch's sigmoid, silu, hardsigmoid, hardswish and both gelus of each (silu, hardswish and gelu of
  // -inf: -inf * 0).
  const float want[6][8] = {
      {nan, 1.0f, 0.0f, 1.0f, 0.0f, 0.5f, 1.0f, 0.0f},
      {nan, kInf, nan, 200.0f, -0.0f, 0.0f, 1e20f, -0.0f},
      {nan, 1.0f, 0.0f, 1.0f, 0.0f, 0.5f, 1.0f, 0.0f},
      {nan, kInf, nan, 200.0f, -0.0f, 0.0f, 1e20f, -0.0f},
      {nan, kInf, nan, 200.0f, -0.0f, 0.0f, 1e20f, -0.0f},
      {nan, kInf, nan, 200.0f, -0.0f, 0.0f, 1e20f, -0.0f},
  };
  for (const RowIsa isa : runnable_isas()) {
    for (size_t a = 0; a < std::size(want); ++a) {
      const ActivationCase& c = kActivations[a];
      std::vector<float> got(x.size(), -7.0f);
      activation_values(isa, c.activation, c.alpha, c.beta, false, x.data(), got.data(), 0, x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        if (std::isnan(want[a][i])) {
          EXPECT_TRUE(std::isnan(got[i])) << name(isa) << " " << c.label << " of " << x[i] << " = " << got[i];
        } else {
          EXPECT_EQ(got[i], want[a][i]) << name(isa) << " " << c.label << " of " << x[i];
          EXPECT_EQ(std::signbit(got[i]), std::signbit(want[a][i])) << name(isa) << " " << c.label << " of " << x[i];
        }
      }
    }
  }
}

// bf16 in and out (a bf16 decode step's SiLU): every bf16 pattern, at every width and tail, gives the
// f32 kernel's result on the widened value rounded to nearest even, a NaN as a NaN.
TEST(RowKernels, ActivationsOfBf16ValuesAreTheF32ResultsRounded) {
  std::vector<uint16_t> x(65536 + 13);
  std::vector<float> widened(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<uint16_t>(i * 40503);
    widened[i] = widen(x[i]);
  }
  for (const RowIsa isa : runnable_isas()) {
    for (const ActivationCase& c : kActivations) {
      std::vector<float> wide(x.size());
      activation_values(isa, c.activation, c.alpha, c.beta, false, widened.data(), wide.data(), 0, x.size());
      for (const size_t end : {x.size(), size_t{5}, size_t{21}}) {
        std::vector<uint16_t> got(end + 1, 7);
        activation_values(isa, c.activation, c.alpha, c.beta, true, x.data(), got.data(), 1, end);
        const std::string where = name(isa) + " " + c.label + " end " + std::to_string(end);
        EXPECT_EQ(got[0], 7) << where << ": written before the range";
        EXPECT_EQ(got[end], 7) << where << ": written past the range";
        for (size_t i = 1; i < end; ++i) {
          if (std::isnan(wide[i])) {
            ASSERT_TRUE(std::isnan(widen(got[i]))) << where << " of " << widened[i];
          } else {
            ASSERT_EQ(got[i], to_bf16_bits(wide[i])) << where << " of " << widened[i];
          }
        }
      }
    }
  }
}

// Every bf16 pattern and f32 values around each rounding tie, through each width, at every tail:
// convert_values() and binary_values_bf16() give what the scalar conversions give, bit for bit.
TEST(RowKernels, Bf16ConversionsAndBinariesRoundToNearestEvenAtEveryWidthAndTail) {
  std::vector<uint16_t> narrow(65536 + 13);
  std::vector<float> wide(narrow.size());
  for (size_t i = 0; i < narrow.size(); ++i) {
    narrow[i] = static_cast<uint16_t>(i);
    const uint32_t bits =
        (static_cast<uint32_t>(i * 40503) << 16) | (i % 3 == 0 ? 0x8000u : (i * 2654435761u) & 0xFFFFu);
    std::memcpy(&wide[i], &bits, sizeof(bits));
  }
  for (const RowIsa isa : runnable_isas()) {
    for (const size_t end : {narrow.size(), size_t{5}, size_t{21}}) {
      const std::string where = "isa " + std::to_string(static_cast<int>(isa)) + " end " + std::to_string(end);
      std::vector<uint16_t> to_bf16(end, 7);
      std::vector<float> to_f32(end, 7.0f);
      convert_values(isa, true, wide.data(), to_bf16.data(), 1, end);
      convert_values(isa, false, narrow.data(), to_f32.data(), 1, end);
      EXPECT_EQ(to_bf16[0], 7) << where << ": written before the range";
      EXPECT_EQ(to_f32[0], 7.0f) << where << ": written before the range";
      for (size_t i = 1; i < end; ++i) {
        ASSERT_EQ(to_bf16[i], to_bf16_bits(wide[i])) << where << " at " << i;
        const float want = from_bf16_bits(narrow[i]);
        ASSERT_EQ(std::memcmp(&to_f32[i], &want, sizeof(want)), 0) << where << " at " << i;
      }
      for (const BinaryAlg alg : {BinaryAlg::Add, BinaryAlg::Sub, BinaryAlg::Mul, BinaryAlg::Div}) {
        std::vector<uint16_t> other(end), got(end);
        for (size_t i = 0; i < end; ++i) {
          other[i] = static_cast<uint16_t>(i * 104729 + 5);
        }
        binary_values_bf16(isa, static_cast<int64_t>(alg), narrow.data(), other.data(), got.data(), end);
        std::vector<float> x(end), y(end), z(end);
        for (size_t i = 0; i < end; ++i) {
          x[i] = from_bf16_bits(narrow[i]);
          y[i] = from_bf16_bits(other[i]);
        }
        binary_values(alg, x.data(), y.data(), z.data(), end);
        for (size_t i = 0; i < end; ++i) {
          ASSERT_EQ(got[i], to_bf16_bits(z[i])) << where << " alg " << static_cast<int>(alg) << " at " << i;
        }
      }
    }
  }
}

// An int8 value held in f32 (GraphBuilder::holds_dequantized_int8()): what quantize_per_tensor then
// dequantize_per_tensor give, x * (1 / scale) rounded half to even, clamped to the type's range less
// the zero point, times the scale; over ranges that start and end at every offset of a vector.
TEST(HostLoops, Int8GridIsQuantizeThenDequantize) {
  HostLoop::Int8Grid grid;
  const float scale = 0.03125f; // a power of two: x = tie * scale gives x * (1 / scale) == tie exactly
  const int zero_point = 131;
  grid.reciprocal = static_cast<float>(1.0 / static_cast<double>(scale));
  grid.lowest = 0.0f - zero_point;
  grid.highest = 255.0f - zero_point;
  grid.scale = scale;
  std::mt19937 random(7);
  std::uniform_real_distribution<float> spread(-5.0f, 5.0f);
  std::vector<float> x(203);
  for (float& value : x) {
    value = spread(random);
  }
  // Ties (k + 0.5 steps, k even and odd) round to the even neighbour; values beyond the range clamp.
  const float ties[] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 123.5f, -130.5f, 124.5f, -131.5f};
  for (size_t i = 0; i < sizeof(ties) / sizeof(ties[0]); ++i) {
    x[3 * i] = ties[i] * scale;
  }
  x[100] = 1e30f;
  x[101] = -1e30f;
  x[102] = kInf;
  x[103] = -kInf;
  x[104] = std::numeric_limits<float>::quiet_NaN();
  const auto expected = [&](float value) {
    const float q = std::nearbyint(value * grid.reciprocal) + static_cast<float>(zero_point);
    return (std::min(std::max(q, 0.0f), 255.0f) - static_cast<float>(zero_point)) * scale;
  };
  for (size_t begin : {size_t{0}, size_t{1}, size_t{7}}) {
    for (size_t end : {x.size(), x.size() - 1, x.size() - 9}) {
      std::vector<float> y(x.size(), -7.0f);
      round_to_int8_grid(grid, x.data(), y.data(), begin, end);
      for (size_t i = 0; i < x.size(); ++i) {
        if (i < begin || i >= end) {
          EXPECT_EQ(y[i], -7.0f) << i;
        } else if (std::isnan(x[i])) {
          EXPECT_TRUE(std::isnan(y[i])) << i;
        } else {
          EXPECT_EQ(y[i], expected(x[i])) << "x[" << i << "] = " << x[i];
        }
      }
    }
  }
}

// weights [k][n] -> oneDNN's BA16a<W>b (W = shape.packed_width): blocks of W columns, each k rows padded
// to a multiple of 16, the columns past n zero; with paired_rows BA16a<W>b2a: each block k / 2 rows of
// W pairs (row 2i, row 2i + 1), k padded to a multiple of 32.
std::vector<float> pack_columns(const std::vector<float>& weights, const VectorMatrixShape& shape) {
  const size_t width = shape.packed_width, packed_blocks = (shape.n + width - 1) / width;
  std::vector<float> packed(packed_blocks * shape.padded_k() * width, 0.0f);
  for (size_t k = 0; k < shape.k; ++k) {
    for (size_t c = 0; c < shape.n; ++c) {
      const size_t block = c / width * shape.padded_k() * width;
      const size_t at =
          shape.paired_rows ? block + (k / 2 * width + c % width) * 2 + k % 2 : block + k * width + c % width;
      packed[at] = weights[k * shape.n + c];
    }
  }
  return packed;
}

TEST(VectorMatrix, MatchesADoubleReferenceForEverySplitOfTheBlocks) {
  std::mt19937 generator(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const std::vector<std::pair<size_t, size_t>> sizes{{1, 1}, {5, 17}, {16, 16}, {37, 100}, {64, 129}, {300, 70}};
  for (const RowIsa isa : runnable_isas()) {
    for (const bool bf16 : {false, true}) {
      for (const auto& [k, n] : sizes) {
        // Layouts: the kernels' own (16 columns), and the wider ones a dynamic program shares with oneDNN's
        // several-row kernels (bf16: also in pairs of rows, as for AMX).
        for (const auto& [packed_width, paired_rows] :
             std::vector<std::pair<size_t, bool>>{{16, false}, {32, false}, {64, false}, {32, true}, {64, true}}) {
          if (paired_rows && !bf16) {
            continue;
          }
          for (const bool has_bias : {false, true}) {
            VectorMatrixShape shape;
            shape.isa = isa;
            shape.k = k;
            shape.n = n;
            shape.bf16 = shape.dst_bf16 = bf16;
            shape.packed_width = packed_width;
            shape.paired_rows = paired_rows;
            std::vector<float> row_values(k), weight_values(k * n), bias(n);
            for (float& v : row_values)
              v = uniform(generator);
            for (float& v : weight_values)
              v = uniform(generator);
            for (float& v : bias)
              v = uniform(generator);
            const Row row(bf16, row_values);
            const Row weights(bf16, weight_values);
            const Row packed(bf16, pack_columns(weights.values(), shape));
            const std::vector<float> x = row.values(), w = weights.values();
            // The threads' split points fall anywhere, also inside a group the kernel takes together.
            for (const size_t split : {size_t{0}, shape.blocks() / 3, shape.blocks()}) {
              Row dst(bf16, std::vector<float>(n + 1, -7.0f)); // one value more: it stays untouched
              const VectorMatrixOperands operands{
                  row.bytes.data(), packed.bytes.data(), has_bias ? bias.data() : nullptr, dst.bytes.data()};
              vector_times_matrix(shape, operands, 0, split);
              vector_times_matrix(shape, operands, split, shape.blocks());
              const std::vector<float> got = dst.values();
              for (size_t c = 0; c < n; ++c) {
                double want = has_bias ? bias[c] : 0.0, magnitude = std::fabs(want);
                for (size_t i = 0; i < k; ++i) {
                  want += static_cast<double>(x[i]) * w[i * n + c];
                  magnitude += std::fabs(static_cast<double>(x[i]) * w[i * n + c]);
                }
                // bf16: the f32 sum's one rounding to 8 bits of mantissa.
                const double tolerance =
                    bf16 ? 4e-3 * std::fabs(want) + 1e-6 * (1.0 + magnitude) : 1e-6 * (1.0 + magnitude);
                EXPECT_NEAR(got[c], want, tolerance)
                    << name(isa) << (bf16 ? " bf16" : " f32") << " k " << k << " n " << n << " width " << packed_width
                    << " column " << c << " split " << split;
              }
              EXPECT_EQ(got[n], -7.0f) << name(isa) << " k " << k << " n " << n << " wrote past the row";
            }
          }
        }
      }
    }
  }
}

TEST(VectorMatrix, NonFiniteValuesReachTheColumnsTheyTouch) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const RowIsa isa : runnable_isas()) {
    for (const bool bf16 : {false, true}) {
      VectorMatrixShape shape;
      shape.isa = isa;
      shape.k = 20;
      shape.n = 40;
      shape.bf16 = shape.dst_bf16 = bf16;
      std::vector<float> row_values(shape.k, 1.0f), weights(shape.k * shape.n, 0.5f);
      weights[3 * shape.n + 5] = nan;    // column 5
      weights[4 * shape.n + 33] = kInf;  // column 33, a partial block
      weights[6 * shape.n + 20] = -kInf; // with the +inf below: inf - inf
      weights[7 * shape.n + 20] = kInf;
      const Row packed(bf16, pack_columns(weights, shape));
      Row row(bf16, row_values);
      Row dst(bf16, std::vector<float>(shape.n, 0.0f));
      vector_times_matrix(shape, {row.bytes.data(), packed.bytes.data(), nullptr, dst.bytes.data()}, 0, shape.blocks());
      std::vector<float> got = dst.values();
      for (size_t c = 0; c < shape.n; ++c) {
        if (c == 5 || c == 20) {
          EXPECT_TRUE(std::isnan(got[c])) << name(isa) << " column " << c << " = " << got[c];
        } else if (c == 33) {
          EXPECT_EQ(got[c], kInf) << name(isa);
        } else {
          EXPECT_FLOAT_EQ(got[c], 10.0f) << name(isa) << " column " << c;
        }
      }
      row_values[11] = nan; // a NaN in the row reaches every column
      row = Row(bf16, row_values);
      vector_times_matrix(shape, {row.bytes.data(), packed.bytes.data(), nullptr, dst.bytes.data()}, 0, shape.blocks());
      got = dst.values();
      for (size_t c = 0; c < shape.n; ++c) {
        EXPECT_TRUE(std::isnan(got[c])) << name(isa) << (bf16 ? " bf16" : " f32") << " column " << c;
      }
    }
  }
}

} // namespace
} // namespace executorch::backends::onednn
