// Payload algorithm codes -> oneDNN algorithms: one table per enumeration, indexed by code.
#pragma once

#include <cstdint>

#include <oneapi/dnnl/dnnl.hpp>

#include "InitError.h"
#include "Schema.h"

namespace executorch::backends::onednn {

using dnnl::algorithm;

// Indexed by EltwiseAlg; alpha/beta keep their oneDNN meaning (FORMAT.md).
inline constexpr algorithm kEltwiseAlgorithms[] = {
    algorithm::eltwise_relu, // RELU
    algorithm::eltwise_clip, // CLIP
    algorithm::eltwise_gelu_erf, // GELU_ERF
    algorithm::eltwise_gelu_tanh, // GELU_TANH
    algorithm::eltwise_swish, // SWISH
    algorithm::eltwise_logistic, // LOGISTIC
    algorithm::eltwise_tanh, // TANH
    algorithm::eltwise_hardswish, // HARDSWISH
    algorithm::eltwise_hardsigmoid, // HARDSIGMOID
    algorithm::eltwise_elu, // ELU
    algorithm::eltwise_exp, // EXP
    algorithm::eltwise_log, // LOG
    algorithm::eltwise_sqrt, // SQRT
    algorithm::eltwise_abs, // ABS
    algorithm::eltwise_linear, // LINEAR
    algorithm::eltwise_pow, // POW
    algorithm::eltwise_square, // SQUARE; ROUND..LOG1P run on the host (HostLoops.h)
};

// Indexed by BinaryAlg.
inline constexpr algorithm kBinaryAlgorithms[] = {
    algorithm::binary_add,
    algorithm::binary_sub,
    algorithm::binary_mul,
    algorithm::binary_div,
    algorithm::binary_max,
    algorithm::binary_min,
};

// Indexed by PoolingAlg.
inline constexpr algorithm kPoolingAlgorithms[] = {
    algorithm::pooling_max,
    algorithm::pooling_avg_include_padding,
    algorithm::pooling_avg_exclude_padding,
};

// Indexed by ReductionAlg.
inline constexpr algorithm kReductionAlgorithms[] = {
    algorithm::reduction_mean,
    algorithm::reduction_sum,
    algorithm::reduction_max,
    algorithm::reduction_min,
};

// Indexed by ResamplingAlg.
inline constexpr algorithm kResamplingAlgorithms[] = {
    algorithm::resampling_nearest,
    algorithm::resampling_linear,
};

template <size_t N>
algorithm lookup_algorithm(const algorithm (&table)[N], int64_t code, const char* what) {
  ODNN_CHECK(
      code >= 0 && static_cast<uint64_t>(code) < N,
      "unknown %s code %lld",
      what,
      static_cast<long long>(code));
  return table[code];
}

} // namespace executorch::backends::onednn
