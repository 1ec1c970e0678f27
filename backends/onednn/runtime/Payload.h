// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// The payload parsed into plain structs (see serialization/FORMAT.md). parse_payload() checks
// every bound before reading and validates the graph rules; anything wrong throws InitError.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "Schema.h"

namespace executorch::backends::onednn {

struct ValueRecord {
  uint8_t dtype = 0;
  bool is_constant = false;
  Layout layout = Layout::Native;
  std::vector<int64_t> dims;        // empty for a scalar
  std::string key;                  // named-data key, constants only
  std::optional<uint32_t> checksum; // CRC-32 of a constant's bytes, when the program carries them
};

struct AttributeRecord {
  std::string name;
  AttributeType type = AttributeType::I64List;
  std::vector<int64_t> ints;
  std::vector<double> floats;

  size_t count() const {
    return type == AttributeType::I64List ? ints.size() : floats.size();
  }
};

struct StepRecord {
  StepKind kind = StepKind::Convolution;
  std::vector<uint32_t> inputs; // value ids or kNoValue
  std::vector<uint32_t> outputs;
  std::vector<AttributeRecord> attributes;

  bool has_input(size_t slot) const {
    return slot < inputs.size() && inputs[slot] != kNoValue;
  }
  // nullptr when absent (unknown attributes are ignored, missing ones are looked up by name).
  const AttributeRecord* find(std::string_view name) const;
  bool has(std::string_view name) const {
    return find(name) != nullptr;
  }
  // Typed getters: the attribute must exist, have the given type and, where given, `count` entries.
  std::vector<int64_t> ints(std::string_view name) const;
  std::vector<int64_t> ints(std::string_view name, size_t count) const;
  int64_t int_scalar(std::string_view name) const;
  std::vector<double> floats(std::string_view name, size_t count) const;
  double float_scalar(std::string_view name) const;
};

// A dynamic size of the program (torch.export.Dim) and the range it was exported for.
struct SymbolBounds {
  int64_t min = 1;
  int64_t max = 1;
};

// Dim `dim` of value `value` as a postfix expression over the symbols (ShapeOp codes).
struct SymbolicDim {
  uint32_t value = 0;
  uint32_t dim = 0;
  std::vector<int64_t> code;
};

// Entry `index` of i64 attribute `name` of step `step`, as a postfix expression over the symbols.
struct SymbolicAttribute {
  uint32_t step = 0;
  std::string name;
  uint32_t index = 0;
  std::vector<int64_t> code;
};

struct Payload {
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  // Value dims are those at every symbol's max (the only dims of a static payload).
  std::vector<ValueRecord> values;
  std::vector<StepRecord> steps;
  std::vector<SymbolBounds> symbols; // empty: every dim is static
  std::vector<SymbolicDim> symbolic_dims;
  // Positions among the delegate call's inputs of size (integer) arguments, which execute() skips:
  // graph input i is the i-th of the other inputs.
  std::vector<uint32_t> size_args;
  std::vector<SymbolicAttribute> symbolic_attributes; // slice offsets that depend on a size, ...
  // Not in the bytes: for each symbol, the index in symbolic_dims of the graph input dim that gives it
  // one to one (filled by validate_dynamic_shapes, read by execute()).
  std::vector<uint32_t> size_sources;
};

// Number of elements of `dims`; throws when it is absurdly large (> 2^40).
int64_t element_count(const std::vector<int64_t>& dims);

// Number of binary post-ops a step declares (each takes one extra input).
size_t binary_post_op_count(const StepRecord& step);

// CRC-32 (IEEE 802.3, zlib's crc32) of `size` bytes: the payload's checksum over its bytes from
// kChecksummedFrom on, and each weight's when the program carries weight checksums.
uint32_t crc32(const uint8_t* data, size_t size) noexcept;

Payload parse_payload(const uint8_t* data, size_t size);

} // namespace executorch::backends::onednn
