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

// Where each element of `desc` sits, as one stride per dim, when strides alone can say it: a strided
// desc's own, or a blocked one's whose single inner block holds its whole dim (aBcd16b of 16 channels
// stores each pixel's 16 values together, as channels-last does). Empty for other layouts.
inline memory::dims element_strides(const memory::desc& desc) {
  if (desc.get_format_kind() != memory::format_kind::blocked || desc.get_submemory_offset() != 0) {
    return {};
  }
  memory::dims strides = desc.get_strides();
  const memory::dims blocks = desc.get_inner_blks(), indices = desc.get_inner_idxs();
  if (blocks.empty()) {
    return strides;
  }
  const memory::dims dims = desc.get_dims(), padded = desc.get_padded_dims();
  const auto blocked = static_cast<size_t>(indices[0]);
  if (blocks.size() != 1 || dims[blocked] != blocks[0] || padded[blocked] != blocks[0]) {
    return {};
  }
  strides[blocked] = 1;
  return strides;
}

// Whether `a` and `b` put every element at the same offset, so that a value stored one way is already
// the other, with no copy (oneDNN's reorder between them would copy every byte).
inline bool same_element_offsets(const memory::desc& a, const memory::desc& b) {
  if (a.get_data_type() != b.get_data_type() || a.get_dims() != b.get_dims() || a.get_size() != b.get_size()) {
    return false;
  }
  const memory::dims dims = a.get_dims(), strides_a = element_strides(a), strides_b = element_strides(b);
  if (strides_a.empty() || strides_b.empty()) {
    return false;
  }
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] != 1 && strides_a[d] != strides_b[d]) {
      return false;
    }
  }
  return true;
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
