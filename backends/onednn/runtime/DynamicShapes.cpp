// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
#include "DynamicShapes.h"

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "InitError.h"

namespace executorch::backends::onednn {
namespace {

using runtime::Error;

// Python's floor division and modulo (sympy's FloorDiv and Mod follow them).
bool floor_divide(int64_t a, int64_t b, int64_t& quotient) {
  if (b == 0 || (a == INT64_MIN && b == -1)) {
    return false;
  }
  quotient = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) {
    --quotient;
  }
  return true;
}

bool apply(ShapeOp op, int64_t a, int64_t b, int64_t& result) {
  switch (op) {
    case ShapeOp::Add:
      return !__builtin_add_overflow(a, b, &result);
    case ShapeOp::Mul:
      return !__builtin_mul_overflow(a, b, &result);
    case ShapeOp::FloorDiv:
      return floor_divide(a, b, result);
    case ShapeOp::Mod: {
      int64_t quotient = 0;
      int64_t product = 0;
      return floor_divide(a, b, quotient) && !__builtin_mul_overflow(quotient, b, &product) &&
             !__builtin_sub_overflow(a, product, &result);
    }
    case ShapeOp::Max:
      result = std::max(a, b);
      return true;
    case ShapeOp::Min:
      result = std::min(a, b);
      return true;
    default:
      return false;
  }
}

} // namespace

bool evaluate_dim(const std::vector<int64_t>& code, const int64_t* symbols, size_t num_symbols, int64_t& result) {
  int64_t stack[kMaxShapeCode];
  size_t depth = 0;
  if (code.size() > kMaxShapeCode) {
    return false;
  }
  for (size_t i = 0; i < code.size(); ++i) {
    const int64_t op = code[i];
    if (op == static_cast<int64_t>(ShapeOp::Const) || op == static_cast<int64_t>(ShapeOp::Symbol)) {
      if (i + 1 >= code.size()) {
        return false;
      }
      const int64_t operand = code[++i];
      if (op == static_cast<int64_t>(ShapeOp::Symbol)) {
        if (operand < 0 || static_cast<size_t>(operand) >= num_symbols) {
          return false;
        }
        stack[depth++] = symbols[operand];
      } else {
        stack[depth++] = operand;
      }
      continue;
    }
    if (op < 0 || op >= kNumShapeOps || depth < 2) {
      return false;
    }
    const int64_t right = stack[--depth];
    if (!apply(static_cast<ShapeOp>(op), stack[depth - 1], right, stack[depth - 1])) {
      return false;
    }
  }
  if (depth != 1) {
    return false;
  }
  result = stack[0];
  return true;
}

int64_t single_symbol(const std::vector<int64_t>& code) {
  int64_t found = -1;
  for (size_t i = 0; i + 1 < code.size(); ++i) {
    const int64_t op = code[i];
    if (op == static_cast<int64_t>(ShapeOp::Const) || op == static_cast<int64_t>(ShapeOp::Symbol)) {
      const int64_t operand = code[++i];
      if (op == static_cast<int64_t>(ShapeOp::Symbol)) {
        if (found >= 0 && found != operand) {
          return -1;
        }
        found = operand;
      }
    }
  }
  return found;
}

bool solve_for_symbol(
    const std::vector<int64_t>& code,
    int64_t symbol,
    const SymbolBounds& bounds,
    int64_t target,
    int64_t* symbols,
    size_t num_symbols,
    int64_t& result) {
  int64_t low = bounds.min;
  int64_t high = bounds.max;
  int64_t value = 0;
  while (low < high) {
    const int64_t middle = low + (high - low) / 2;
    symbols[symbol] = middle;
    if (!evaluate_dim(code, symbols, num_symbols, value)) {
      return false;
    }
    if (value < target) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  symbols[symbol] = low;
  if (!evaluate_dim(code, symbols, num_symbols, value) || value != target) {
    return false;
  }
  result = low;
  return true;
}

bool gives_size_one_to_one(const std::vector<int64_t>& code, int64_t symbol, const SymbolBounds& bounds) {
  if (code.size() == 2) {
    return true; // the size itself
  }
  if (bounds.max - bounds.min >= kMaxSolvedRange) {
    return false;
  }
  std::vector<int64_t> symbols(static_cast<size_t>(symbol) + 1, 0);
  int64_t previous = 0;
  for (int64_t point = bounds.min; point <= bounds.max; ++point) {
    symbols[symbol] = point;
    int64_t value = 0;
    if (!evaluate_dim(code, symbols.data(), symbols.size(), value) || (point > bounds.min && value <= previous)) {
      return false;
    }
    previous = value;
  }
  return true;
}

void validate_dynamic_shapes(Payload& payload) {
  const size_t num_symbols = payload.symbols.size();
  std::vector<int64_t> upper;
  for (size_t s = 0; s < num_symbols; ++s) {
    const SymbolBounds& bounds = payload.symbols[s];
    ODNN_CHECK(
        bounds.min >= 1 && bounds.min <= bounds.max && bounds.max <= kMaxSymbolValue,
        "dynamic size %zu: range [%lld, %lld] is not within [1, %lld]",
        s,
        static_cast<long long>(bounds.min),
        static_cast<long long>(bounds.max),
        static_cast<long long>(kMaxSymbolValue));
    upper.push_back(bounds.max);
  }
  std::set<std::pair<uint32_t, uint32_t>> seen;
  payload.size_sources.assign(num_symbols, kNoValue); // kNoValue: no input dim gives it yet
  for (uint32_t index = 0; index < payload.symbolic_dims.size(); ++index) {
    const SymbolicDim& entry = payload.symbolic_dims[index];
    ODNN_CHECK(entry.value < payload.values.size(), "symbolic dim of unknown value %u", entry.value);
    const ValueRecord& value = payload.values[entry.value];
    ODNN_CHECK(!value.is_constant, "value %u: a constant cannot have a dynamic dim", entry.value);
    ODNN_CHECK(entry.dim < value.dims.size(), "value %u has no dim %u", entry.value, entry.dim);
    ODNN_CHECK(
        seen.insert({entry.value, entry.dim}).second, "value %u dim %u is described twice", entry.value, entry.dim);
    int64_t at_max = 0;
    ODNN_CHECK(
        evaluate_dim(entry.code, upper.data(), num_symbols, at_max),
        "value %u dim %u: malformed or overflowing expression",
        entry.value,
        entry.dim);
    ODNN_CHECK(
        at_max == value.dims[entry.dim],
        "value %u dim %u: the expression gives %lld at the maximum sizes, the stored dim is %lld",
        entry.value,
        entry.dim,
        static_cast<long long>(at_max),
        static_cast<long long>(value.dims[entry.dim]));
    const int64_t symbol = single_symbol(entry.code);
    if (symbol >= 0 && payload.size_sources[static_cast<size_t>(symbol)] == kNoValue &&
        std::find(payload.inputs.begin(), payload.inputs.end(), entry.value) != payload.inputs.end() &&
        gives_size_one_to_one(entry.code, symbol, payload.symbols[static_cast<size_t>(symbol)])) {
      payload.size_sources[static_cast<size_t>(symbol)] = index;
    }
  }
  for (size_t s = 0; s < num_symbols; ++s) {
    ODNN_CHECK(
        payload.size_sources[s] != kNoValue,
        "dynamic size %zu is not, one to one, the only size in any graph input dim's expression",
        s);
  }
  std::set<std::tuple<uint32_t, std::string, uint32_t>> attributes_seen;
  for (const SymbolicAttribute& entry : payload.symbolic_attributes) {
    ODNN_CHECK(entry.step < payload.steps.size(), "symbolic attribute of unknown step %u", entry.step);
    const AttributeRecord* attribute = payload.steps[entry.step].find(entry.name);
    ODNN_CHECK(
        attribute != nullptr && attribute->type == AttributeType::I64List && entry.index < attribute->ints.size(),
        "step %u has no i64 attribute '%s' with an entry %u",
        entry.step,
        entry.name.c_str(),
        entry.index);
    ODNN_CHECK(
        attributes_seen.insert({entry.step, entry.name, entry.index}).second,
        "step %u attribute '%s' entry %u is described twice",
        entry.step,
        entry.name.c_str(),
        entry.index);
    int64_t at_max = 0;
    ODNN_CHECK(
        evaluate_dim(entry.code, upper.data(), num_symbols, at_max) && at_max == attribute->ints[entry.index],
        "step %u attribute '%s' entry %u: malformed expression, or not the stored value at the maximum sizes",
        entry.step,
        entry.name.c_str(),
        entry.index);
  }
}

Payload specialize(const Payload& generic, const std::vector<int64_t>& symbols) {
  Payload concrete = generic;
  concrete.symbols.clear();
  concrete.symbolic_dims.clear();
  concrete.size_sources.clear();
  for (const SymbolicDim& entry : generic.symbolic_dims) {
    int64_t dim = 0;
    if (!evaluate_dim(entry.code, symbols.data(), symbols.size(), dim) || dim < 1) {
      fail(
          Error::InvalidArgument,
          "value %u dim %u is not a positive size at these input sizes",
          entry.value,
          entry.dim);
    }
    concrete.values[entry.value].dims[entry.dim] = dim;
  }
  for (ValueRecord& value : concrete.values) {
    element_count(value.dims); // still within the runtime's limits
  }
  concrete.symbolic_attributes.clear();
  for (const SymbolicAttribute& entry : generic.symbolic_attributes) {
    int64_t value = 0;
    if (!evaluate_dim(entry.code, symbols.data(), symbols.size(), value)) {
      fail(
          Error::InvalidArgument,
          "step %u attribute '%s' cannot be evaluated at these input sizes",
          entry.step,
          entry.name.c_str());
    }
    for (AttributeRecord& attribute : concrete.steps[entry.step].attributes) {
      if (attribute.name == entry.name) {
        attribute.ints[entry.index] = value;
        break;
      }
    }
  }
  return concrete;
}

} // namespace executorch::backends::onednn
