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

// The symbol whose value `code` is (the code is exactly SYMBOL i), or -1.
int64_t bare_symbol(const std::vector<int64_t>& code);

// Checks the dynamic-shape section of a parsed payload: well-formed codes, a symbolic dim only on
// activations, every symbol given by a graph input's dim, stored dims equal to the expressions at
// every symbol's max. Throws InitError.
void validate_dynamic_shapes(const Payload& payload);

// The payload with every symbolic dim evaluated at `symbols` (a static payload). Throws InitError
// (InvalidArgument) when a dim comes out below 1.
Payload specialize(const Payload& generic, const std::vector<int64_t>& symbols);

} // namespace executorch::backends::onednn
