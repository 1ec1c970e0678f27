// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// Tables keyed by a payload code (Schema.h). Each row names its code, so no row depends on its
// position and a new code needs no filler rows; a static_assert on covers_codes() makes a code left
// without its row a compile error, and find_code() answers an unknown code with nullptr, never a
// neighbour's row.
#pragma once

#include <cstddef>
#include <cstdint>

namespace executorch::backends::onednn {

template <typename Code, typename Value>
struct CodeRow {
  Code code;
  Value value;
};

// Whether `table` has exactly one row for each code in [first, end) and no other row.
template <typename Code, typename Value, size_t N>
constexpr bool covers_codes(const CodeRow<Code, Value> (&table)[N], int64_t first, int64_t end) {
  if (static_cast<int64_t>(N) != end - first) {
    return false;
  }
  for (int64_t code = first; code < end; ++code) {
    size_t rows = 0;
    for (const CodeRow<Code, Value>& row : table) {
      rows += static_cast<int64_t>(row.code) == code ? 1 : 0;
    }
    if (rows != 1) {
      return false;
    }
  }
  return true;
}

// The value of `code`'s row, or nullptr when the table has none (a code this runtime does not know).
template <typename Code, typename Value, size_t N>
constexpr const Value* find_code(const CodeRow<Code, Value> (&table)[N], int64_t code) {
  for (const CodeRow<Code, Value>& row : table) {
    if (static_cast<int64_t>(row.code) == code) {
      return &row.value;
    }
  }
  return nullptr;
}

} // namespace executorch::backends::onednn
