// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// Payload algorithm codes -> how the runtime computes them: one table per enumeration, a row per
// code (CodeTable.h), each checked at compile time to cover every code of its enumeration.
#pragma once

#include <cstdint>

#include <oneapi/dnnl/dnnl.hpp>

#include "CodeTable.h"
#include "HostLoops.h"
#include "InitError.h"
#include "Schema.h"

namespace executorch::backends::onednn {

using dnnl::algorithm;

// An EltwiseAlg is a oneDNN algorithm (alpha/beta keep their oneDNN meaning, FORMAT.md), or a host
// loop in f32 where oneDNN has none for every type (its round takes f32 only); a host one is never a
// post-op.
struct EltwiseImplementation {
  bool on_host;
  algorithm onednn;     // when !on_host
  HostLoop::Unary host; // when on_host
};

constexpr EltwiseImplementation onednn_eltwise(algorithm onednn) {
  return {false, onednn, HostLoop::Unary::Round};
}

constexpr EltwiseImplementation host_eltwise(HostLoop::Unary host) {
  return {true, algorithm::undef, host};
}

inline constexpr CodeRow<EltwiseAlg, EltwiseImplementation> kEltwiseImplementations[] = {
    {EltwiseAlg::Relu, onednn_eltwise(algorithm::eltwise_relu)},
    {EltwiseAlg::Clip, onednn_eltwise(algorithm::eltwise_clip)},
    {EltwiseAlg::GeluErf, onednn_eltwise(algorithm::eltwise_gelu_erf)},
    {EltwiseAlg::GeluTanh, onednn_eltwise(algorithm::eltwise_gelu_tanh)},
    {EltwiseAlg::Swish, onednn_eltwise(algorithm::eltwise_swish)},
    {EltwiseAlg::Logistic, onednn_eltwise(algorithm::eltwise_logistic)},
    {EltwiseAlg::Tanh, onednn_eltwise(algorithm::eltwise_tanh)},
    {EltwiseAlg::Hardswish, onednn_eltwise(algorithm::eltwise_hardswish)},
    {EltwiseAlg::Hardsigmoid, onednn_eltwise(algorithm::eltwise_hardsigmoid)},
    {EltwiseAlg::Elu, onednn_eltwise(algorithm::eltwise_elu)},
    {EltwiseAlg::Exp, onednn_eltwise(algorithm::eltwise_exp)},
    {EltwiseAlg::Log, onednn_eltwise(algorithm::eltwise_log)},
    {EltwiseAlg::Sqrt, onednn_eltwise(algorithm::eltwise_sqrt)},
    {EltwiseAlg::Abs, onednn_eltwise(algorithm::eltwise_abs)},
    {EltwiseAlg::Linear, onednn_eltwise(algorithm::eltwise_linear)},
    {EltwiseAlg::Pow, onednn_eltwise(algorithm::eltwise_pow)},
    {EltwiseAlg::Square, onednn_eltwise(algorithm::eltwise_square)},
    {EltwiseAlg::Round, host_eltwise(HostLoop::Unary::Round)},
    {EltwiseAlg::Floor, host_eltwise(HostLoop::Unary::Floor)},
    {EltwiseAlg::Ceil, host_eltwise(HostLoop::Unary::Ceil)},
    {EltwiseAlg::Trunc, host_eltwise(HostLoop::Unary::Trunc)},
    {EltwiseAlg::Log1p, host_eltwise(HostLoop::Unary::Log1p)},
};
static_assert(covers_codes(kEltwiseImplementations, 0, kNumEltwiseAlgs), "one row per EltwiseAlg");

inline constexpr CodeRow<BinaryAlg, algorithm> kBinaryAlgorithms[] = {
    {BinaryAlg::Add, algorithm::binary_add},
    {BinaryAlg::Sub, algorithm::binary_sub},
    {BinaryAlg::Mul, algorithm::binary_mul},
    {BinaryAlg::Div, algorithm::binary_div},
    {BinaryAlg::Max, algorithm::binary_max},
    {BinaryAlg::Min, algorithm::binary_min},
};
static_assert(covers_codes(kBinaryAlgorithms, 0, kNumBinaryAlgs), "one row per BinaryAlg");

inline constexpr CodeRow<PoolingAlg, algorithm> kPoolingAlgorithms[] = {
    {PoolingAlg::Max, algorithm::pooling_max},
    {PoolingAlg::AvgIncludePadding, algorithm::pooling_avg_include_padding},
    {PoolingAlg::AvgExcludePadding, algorithm::pooling_avg_exclude_padding},
};
static_assert(covers_codes(kPoolingAlgorithms, 0, kNumPoolingAlgs), "one row per PoolingAlg");

inline constexpr CodeRow<ReductionAlg, algorithm> kReductionAlgorithms[] = {
    {ReductionAlg::Mean, algorithm::reduction_mean},
    {ReductionAlg::Sum, algorithm::reduction_sum},
    {ReductionAlg::Max, algorithm::reduction_max},
    {ReductionAlg::Min, algorithm::reduction_min},
};
static_assert(covers_codes(kReductionAlgorithms, 0, kNumReductionAlgs), "one row per ReductionAlg");

inline constexpr CodeRow<ResamplingAlg, algorithm> kResamplingAlgorithms[] = {
    {ResamplingAlg::Nearest, algorithm::resampling_nearest},
    {ResamplingAlg::Linear, algorithm::resampling_linear},
};
static_assert(covers_codes(kResamplingAlgorithms, 0, kNumResamplingAlgs), "one row per ResamplingAlg");

// The row of `code` in `table`; an unknown code fails init() with InvalidProgram.
template <typename Code, typename Value, size_t N>
const Value& lookup_code(const CodeRow<Code, Value> (&table)[N], int64_t code, const char* what) {
  const Value* found = find_code(table, code);
  ODNN_CHECK(found != nullptr, "unknown %s code %lld", what, static_cast<long long>(code));
  return *found;
}

} // namespace executorch::backends::onednn
