// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// The host kernels' vector widths this CPU runs (under oneDNN's instruction-set cap, through
// host_row_isa()), scalar always: the kernel tests run every one of them.
#pragma once

#include <vector>

#include "../../runtime/RowKernels.h"

namespace executorch::backends::onednn {

inline std::vector<RowIsa> runnable_isas() {
  std::vector<RowIsa> isas{RowIsa::scalar};
  if (host_row_isa() != RowIsa::scalar) {
    isas.push_back(RowIsa::avx2);
  }
  if (host_row_isa() == RowIsa::avx512) {
    isas.push_back(RowIsa::avx512);
  }
  return isas;
}

} // namespace executorch::backends::onednn
