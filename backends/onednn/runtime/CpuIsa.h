// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// The backend option "max_isa": caps the instruction set oneDNN may use (its max-ISA control, like
// the environment variable ONEDNN_MAX_CPU_ISA), so that older CPUs' code paths can be exercised on a
// newer one. oneDNN takes the cap only before it generates its first kernel: set it before the first
// program using the delegate is loaded in the process.
#pragma once

#include <executorch/runtime/core/error.h>

namespace executorch::backends::onednn {

inline constexpr char kMaxIsaOption[] = "max_isa";

// `name`: sse41, avx, avx2, avx2_vnni, avx2_vnni_2, avx512_core, avx512_core_vnni, avx512_core_bf16,
// avx512_core_fp16, avx512_core_amx or default. InvalidArgument for another name, or when oneDNN
// has already fixed its instruction set.
runtime::Error set_max_isa(const char* name) noexcept;

// The instruction set oneDNN dispatches to now (one of the names above).
const char* effective_isa_name() noexcept;

// Whether oneDNN's int8 products are exact here: with VNNI (AVX512-VNNI or AVX-VNNI) they accumulate
// in 32 bits; without it, in pairs of 16-bit sums that saturate (measured: a dynamic int8 linear off
// by 30% on an AVX2 CPU), so int8 steps compute in f32 on dequantized operands there
// (ConvolutionSteps.cpp).
bool int8_products_exact() noexcept;

// Whether oneDNN has native bf16 kernels here: AVX512-BF16 (and AMX) or AVX-NE-CONVERT (avx2_vnni_2).
bool has_bf16_instructions() noexcept;

// Whether oneDNN runs its AMX kernels here (int8 and bf16 tiles).
bool has_amx() noexcept;

} // namespace executorch::backends::onednn
