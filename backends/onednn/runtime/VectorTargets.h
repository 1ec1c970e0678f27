// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// The host kernels' vector paths are compiled function by function for AVX-512 (oneDNN's
// avx512_core: F, BW, DQ, VL) and for AVX2 with FMA, while the library targets baseline x86-64; each
// runs only where host_row_isa() (RowKernels.h), or the builder's own check, allows it. A file whose
// kernels need more (VNNI) names those targets itself. Include it in .cpp files only: the
// diagnostics below then hold for the rest of that file.
#pragma once

#define ODNN_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))
#define ODNN_AVX2 __attribute__((target("avx2,fma")))

// GCC 12 warns inside its own AVX-512 intrinsics when they are inlined into target-attribute
// functions (its _mm512_undefined_* self-initialize; GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
