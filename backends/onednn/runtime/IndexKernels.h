// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// Host kernels of the steps that read or write integer and boolean tensors, which oneDNN's CPU
// primitives do not take: argmax/argmin, gathering rows by index, and elementwise division with a
// rounding mode, comparison and selection under numpy broadcasting. Values reach them plain (f32 for
// floating-point data, int64 for indices, one byte per boolean).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/platform/log.h>

#include "Schema.h"

namespace executorch::backends::onednn {

// Rows of an arg reduction: src is [outer, extent, inner], dst [outer, inner].
struct ArgReduceRows {
  size_t outer = 0;
  size_t extent = 0;
  size_t inner = 0;
  bool min = false;
};

// PyTorch's choice: the first index of the extreme value, where NaN beats every number (the first
// NaN wins). dst rows [begin, end) of outer * inner.
inline void arg_reduce_rows(const ArgReduceRows& rows, const float* src, int64_t* dst, size_t begin, size_t end) {
  for (size_t row = begin; row < end; ++row) {
    const float* x = src + (row / rows.inner) * rows.extent * rows.inner + row % rows.inner;
    size_t best = 0;
    float best_value = x[0];
    for (size_t e = 1; e < rows.extent && !std::isnan(best_value); ++e) {
      const float value = x[e * rows.inner];
      if (std::isnan(value) || (rows.min ? value < best_value : value > best_value)) {
        best = e;
        best_value = value;
      }
    }
    dst[row] = static_cast<int64_t>(best);
  }
}

// data is [outer, extent, row_bytes], dst [outer, count, row_bytes]: dst[o, j] = data[o, index[j]].
struct GatherRows {
  size_t outer = 0;
  size_t extent = 0;
  size_t count = 0;
  size_t row_bytes = 0;
  // Compressed rows (a quantized embedding, outer 1): `bits` 4 (S4, two values a byte, the even one in
  // the low nibble) or 8 (S8) per value, `row_values` of them a row, each dequantized as it is copied:
  // (value - zero_point) * scale, one scale (and zero point) per `group` values, into f32.
  int bits = 0;
  size_t row_values = 0;
  size_t group = 0;
};

struct CompressedRows {
  const float* scales = nullptr;      // [extent, row_values / group]
  const float* zero_points = nullptr; // the same, or none
};

// Every index is checked before anything is copied: one out of [0, extent) fails the step.
inline runtime::Error gather_rows(
    const GatherRows& gather, const void* data, const void* indices, void* dst, const CompressedRows& compressed = {}) {
  const auto* index = static_cast<const int64_t*>(indices);
  for (size_t j = 0; j < gather.count; ++j) {
    if (index[j] < 0 || static_cast<uint64_t>(index[j]) >= gather.extent) {
      ET_LOG(
          Error,
          "OneDnnBackend: index %lld (position %zu) is out of range for a dim of size %zu",
          static_cast<long long>(index[j]),
          j,
          gather.extent);
      return runtime::Error::InvalidArgument;
    }
  }
  const auto* from = static_cast<const uint8_t*>(data);
  auto* to = static_cast<uint8_t*>(dst);
  if (gather.bits != 0) {
    const size_t groups = gather.row_values / gather.group;
    auto* out = static_cast<float*>(dst);
    for (size_t j = 0; j < gather.count; ++j) {
      const auto row = static_cast<size_t>(index[j]);
      const uint8_t* bytes = from + row * gather.row_bytes;
      for (size_t v = 0; v < gather.row_values; ++v) {
        int32_t value;
        if (gather.bits == 4) {
          const int32_t nibble = (bytes[v / 2] >> (4 * (v % 2))) & 0x0F;
          value = nibble >= 8 ? nibble - 16 : nibble;
        } else {
          value = static_cast<int8_t>(bytes[v]);
        }
        const size_t g = row * groups + v / gather.group;
        const float zero = compressed.zero_points != nullptr ? compressed.zero_points[g] : 0.0f;
        out[j * gather.row_values + v] = (static_cast<float>(value) - zero) * compressed.scales[g];
      }
    }
    return runtime::Error::Ok;
  }
  for (size_t o = 0; o < gather.outer; ++o) {
    for (size_t j = 0; j < gather.count; ++j) {
      const size_t row = o * gather.extent + static_cast<size_t>(index[j]);
      std::memcpy(to + (o * gather.count + j) * gather.row_bytes, from + row * gather.row_bytes, gather.row_bytes);
    }
  }
  return runtime::Error::Ok;
}

// dst's dims and, per operand, its strides in elements over them (0 along a broadcast dim).
struct ElementwiseLoop {
  HostElementwiseAlg alg = HostElementwiseAlg::Eq;
  bool integer = false; // S64 operands (else f32); WHERE: 8-byte elements (else 4)
  size_t rank = 0;
  size_t dims[kMaxRank] = {};
  size_t strides[3][kMaxRank] = {};
};

// Calls visit(dst, a, b, c) with the element offsets of every dst element, in order.
template <typename Visit>
void for_each_broadcast(const ElementwiseLoop& loop, Visit visit) {
  size_t position[kMaxRank] = {};
  size_t offsets[3] = {0, 0, 0};
  size_t count = 1;
  for (size_t d = 0; d < loop.rank; ++d) {
    count *= loop.dims[d];
  }
  for (size_t element = 0; element < count; ++element) {
    visit(element, offsets[0], offsets[1], offsets[2]);
    for (size_t d = loop.rank; d-- > 0;) { // odometer: step the last dim, carry into earlier ones
      for (size_t k = 0; k < 3; ++k) {
        offsets[k] += loop.strides[k][d];
      }
      if (++position[d] < loop.dims[d]) {
        break;
      }
      for (size_t k = 0; k < 3; ++k) {
        offsets[k] -= loop.strides[k][d] * loop.dims[d];
      }
      position[d] = 0;
    }
  }
}

// PyTorch's floor division of floats (div_floor_floating): exact where floor(a / b) is not.
inline float floor_divide(float a, float b) {
  if (b == 0.0f) {
    return a / b;
  }
  const float mod = std::fmod(a, b);
  float quotient = (a - mod) / b;
  if (mod != 0.0f && (b < 0.0f) != (mod < 0.0f)) {
    quotient -= 1.0f;
  }
  if (quotient == 0.0f) {
    return std::copysign(0.0f, a / b);
  }
  float floored = std::floor(quotient);
  if (quotient - floored > 0.5f) {
    floored += 1.0f;
  }
  return floored;
}

// Integer division rounding toward zero or down; false for a zero divisor. The one overflowing
// case, INT64_MIN / -1, wraps as PyTorch's does.
inline bool divide(int64_t a, int64_t b, bool floor, int64_t& result) {
  if (b == 0) {
    return false;
  }
  if (b == -1) {
    result = static_cast<int64_t>(0 - static_cast<uint64_t>(a));
    return true;
  }
  result = a / b;
  if (floor && a % b != 0 && ((a < 0) != (b < 0))) {
    result -= 1;
  }
  return true;
}

template <typename T>
bool compare(HostElementwiseAlg alg, T a, T b) {
  switch (alg) {
    case HostElementwiseAlg::Eq:
      return a == b;
    case HostElementwiseAlg::Ne:
      return a != b;
    case HostElementwiseAlg::Lt:
      return a < b;
    case HostElementwiseAlg::Le:
      return a <= b;
    case HostElementwiseAlg::Gt:
      return a > b;
    default:
      return a >= b;
  }
}

template <typename T>
runtime::Error compare_values(const ElementwiseLoop& loop, const T* a, const T* b, uint8_t* dst) {
  for_each_broadcast(
      loop, [&](size_t out, size_t i, size_t j, size_t) { dst[out] = compare(loop.alg, a[i], b[j]) ? 1 : 0; });
  return runtime::Error::Ok;
}

// a, b: the operands (WHERE: the condition and the operand taken where it holds); c: WHERE's other.
inline runtime::Error host_elementwise(
    const ElementwiseLoop& loop, void* dst, const void* a, const void* b, const void* c) {
  switch (loop.alg) {
    case HostElementwiseAlg::FloorDivide:
    case HostElementwiseAlg::TruncDivide: {
      const bool floor = loop.alg == HostElementwiseAlg::FloorDivide;
      if (!loop.integer) {
        const auto* x = static_cast<const float*>(a);
        const auto* y = static_cast<const float*>(b);
        auto* out = static_cast<float*>(dst);
        for_each_broadcast(loop, [&](size_t o, size_t i, size_t j, size_t) {
          out[o] = floor ? floor_divide(x[i], y[j]) : std::trunc(x[i] / y[j]);
        });
        return runtime::Error::Ok;
      }
      const auto* x = static_cast<const int64_t*>(a);
      const auto* y = static_cast<const int64_t*>(b);
      auto* out = static_cast<int64_t*>(dst);
      bool divided = true;
      for_each_broadcast(
          loop, [&](size_t o, size_t i, size_t j, size_t) { divided = divide(x[i], y[j], floor, out[o]) && divided; });
      if (!divided) {
        ET_LOG(Error, "OneDnnBackend: integer division by zero");
        return runtime::Error::InvalidArgument;
      }
      return runtime::Error::Ok;
    }
    case HostElementwiseAlg::Where: {
      const auto* condition = static_cast<const uint8_t*>(a); // any nonzero byte holds
      const size_t size = loop.integer ? 8 : 4;
      const auto* when_true = static_cast<const uint8_t*>(b);
      const auto* when_false = static_cast<const uint8_t*>(c);
      auto* out = static_cast<uint8_t*>(dst);
      for_each_broadcast(loop, [&](size_t o, size_t i, size_t j, size_t k) {
        std::memcpy(out + o * size, condition[i] != 0 ? when_true + j * size : when_false + k * size, size);
      });
      return runtime::Error::Ok;
    }
    case HostElementwiseAlg::Maximum:
    case HostElementwiseAlg::Minimum: {
      const bool maximum = loop.alg == HostElementwiseAlg::Maximum;
      const auto* x = static_cast<const float*>(a);
      const auto* y = static_cast<const float*>(b);
      auto* out = static_cast<float*>(dst);
      for_each_broadcast(loop, [&](size_t o, size_t i, size_t j, size_t) {
        const float p = x[i], q = y[j]; // PyTorch's rule: a NaN p, else the comparison, which a NaN q fails
        out[o] = p != p ? p : maximum ? (p > q ? p : q) : (p < q ? p : q);
      });
      return runtime::Error::Ok;
    }
    case HostElementwiseAlg::LogicalAnd:
    case HostElementwiseAlg::LogicalOr:
    case HostElementwiseAlg::LogicalXor: {
      const auto* x = static_cast<const uint8_t*>(a);
      const auto* y = static_cast<const uint8_t*>(b);
      auto* out = static_cast<uint8_t*>(dst);
      for_each_broadcast(loop, [&](size_t o, size_t i, size_t j, size_t) {
        const bool p = x[i] != 0, q = y[j] != 0;
        const bool result = loop.alg == HostElementwiseAlg::LogicalAnd  ? (p && q)
                            : loop.alg == HostElementwiseAlg::LogicalOr ? (p || q)
                                                                        : (p != q);
        out[o] = result ? 1 : 0;
      });
      return runtime::Error::Ok;
    }
    default:
      if (loop.integer) {
        return compare_values(
            loop, static_cast<const int64_t*>(a), static_cast<const int64_t*>(b), static_cast<uint8_t*>(dst));
      }
      return compare_values(
          loop, static_cast<const float*>(a), static_cast<const float*>(b), static_cast<uint8_t*>(dst));
  }
}

// dst = x with the points that the index tensors pick (one tensor per dim of x after its `sliced`
// whole leading dims, `count` entries each, negative counting from the end) set to, or increased by,
// values broadcast over [sliced dims..., index dims..., x's remaining dims].
struct IndexPutLoop {
  size_t indexed = 0;            // index tensors: the dims of x they index, after the leading sliced ones
  size_t sizes[kMaxRank] = {};   // those dims' sizes
  size_t strides[kMaxRank] = {}; // and strides in x, in elements
  size_t count = 0;
  size_t inner = 0; // elements of x after the indexed dims
  size_t block = 0; // elements of x from the first indexed dim on (x's stride of the sliced dims' points)
  size_t total = 0; // elements of x
  bool accumulate = false;
  ElementwiseLoop values; // dims: [sliced dims..., index dims..., x's remaining dims]; strides[0]: the values'
};

// Every index is checked before anything is written. f32 data.
inline runtime::Error index_put(
    const IndexPutLoop& put, void* dst, const void* x, const void* values, const void* const* indices) {
  for (size_t k = 0; k < put.indexed; ++k) {
    const auto* index = static_cast<const int64_t*>(indices[k]);
    const auto size = static_cast<int64_t>(put.sizes[k]);
    for (size_t p = 0; p < put.count; ++p) {
      if (index[p] < -size || index[p] >= size) {
        ET_LOG(
            Error,
            "OneDnnBackend: index %lld (position %zu of index tensor %zu) is out of range for a dim of size %lld",
            static_cast<long long>(index[p]),
            p,
            k,
            static_cast<long long>(size));
        return runtime::Error::InvalidArgument;
      }
    }
  }
  std::memcpy(dst, x, put.total * sizeof(float));
  const auto* from = static_cast<const float*>(values);
  auto* out = static_cast<float*>(dst);
  for_each_broadcast(put.values, [&](size_t element, size_t value, size_t, size_t) {
    const size_t point = element / put.inner % put.count;
    size_t offset = element / (put.inner * put.count) * put.block + element % put.inner;
    for (size_t k = 0; k < put.indexed; ++k) {
      const int64_t index = static_cast<const int64_t*>(indices[k])[point];
      offset += static_cast<size_t>(index < 0 ? index + static_cast<int64_t>(put.sizes[k]) : index) * put.strides[k];
    }
    out[offset] = put.accumulate ? out[offset] + from[value] : from[value];
  });
  return runtime::Error::Ok;
}

} // namespace executorch::backends::onednn
