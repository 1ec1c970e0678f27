// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// Work oneDNN has no primitive for, run on the calling thread between primitives (the CPU stream
// executes in order and synchronously, so the data is there).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>

#include "Bf16.h"
#include "CachedAttention.h"
#include "ExactInt8Matmul.h"
#include "IndexKernels.h"
#include "Int4VectorMatrix.h"
#include "NanKernels.h"
#include "Rotary.h"
#include "RowKernels.h"
#include "Schema.h"
#include "VectorMatrix.h"
#include "WidenedInt4Matmul.h"
#include "Winograd.h"

namespace executorch::backends::onednn {

struct HostLoop {
  enum class Kind : unsigned char {
    Fill,                // dst[:] = value
    ZeroFullyMaskedRows, // dst row = 0 where every src entry along the row is -inf
    QuantizeRows,        // dst (s8) = src (f32) quantized per row, each row's scale into aux (f32)
    Softmax,             // dst = softmax of src along contiguous rows (RowKernels.h), aux: the mask when it has one
    RmsNorm,             // dst = RMS normalization of src along contiguous rows, aux: the weight when it has one
    Unary,               // dst = unary(src), f32, elementwise
    Clamp,               // dst = min(max(src, value), upper), elementwise, a NaN kept; f32 or bf16 (`bf16`)
    Int8Grid,            // dst = src quantized to int8 and dequantized again (`int8_grid`), f32, elementwise
    Activation,          // dst = `activation` (RowKernels.h) of src, alpha `value`, beta `upper`; f32 or bf16
    AdaptivePool,        // dst = PyTorch's adaptive max or average pooling of src, f32, plain
    ArgReduce,           // dst (int64) = argmax or argmin of src (f32) along a dim
    Gather,              // dst = rows of src picked by the int64 indices in aux
    Elementwise,         // dst = f(src, aux[, first of more sources]) under broadcasting (IndexKernels.h)
    IndexPut,            // dst = src with the points the more sources (int64) pick set from aux
    // The NaN guards (NanKernels.h), no dst: unless a graph input or a constant holds a NaN or an
    // infinity, the next `skip` steps (the fast path and its closing Jump) run; otherwise they are
    // skipped for the exact path after them.
    NonFiniteBranch,
    Jump,           // no dst: skips the next `skip` steps (the exact path of the branch before it)
    KeepNan,        // dst = NaN where src is NaN, elementwise, in place; f32 or bf16 (`bf16`)
    MaxPool,        // dst = PyTorch's max pooling of src, f32, plain
    ReduceExtremum, // dst = max or min of src over the dims where dst has size 1, f32, plain
    WinogradInput,  // dst = the transformed 6x6 tiles of src (Winograd.h)
    WinogradOutput, // dst = the outputs of the products in src, plus the bias in aux and the residual in
                    // the first more source when given
    VectorMatrix,   // dst = src (one f32 or bf16 row) times the packed weights in aux, plus the bias in the
                    // first more source when given (VectorMatrix.h)
    // torchao's per-row int8 quantization (Int4VectorMatrix.h): `outer` rows of `extent` f32 values
    // in src into s8 dst, each row's scale (f32) and zero point (int32) into aux [2, outer].
    QuantizeRowsAffine,
    DequantizeRowsAffine, // dst (f32) = (src (s8) - zero point) * scale, per row, aux as QuantizeRowsAffine wrote it
    CenterRowsAffine,     // dst (bf16) = src (s8) - zero point, per row (exact: |q - z| <= 255), aux as above
    // dst = the quantized row in src (aux: its scale and zero point; `outer` 1) times int4 weights: the
    // more sources are the weights, their group scales, the column terms and the bias when given.
    Int4VectorMatrix,
    // dst = the f32 row in src (bf16 with `int4_bf16_row`; dst bf16 with `int4_bf16_result`) times
    // int4 weights: the more sources are the weights, their group scales, then the bias and the zero
    // points when given (`int4_bias`, `int4_zero_points`).
    Int4FloatVectorMatrix,
    // dst = the f32 row in src times int8 weights: the more sources are the weights, their group
    // scales, then the bias when given (`int4_bias`).
    Int8FloatVectorMatrix,
    // dst [outer, extent, inner bytes] = the `extent` sources (src, aux, then the more sources), each
    // [outer, inner bytes], side by side: a concat whose pieces are a few bytes each (a rotary
    // embedding's pairs), which oneDNN's concat copies one element at a time.
    Interleave,
    // dst [outer, n] = the quantized rows in src, as u8 (q + 128; aux: their scales), times int4 weights
    // widened to s8 (WidenedInt4Matmul.h), zero points ignored (a ZeroPointTerms loop follows); the more sources
    // are the weights, their group scales, the column scales, the scratch and the bias when the
    // primitives take one.
    WidenedInt4Matmul,
    ZeroPointTerms,  // dst [outer, extent] -= scale * (zero point of its row (aux, as above) + value) *
                     // terms[column] (the first more source), in place
    CachedAttention, // dst = the cached attention (CachedAttention.h) of the queries in src over the keys
                     // and values in the more sources, from the start position in aux (one int64)
    // dst [outer, inner] = the mean over `extent` pixels of channels-last f32 src [outer, extent, inner],
    // aux the partial sums (mean_chunks() per image).
    GlobalAveragePool,
    Rotary, // dst = the interleaved rotary embedding (Rotary.h) of src; aux the cos table, the more source sin
    // dst = src `binary` aux, f32 (or bf16: `bf16`, `isa`), elementwise over operands of one plain shape:
    // a decode step's residual adds and gate products, whose oneDNN call costs more than their few
    // thousand values.
    Binary,
    Copy, // dst = src, `extent` bytes: a reorder between identical plain layouts (an output viewing an input)
    // dst = src in the other of f32 and bf16 (`bf16`: dst is bf16), convert_values(): a small reorder
    // between plain layouts that differ in type only (a bf16 decode step's f32 results and inputs).
    Convert,
    // dst (f32) = the int8 rows in src times the packed int8 weights in aux through exact 16-bit
    // products (ExactInt8Matmul.h), the first more source the scales per column, the second the bias
    // when given.
    ExactInt8Matmul,
  };
  enum class Unary : unsigned char { Round, Floor, Ceil, Trunc, Log1p }; // by EltwiseAlg: Algorithms.h
  // Int8Grid: round_half_even(x * reciprocal) clamped to [lowest, highest] (the int8 type's range less
  // the zero point), times scale.
  struct Int8Grid {
    float reciprocal = 1.0f;
    float lowest = 0.0f;
    float highest = 0.0f;
    float scale = 1.0f;
  };
  Kind kind = Kind::Fill;
  float value = 0.0f;
  bool bf16 = false; // Fill, Clamp, Activation, KeepNan: src and dst hold bf16 (ZeroFullyMaskedRows: f32);
                     // Convert: dst holds bf16, src f32; Binary: all three bf16
  // QuantizeRowsAffine: q + 128 stored as u8 (the zero points stay torchao's): oneDNN's VNNI matmul
  // takes per-row scales with u8 rows only.
  bool u8_rows = false;
  RowIsa isa = RowIsa::scalar;                  // Activation, Convert, Binary (bf16)
  Activation activation = Activation::logistic; // Activation
  float upper = 0.0f;                           // Clamp, Activation (beta)
  Int8Grid int8_grid;                           // Int8Grid
  // Rows for ZeroFullyMaskedRows: plain [outer, extent, inner], a row runs along `extent`.
  // QuantizeRows: `outer` rows of `extent` contiguous values (inner = 1).
  size_t outer = 0;
  size_t extent = 0;
  size_t inner = 0;
  SoftmaxRows softmax;               // Softmax
  RmsNormRows rms_norm;              // RmsNorm
  Unary unary = Unary::Floor;        // Unary
  BinaryAlg binary = BinaryAlg::Add; // Binary: Add, Sub, Mul or Div (binary_values())
  // AdaptivePool: `outer` planes (N * C) of in[] -> out[] (depth, height, width; 1 where absent).
  size_t in[3] = {1, 1, 1};
  size_t out[3] = {1, 1, 1};
  bool max = false;
  ArgReduceRows arg_reduce;              // ArgReduce
  GatherRows gather;                     // Gather
  ElementwiseLoop elementwise;           // Elementwise
  IndexPutLoop index_put;                // IndexPut
  size_t skip = 0;                       // NonFiniteBranch, Jump
  MaxPoolPlanes max_pool;                // MaxPool
  ExtremumReduction extremum;            // ReduceExtremum
  WinogradShape winograd;                // WinogradInput, WinogradOutput
  VectorMatrixShape vector_matrix;       // VectorMatrix
  Int4MatrixShape int4;                  // Int4VectorMatrix, Int4FloatVectorMatrix, Int8FloatVectorMatrix
  bool int4_bias = false;                // Int4VectorMatrix, Int4FloatVectorMatrix, Int8FloatVectorMatrix
  bool int4_zero_points = false;         // Int4FloatVectorMatrix
  bool int4_bf16_row = false;            // Int4FloatVectorMatrix: int4_bf16_vector_matrix's bf16 row
  bool int4_bf16_result = false;         // Int4FloatVectorMatrix with int4_bf16_row: its dst in bf16
  bool int4_bf16_scales = false;         // Int4VectorMatrix, Int4FloatVectorMatrix, WidenedInt4Matmul
  CachedAttentionShape cached_attention; // CachedAttention
  RotaryRows rotary;                     // Rotary
  ExactInt8MatmulShape exact_int8;       // ExactInt8Matmul
  std::shared_ptr<const WidenedInt4Primitives> widened_primitives; // WidenedInt4Matmul
};

template <typename Op>
void combine_values(const float* a, const float* b, float* dst, size_t n, Op op) {
  for (size_t i = 0; i < n; ++i) {
    dst[i] = op(a[i], b[i]);
  }
}

// dst = a op b for n values; each result is the one IEEE operation, as oneDNN's binary computes it.
inline void binary_values(BinaryAlg alg, const float* a, const float* b, float* dst, size_t n) {
  switch (alg) {
    case BinaryAlg::Add:
      return combine_values(a, b, dst, n, std::plus<float>());
    case BinaryAlg::Sub:
      return combine_values(a, b, dst, n, std::minus<float>());
    case BinaryAlg::Mul:
      return combine_values(a, b, dst, n, std::multiplies<float>());
    case BinaryAlg::Div:
      return combine_values(a, b, dst, n, std::divides<float>());
    default:
      return; // build_binary() makes Binary loops of the four above only
  }
}

// Rows [begin, end) of an Interleave loop: row r of each of the `count` pieces, `bytes` each, side by
// side in dst. Words of 4 bytes where the pieces hold whole ones (f32), bytes otherwise.
inline void interleave_rows(
    const uint8_t* const* pieces, size_t count, size_t bytes, uint8_t* dst, size_t begin, size_t end) {
  if (bytes % 4 == 0) {
    const size_t words = bytes / 4;
    for (size_t r = begin; r < end; ++r) {
      auto* out = reinterpret_cast<uint32_t*>(dst + r * count * bytes);
      for (size_t i = 0; i < count; ++i) {
        const auto* in = reinterpret_cast<const uint32_t*>(pieces[i] + r * bytes);
        for (size_t w = 0; w < words; ++w) {
          out[i * words + w] = in[w];
        }
      }
    }
    return;
  }
  for (size_t r = begin; r < end; ++r) {
    for (size_t i = 0; i < count; ++i) {
      std::memcpy(dst + (r * count + i) * bytes, pieces[i] + r * bytes, bytes);
    }
  }
}

// Planes [begin, end) of an AdaptivePool loop: output o of a dim of size i reads the inputs
// [floor(o * i / out), ceil((o + 1) * i / out)); max propagates NaN, as PyTorch's does.
inline void adaptive_pool_planes(const HostLoop& loop, const float* src, float* dst, size_t begin, size_t end) {
  const size_t in_plane = loop.in[0] * loop.in[1] * loop.in[2];
  const size_t out_plane = loop.out[0] * loop.out[1] * loop.out[2];
  const auto window = [&](size_t dim, size_t o, size_t& first, size_t& last) {
    first = o * loop.in[dim] / loop.out[dim];
    last = ((o + 1) * loop.in[dim] + loop.out[dim] - 1) / loop.out[dim];
  };
  for (size_t plane = begin; plane < end; ++plane) {
    const float* x = src + plane * in_plane;
    float* y = dst + plane * out_plane;
    for (size_t od = 0; od < loop.out[0]; ++od) {
      size_t d0, d1;
      window(0, od, d0, d1);
      for (size_t oh = 0; oh < loop.out[1]; ++oh) {
        size_t h0, h1;
        window(1, oh, h0, h1);
        for (size_t ow = 0; ow < loop.out[2]; ++ow) {
          size_t w0, w1;
          window(2, ow, w0, w1);
          float result = loop.max ? -std::numeric_limits<float>::infinity() : 0.0f;
          for (size_t d = d0; d < d1; ++d) {
            for (size_t h = h0; h < h1; ++h) {
              const float* row = x + (d * loop.in[1] + h) * loop.in[2];
              for (size_t w = w0; w < w1; ++w) {
                if (!loop.max) {
                  result += row[w];
                } else if (row[w] > result || std::isnan(row[w])) {
                  result = row[w];
                }
              }
            }
          }
          if (!loop.max) {
            result /= static_cast<float>((d1 - d0) * (h1 - h0) * (w1 - w0));
          }
          y[(od * loop.out[1] + oh) * loop.out[2] + ow] = result;
        }
      }
    }
  }
}

// A global average pooling's pixels are summed in this many chunks per image, each chunk's sums kept
// apart and added in order after: a fixed split, so that the result does not depend on the thread count.
inline size_t mean_chunks(size_t pixels, size_t channels) {
  constexpr size_t kValuesPerChunk = 8192, kMostChunks = 16;
  return std::max<size_t>(1, std::min({pixels, kMostChunks, pixels * channels / kValuesPerChunk}));
}

// Chunks [begin, end) of a GlobalAveragePool loop (chunk t: image t / chunks): the sums of each
// channel over the chunk's pixels into partial[t], a thread streaming through whole pixels. oneDNN's
// pooling kernel took 426 us for EfficientNet-B0's 17 global poolings (80 for 32 channels at 112x112),
// XNNPACK's mean 265; this loop 332 (41), the network 2.6% faster (2 threads, model-207 Xeon).
inline void sum_pixel_chunks(const HostLoop& loop, const float* src, float* partial, size_t begin, size_t end) {
  const size_t channels = loop.inner;
  const size_t chunks = mean_chunks(loop.extent, channels);
  for (size_t t = begin; t < end; ++t) {
    const size_t image = t / chunks, chunk = t % chunks;
    const size_t first = chunk * loop.extent / chunks, last = (chunk + 1) * loop.extent / chunks;
    const float* pixel = src + (image * loop.extent + first) * channels;
    float* sums = partial + t * channels;
    std::fill_n(sums, channels, 0.0f);
    size_t p = first;
    for (; p + 4 <= last; p += 4, pixel += 4 * channels) {
      for (size_t c = 0; c < channels; ++c) {
        sums[c] += (pixel[c] + pixel[channels + c]) + (pixel[2 * channels + c] + pixel[3 * channels + c]);
      }
    }
    for (; p < last; ++p, pixel += channels) {
      for (size_t c = 0; c < channels; ++c) {
        sums[c] += pixel[c];
      }
    }
  }
}

// The means from the partial sums of every chunk, added in chunk order.
inline void finish_global_average_pool(const HostLoop& loop, const float* partial, float* dst) {
  const size_t channels = loop.inner;
  const size_t chunks = mean_chunks(loop.extent, channels);
  const auto pixels = static_cast<float>(loop.extent);
  for (size_t image = 0; image < loop.outer; ++image) {
    const float* sums = partial + image * chunks * channels;
    float* mean = dst + image * channels;
    std::copy_n(sums, channels, mean);
    for (size_t chunk = 1; chunk < chunks; ++chunk) {
      for (size_t c = 0; c < channels; ++c) {
        mean[c] += sums[chunk * channels + c];
      }
    }
    for (size_t c = 0; c < channels; ++c) {
      mean[c] /= pixels;
    }
  }
}

// Elementwise functions oneDNN has no algorithm for; values [begin, end).
inline void unary_values(HostLoop::Unary unary, const float* src, float* dst, size_t begin, size_t end) {
  switch (unary) {
    case HostLoop::Unary::Round: // the default rounding mode: to nearest, ties to even
      std::transform(src + begin, src + end, dst + begin, [](float x) { return std::nearbyint(x); });
      break;
    case HostLoop::Unary::Floor:
      std::transform(src + begin, src + end, dst + begin, [](float x) { return std::floor(x); });
      break;
    case HostLoop::Unary::Ceil:
      std::transform(src + begin, src + end, dst + begin, [](float x) { return std::ceil(x); });
      break;
    case HostLoop::Unary::Trunc:
      std::transform(src + begin, src + end, dst + begin, [](float x) { return std::trunc(x); });
      break;
    case HostLoop::Unary::Log1p:
      std::transform(src + begin, src + end, dst + begin, [](float x) { return std::log1p(x); });
      break;
  }
}

// PyTorch's safe softmax returns zeros for a row masked entirely (oneDNN's softmax gives NaN).
inline void zero_fully_masked_rows(const HostLoop& loop, const float* src, float* dst) {
  const float minus_infinity = -std::numeric_limits<float>::infinity();
  for (size_t o = 0; o < loop.outer; ++o) {
    for (size_t i = 0; i < loop.inner; ++i) {
      const size_t base = o * loop.extent * loop.inner + i;
      bool masked = true;
      for (size_t e = 0; masked && e < loop.extent; ++e) {
        masked = src[base + e * loop.inner] == minus_infinity;
      }
      for (size_t e = 0; masked && e < loop.extent; ++e) {
        dst[base + e * loop.inner] = 0.0f;
      }
    }
  }
}

// relu and clamp, values [begin, end): oneDNN's kernels (3.2, 3.13.1) take max/min against the bound, which
// returns the bound for a NaN where PyTorch's result is NaN. std::max(x, lower) is
// `x < lower ? lower : x`, so a NaN x comes through (and the loop still vectorizes).
inline void clamp_values(const HostLoop& loop, const void* src, void* dst, size_t begin, size_t end) {
  const float lower = loop.value;
  const float upper = loop.upper;
  const auto clamp = [lower, upper](float x) { return std::min(std::max(x, lower), upper); };
  if (!loop.bf16) {
    const auto* x = static_cast<const float*>(src);
    std::transform(x + begin, x + end, static_cast<float*>(dst) + begin, clamp);
    return;
  }
  const auto* x = static_cast<const uint16_t*>(src);
  auto* y = static_cast<uint16_t*>(dst);
  for (size_t i = begin; i < end; ++i) {
    y[i] = to_bf16_bits(clamp(from_bf16_bits(x[i])));
  }
}

// Int8Grid, values [begin, end). Clamped before rounding, so |x| <= 255 and adding and removing
// 1.5 * 2^23 rounds to the nearest integer, ties to even (the default rounding mode), in a loop the
// compiler vectorizes; a NaN stays NaN.
inline void round_to_int8_grid(const HostLoop::Int8Grid& grid, const float* src, float* dst, size_t begin, size_t end) {
  constexpr float kRounder = 12582912.0f;
  const HostLoop::Int8Grid g = grid;
  std::transform(src + begin, src + end, dst + begin, [g](float x) {
    const float q = std::min(std::max(x * g.reciprocal, g.lowest), g.highest);
    return ((q + kRounder) - kRounder) * g.scale;
  });
}

// Dynamic symmetric int8 per row (a token's activations): scale = max|x| / 127 (1 for an all-zero
// row), q = round_half_even(x * (1 / scale)), as PyTorch's quantize computes it. A row holding inf or
// NaN gets a NaN scale (and zeros), so the matmul's result for that row is NaN, not a wrong number.
// Written for the auto-vectorizer on baseline x86-64 (SSE2), where std::nearbyint is a libm call
// per value and a float max reduction is not vectorized: 0.7 ns per value instead of 3.5 (one thread).
inline void quantize_row(const float* x, size_t count, int8_t* q, float* scale_out) {
  // |x| as bits: for non-negative floats the integer order is the float order, and inf and NaN lie
  // at and above kInfinityBits.
  constexpr uint32_t kMagnitudeMask = 0x7FFFFFFFu;
  constexpr uint32_t kInfinityBits = 0x7F800000u;
  // Adding and removing 1.5 * 2^23 rounds a float of magnitude < 2^22 to the nearest integer, ties to
  // even (the default rounding mode).
  constexpr float kRounder = 12582912.0f;
  uint32_t max_bits = 0;
  for (size_t e = 0; e < count; ++e) {
    uint32_t bits;
    std::memcpy(&bits, x + e, sizeof(bits));
    bits &= kMagnitudeMask;
    max_bits = bits > max_bits ? bits : max_bits;
  }
  if (max_bits >= kInfinityBits) {
    std::fill_n(q, count, int8_t{0});
    *scale_out = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  float max_abs;
  std::memcpy(&max_abs, &max_bits, sizeof(max_abs));
  const float scale = max_abs == 0.0f ? 1.0f : max_abs / 127.0f;
  const float inverse = 1.0f / scale;
  for (size_t e = 0; e < count; ++e) {
    // |x * inverse| <= 127 up to a rounding of the scale: the integer clamp only guards that.
    const auto rounded = static_cast<int32_t>((x[e] * inverse + kRounder) - kRounder);
    q[e] = static_cast<int8_t>(rounded < -127 ? -127 : (rounded > 127 ? 127 : rounded));
  }
  *scale_out = scale;
}

// Rows [begin, end) of a QuantizeRows loop.
inline void quantize_rows(const HostLoop& loop, const void* src, void* dst, void* scales, size_t begin, size_t end) {
  for (size_t row = begin; row < end; ++row) {
    quantize_row(
        static_cast<const float*>(src) + row * loop.extent,
        loop.extent,
        static_cast<int8_t*>(dst) + row * loop.extent,
        static_cast<float*>(scales) + row);
  }
}

} // namespace executorch::backends::onednn
