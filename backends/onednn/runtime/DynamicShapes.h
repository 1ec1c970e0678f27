// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// Programs exported with dynamic sizes (torch.export.Dim): each symbolic dim is a small postfix
// expression over the sizes, evaluated when the caller's inputs fix them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "Payload.h"

namespace executorch::backends::onednn {

// The expression's value at `symbols`; false when the code is malformed or the arithmetic overflows
// or divides by zero. Never throws, never allocates (execute() calls it).
bool evaluate_dim(const std::vector<int64_t>& code, const int64_t* symbols, size_t num_symbols, int64_t& result);

// The one symbol `code` depends on, or -1 when it depends on none or on several.
int64_t single_symbol(const std::vector<int64_t>& code);

// The value of symbol `symbol` in [bounds.min, bounds.max] for which `code` (of that symbol only,
// increasing in it: a size, 2 * size, size + 1, ...) gives `target`; false when there is none.
// `symbols` is scratch of at least symbol + 1 entries. Never throws, never allocates.
bool solve_for_symbol(
    const std::vector<int64_t>& code,
    int64_t symbol,
    const SymbolBounds& bounds,
    int64_t target,
    int64_t* symbols,
    size_t num_symbols,
    int64_t& result);

// Whether `code` (of symbol `symbol` only) gives a different, larger value for every larger value of
// the symbol in its range, so that solve_for_symbol finds the one value that gives an input's dim
// (8 * ((s + 1) // 2) gives 8 for both s = 1 and s = 2: another input dim must give s).
bool gives_size_one_to_one(const std::vector<int64_t>& code, int64_t symbol, const SymbolBounds& bounds);

// Checks the dynamic-shape section of a parsed payload: well-formed codes, a symbolic dim only on
// activations, every symbol the only one in some graph input dim's expression that gives it one to one
// (gives_size_one_to_one), stored dims equal to the expressions at
// every symbol's max. Records each symbol's first such dim in payload.size_sources. Throws InitError.
void validate_dynamic_shapes(Payload& payload);

// The payload with every symbolic dim evaluated at `symbols` (a static payload). Throws InitError
// (InvalidArgument) when a dim comes out below 1.
Payload specialize(const Payload& generic, const std::vector<int64_t>& symbols);

} // namespace executorch::backends::onednn
