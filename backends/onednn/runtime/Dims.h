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
