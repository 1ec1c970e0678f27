// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// A compressed weight matrix's scales, one per group of k values of a row: [n, k / group] row-major,
// f32 or bf16 (raw bits) as the program stores them. 4-bit weights carry bf16 scales where the
// partitioner's `group_scales="bf16"` (export-llm's default, XNNPACK's only choice) asked for them: at
// group 32 that takes a tenth off the bytes a decode step streams. Kernels read them a weight row at
// a time, in f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "Bf16.h"

namespace executorch::backends::onednn {

class GroupScales {
 public:
  GroupScales() = default;
  // Implicit: kernels and tests hand over plain arrays.
  GroupScales(const float* f32) : f32_(f32) {}
  GroupScales(const uint16_t* bf16) : bf16_(bf16) {}
  // Untyped data, bf16 or f32 as `bf16` says (a program's constant, a host loop's source).
  GroupScales(const void* data, bool bf16)
      : f32_(bf16 ? nullptr : static_cast<const float*>(data)),
        bf16_(bf16 ? static_cast<const uint16_t*>(data) : nullptr) {}

  bool is_bf16() const {
    return bf16_ != nullptr;
  }
  // The raw data: exactly one of the two is set (or neither, default-constructed).
  const float* f32_data() const {
    return f32_;
  }
  const uint16_t* bf16_data() const {
    return bf16_;
  }

 private:
  friend class ScaleRows;
  const float* f32_ = nullptr;
  const uint16_t* bf16_ = nullptr;
};

// One thread's reader of the rows of `scales` (each `groups` long) as f32: where they lie, or widened
// (exactly) into a buffer of its own that the next row overwrites.
class ScaleRows {
 public:
  ScaleRows(const GroupScales& scales, size_t groups) : scales_(scales), groups_(groups) {
    if (scales.is_bf16() && groups > kLocal) {
      heap_.resize(groups);
    }
  }
  ScaleRows(const ScaleRows&) = delete;
  ScaleRows& operator=(const ScaleRows&) = delete;

  const float* operator()(size_t r) {
    if (scales_.f32_ != nullptr) {
      return scales_.f32_ + r * groups_;
    }
    float* out = heap_.empty() ? local_ : heap_.data();
    const uint16_t* bits = scales_.bf16_ + r * groups_;
    for (size_t g = 0; g < groups_; ++g) {
      out[g] = from_bf16_bits(bits[g]);
    }
    return out;
  }

 private:
  // A row of k = 16384 in groups of 32 without a heap allocation: kernels make one per call, tens of
  // thousands of calls a decode step.
  static constexpr size_t kLocal = 512;
  GroupScales scales_;
  size_t groups_;
  alignas(64) float local_[kLocal];
  std::vector<float> heap_;
};

} // namespace executorch::backends::onednn
