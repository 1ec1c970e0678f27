// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// Shape helpers shared by the graph builder and the step builders.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

namespace executorch::backends::onednn {

using dnnl::memory;

// oneDNN has no rank-0 memory: a scalar is described as one element of rank 1.
inline memory::dims to_dnnl_dims(const std::vector<int64_t>& dims) {
  return dims.empty() ? memory::dims{1} : memory::dims(dims.begin(), dims.end());
}

inline memory::dims row_major_strides(const memory::dims& dims) {
  memory::dims strides(dims.size(), 1);
  for (size_t d = dims.size(); d-- > 1;) {
    strides[d - 1] = strides[d] * dims[d];
  }
  return strides;
}

using DataType = memory::data_type;

// Plain contiguous row-major: the layout of graph inputs, outputs and constants' bytes.
inline memory::desc plain_desc(const memory::dims& dims, DataType type = DataType::f32) {
  return memory::desc(dims, type, row_major_strides(dims));
}

// True for a layout described by strides alone (plain, permuted, a view of those), no blocking.
inline bool is_strided(const memory::desc& desc) {
  return desc.get_format_kind() == memory::format_kind::blocked && desc.get_inner_nblks() == 0 &&
         desc.get_submemory_offset() == 0;
}

// A strided desc whose bytes are in row-major order once its size-1 dims are left out, described as
// plain: a permute that moves only size-1 dims (a decoding step's [1, T=1, H, D] -> [1, H, 1, D])
// leaves strides oneDNN takes for another layout, and its binary kernel read such a "acbd" src wrong.
inline memory::desc canonical(const memory::desc& desc) {
  if (!is_strided(desc)) {
    return desc;
  }
  const memory::dims dims = desc.get_dims();
  const memory::dims strides = desc.get_strides();
  memory::dim expected = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    if (dims[d] != 1) {
      if (strides[d] != expected) {
        return desc;
      }
      expected *= dims[d];
    }
  }
  return plain_desc(dims, desc.get_data_type());
}

// Channels-last ([N, C, spatial...] stored N, spatial..., C; "acdb" for 4-D): the layout oneDNN's
// convolutions pick on AVX2 and AVX-512. Rank 3 and up.
inline memory::desc channels_last_desc(const memory::dims& dims, DataType type = DataType::f32) {
  memory::dims strides(dims.size());
  memory::dim stride = dims[1];
  strides[1] = 1;
  for (size_t d = dims.size() - 1; d >= 2; --d) {
    strides[d] = stride;
    stride *= dims[d];
  }
  strides[0] = stride;
  return memory::desc(dims, type, strides);
}

inline memory::desc any_desc(const memory::dims& dims, DataType type = DataType::f32) {
  return memory::desc(dims, type, memory::format_tag::any);
}

// `dims` with 1s prepended up to `rank` (numpy-style broadcasting alignment).
inline memory::dims left_pad(const memory::dims& dims, size_t rank) {
  memory::dims padded(rank > dims.size() ? rank - dims.size() : 0, 1);
  padded.insert(padded.end(), dims.begin(), dims.end());
  return padded;
}

// True when `dims` (already left-padded to the same rank) broadcasts to `target`.
inline bool broadcasts_to(const memory::dims& dims, const memory::dims& target) {
  if (dims.size() != target.size()) {
    return false;
  }
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] != target[d] && dims[d] != 1) {
      return false;
    }
  }
  return true;
}

inline std::string dims_string(const memory::dims& dims) {
  std::string text = "[";
  for (size_t d = 0; d < dims.size(); ++d) {
    text += (d ? ", " : "") + std::to_string(dims[d]);
  }
  return text + "]";
}

} // namespace executorch::backends::onednn
