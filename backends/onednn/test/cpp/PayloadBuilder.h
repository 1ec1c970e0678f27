// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// Writes OneDnnBackend payloads (serialization/FORMAT.md) from C++ so tests can describe graphs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../../runtime/Schema.h"

namespace onednn_test {

// The tests speak the runtime's own codes, so a renumbering cannot leave them behind.
using Kind = executorch::backends::onednn::StepKind;
using executorch::backends::onednn::ArgReductionAlg;
using executorch::backends::onednn::AttributeType;
using executorch::backends::onednn::BinaryAlg;
using executorch::backends::onednn::EltwiseAlg;
using executorch::backends::onednn::HostElementwiseAlg;
using executorch::backends::onednn::kNoValue;
using executorch::backends::onednn::PoolingAlg;
using executorch::backends::onednn::PostOpKind;
using executorch::backends::onednn::ReductionAlg;
using executorch::backends::onednn::ResamplingAlg;

// A code as the i64 an attribute holds.
template <typename Code>
constexpr int64_t code_of(Code value) {
  return static_cast<int64_t>(value);
}

struct Attr {
  std::string name;
  bool is_float = false;
  std::vector<int64_t> ints;
  std::vector<double> floats;
};
Attr ints(std::string name, std::vector<int64_t> values);
Attr floats(std::string name, std::vector<double> values);

// Attribute `alg`: one code of an algorithm enumeration.
template <typename Code>
Attr alg(Code value) {
  return ints("alg", {code_of(value)});
}

class PayloadBuilder {
 public:
  // An activation value (or a constant when `key` is non-empty).
  uint32_t value(std::vector<int64_t> dims, std::string key = "", uint8_t dtype = 0);
  // The CRC-32 that constant `id` records (written with weight_checksums = true); any value.
  void set_checksum(uint32_t id, uint32_t checksum) {
    values_.at(id).checksum = checksum;
  }
  uint8_t dtype(uint32_t id) const {
    return values_.at(id).dtype;
  }
  // The value's layout code (FORMAT.md); any code, valid or not.
  void set_layout(uint32_t id, uint8_t layout) {
    values_.at(id).layout = layout;
  }
  void input(uint32_t id) {
    inputs_.push_back(id);
  }
  void output(uint32_t id) {
    outputs_.push_back(id);
  }
  void step(Kind kind, std::vector<uint32_t> inputs, std::vector<uint32_t> outputs, std::vector<Attr> attrs = {});

  // A dynamic size (with dynamic = true): its range; returns its index.
  uint32_t symbol(int64_t min, int64_t max) {
    symbols_.push_back({min, max});
    return static_cast<uint32_t>(symbols_.size() - 1);
  }
  // Dim `dim` of value `id` as ShapeOp code (any code, valid or not).
  void symbolic_dim(uint32_t id, uint32_t dim, std::vector<int64_t> code) {
    symbolic_dims_.push_back({id, dim, std::move(code)});
  }

  // Entry `index` of i64 attribute `name` of step `step` as ShapeOp code (with dynamic = true).
  void symbolic_attribute(uint32_t step, std::string name, uint32_t index, std::vector<int64_t> code) {
    symbolic_attributes_.push_back({step, std::move(name), index, std::move(code)});
  }

  std::vector<uint8_t> build() const;

  uint32_t version = executorch::backends::onednn::kVersion;
  bool dynamic = false;            // writes the dynamic-shape section (and its header flag)
  bool weight_checksums = false;   // writes each constant's checksum (and the header flag)
  std::vector<uint32_t> size_args; // dynamic: positions of integer arguments among the inputs

 private:
  struct Value {
    uint8_t dtype;
    std::vector<int64_t> dims;
    std::string key;
    uint8_t layout = 0;
    uint32_t checksum = 0;
  };
  struct Step {
    Kind kind;
    std::vector<uint32_t> inputs, outputs;
    std::vector<Attr> attrs;
  };
  std::vector<uint32_t> inputs_, outputs_;
  std::vector<Value> values_;
  std::vector<Step> steps_;
  struct SymbolicDim {
    uint32_t value, dim;
    std::vector<int64_t> code;
  };
  std::vector<std::pair<int64_t, int64_t>> symbols_;
  std::vector<SymbolicDim> symbolic_dims_;
  struct SymbolicAttribute {
    uint32_t step;
    std::string name;
    uint32_t index;
    std::vector<int64_t> code;
  };
  std::vector<SymbolicAttribute> symbolic_attributes_;
};

// CRC-32 (zlib's) of `size` bytes.
uint32_t crc32_bitwise(const uint8_t* data, size_t size);

// Recomputes the header's checksum, so that a test's hand-made corruption reaches the checks after it.
void seal(std::vector<uint8_t>& bytes);

} // namespace onednn_test
