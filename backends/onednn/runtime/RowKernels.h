// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// Kernels along contiguous rows, on the host, where oneDNN 3.2 has no primitive or a slow one:
// - softmax: the SOFTMAX step's kernel on the last axis, and the ATTENTION step's, which adds the mask
//   and applies causality on the way. oneDNN 3.2's softmax primitive is slow on the CPUs we measured
//   (AMD Zen 4, 2 threads: 106 us for ViT-Tiny's 3x197x197 attention probabilities, against 44 us
//   here, and slower on two threads than on one);
// - RMS normalization (Llama's RMSNorm), which oneDNN 3.2's layer normalization cannot express;
// - GELU on AVX2: the tanh one, where oneDNN's tanh reads its tables through gathers (AMD Zen 1, one
//   thread: 7.9 ns per value for eltwise_gelu_tanh, 1.9 for eltwise_logistic); the erf one on small
//   vectors (its standalone oneDNN kernel is fast, 0.09 ms for 131072 values on the Zen 3, 2 threads,
//   against 1.9-2.6 ns per value a thread here). Fused into a matmul, oneDNN's AVX2 GELU cost 0.6 ms
//   (erf) and 1.4 ms (tanh) on a 32 x 4096 product (Zen 3, 2026-12-07): it runs after the product there;
// - swish on AVX2 at any size: 0.54 ns a value a thread here against 1.35 for oneDNN's eltwise
//   primitive and about 1.2 fused into its AVX2 convolutions (EfficientNet-B0, Zen 3, 2026-12-07), so
//   a SiLU a convolution fused runs after it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace executorch::backends::onednn {

// The vector width the row kernels use: host_row_isa(), read when the step is built.
enum class RowIsa { scalar, avx2, avx512 };

struct SoftmaxRows {
  RowIsa isa = RowIsa::scalar;
  size_t rows = 0;
  size_t extent = 0; // values per row, contiguous
  bool src_bf16 = false;
  bool dst_bf16 = false;
  // PyTorch's safe softmax (decomposed and fused attention): a row whose inputs are all -inf becomes
  // zeros instead of NaN.
  bool zero_fully_masked = false;
  // log_softmax: dst = (x - max) - log(sum(exp(x - max))), PyTorch's order of operations.
  bool log = false;

  // Attention rows: row r is query `first_query + r % block_rows` of head group r / block_rows, in
  // the order [batch][kv_heads][heads_per_kv]. An f32 mask row (the mask_*_stride fields, in
  // elements, 0 along a broadcast dim) is added before the softmax; a causal row sees keys up to its
  // query's index, and the entries after those are written as 0.
  bool has_mask = false;
  bool causal = false;
  size_t block_rows = 1;
  size_t first_query = 0;
  size_t kv_heads = 1;
  size_t heads_per_kv = 1;
  size_t mask_batch_stride = 0;
  size_t mask_head_stride = 0;
  size_t mask_query_stride = 0;
};

struct RmsNormRows {
  RowIsa isa = RowIsa::scalar;
  size_t rows = 0;
  size_t extent = 0; // values per row, contiguous
  bool src_bf16 = false;
  bool dst_bf16 = false;
  bool has_weight = false;
  float eps = 0.0f;
};

// The widest kernels that may run: AVX-512 (oneDNN's avx512_core) or AVX2 with FMA where the CPU has
// them and oneDNN's instruction-set cap (the backend option "max_isa", ONEDNN_MAX_CPU_ISA) allows
// them, so that a cap holds for our code too; scalar loops otherwise.
RowIsa host_row_isa() noexcept;

// Rows [begin, end): dst = exp(x - max) / sum(exp(x - max)) (or its log, rows.log) with x = src
// (+ mask), in f32. A NaN in a row makes the row NaN, and so does +inf (inf - inf), as in PyTorch.
// `mask` is the f32 mask's first element when rows.has_mask.
void softmax_rows(const SoftmaxRows& rows, const void* src, void* dst, const float* mask, size_t begin, size_t end);

// Rows [begin, end): dst = x / sqrt(mean(x^2) + eps) [* weight], in f32; `weight` (f32, `extent`
// values) when rows.has_weight.
void rms_norm_rows(const RmsNormRows& rows, const void* src, void* dst, const float* weight, size_t begin, size_t end);

// Values [begin, end): dst = src in the other type: f32 -> bf16 (`to_bf16`; to nearest even, a NaN as
// 0x7FC0, as oneDNN's reorder rounds) or bf16 -> f32 (exact).
void convert_values(RowIsa isa, bool to_bf16, const void* src, void* dst, size_t begin, size_t end);

// n bf16 values (raw bits): dst = a op b for op add, sub, mul or div (Schema.h's BinaryAlg), each
// widened exactly, the one f32 operation, rounded as convert_values() rounds: oneDNN's bf16 binary.
void binary_values_bf16(RowIsa isa, int64_t alg, const uint16_t* a, const uint16_t* b, uint16_t* dst, size_t n);

// The sigmoid family, which oneDNN computes as eltwise primitives: on a small vector (a
// squeeze-and-excitation gate's few hundred values) its kernel's call costs more than the values.
// And GELU on AVX2 (the header's first lines).
enum class Activation : unsigned char {
  logistic,    // 1 / (1 + exp(-x))
  swish,       // x * logistic(alpha x)
  hardsigmoid, // min(max(alpha x + beta, 0), 1)
  hardswish,   // x * hardsigmoid(x)
  // The tanh approximation computed as the same function x * logistic(2 sqrt(2 / pi) (x + 0.044715 x^3)),
  // which needs an exp and no tanh.
  gelu_tanh,
  gelu_erf, // x * erfc(-x / sqrt(2)) / 2, erfc by a fit of relative error below 1.2e-7 (RowKernels.cpp)
};

// Values [begin, end) of src into dst, f32 or bf16 in and out (`bf16`: computed in f32, rounded as
// convert_values() rounds), as PyTorch computes them at NaN and the infinities (a NaN stays NaN; swish,
// hardswish and both GELUs of -inf are NaN, -inf times 0). AVX2 with FMA where `isa` has it.
void activation_values(
    RowIsa isa,
    Activation activation,
    float alpha,
    float beta,
    bool bf16,
    const void* src,
    void* dst,
    size_t begin,
    size_t end);

} // namespace executorch::backends::onednn
