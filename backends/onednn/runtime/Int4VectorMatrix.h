// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// torchao's "8da4w" linear layers on the host: int8 activations quantized per row (dynamic,
// asymmetric) times int4 weights with grouped scales (f32 or bf16: GroupScales.h) and no zero points;
// and its weight-only "4w" ones, f32 rows times the same weights (int4_float_vector_matrix) and bf16
// rows on the int8 unit (int4_bf16_vector_matrix, Int4Bf16Rows.cpp), at the end. A decode step (one
// row) streams the 4-bit weights from memory once per token; oneDNN 3.13.1 runs that shape at about
// 3.5 GB/s of weight bytes on one core of an AVX-512 Xeon. The kernels here run at the core's memory
// bandwidth: one thread, n 8192, k 2048, 1 GiB of weights rotated, 12-13.5 GB/s of weight bytes at
// group 128 and 11-12.5 at group 32 (whose f32 scales add a quarter to the bytes read), on every vector
// path, where a plain read of memory gets 13.3-14 ("Intel(R) Xeon(R) Processor" with AMX, a 2-core
// VM). The scalar loop: about 1 GB/s.
//
// The weights stay in torch's linear layout [n, k], two values a byte along k: byte i of a row (row
// stride k / 2) holds k = 2i in its low nibble and k = 2i + 1 in its high nibble, each a two's
// complement value in [-8, 7]. scales[r * (k / group) + g] scales row r's values k in
// [g * group, (g + 1) * group).
#pragma once

#include <cstddef>
#include <cstdint>

#include "GroupScales.h"
#include "RowKernels.h"

namespace executorch::backends::onednn {

struct Int4MatrixShape {
  RowIsa isa = RowIsa::scalar; // host_row_isa()
  bool vnni = false;           // int8_products_exact() (CpuIsa.h): AVX512-VNNI with avx512, AVX-VNNI with avx2
  size_t n = 0;                // the weights' rows, the result's length
  size_t k = 0;                // the row's length; even
  size_t group = 0;            // values per scale; divides k
  // The vector kernels take k in steps of 128 (and a last one of 64) and a scale per 32 values at
  // most; other shapes run the scalar loop, whatever `isa` says.
  bool vectorized() const {
    return isa != RowIsa::scalar && k % 64 == 0 && group % 32 == 0;
  }
};

struct Int4RowOperands {
  const int8_t* q = nullptr;        // k quantized activations
  float row_scale = 0.0f;           // their scale; NaN makes every result NaN
  int32_t zero_point = 0;           // their zero point
  const uint8_t* weights = nullptr; // [n, k / 2] packed int4
  GroupScales scales;               // [n, k / group]
  const float* terms = nullptr;     // [n], int4_column_terms()
  const float* bias = nullptr;      // [n], or none
  float* dst = nullptr;             // [n]
};

// torchao's choose_qparams_affine (ASYMMETRIC, block [1, k], int8 in [-128, 127], eps None: the
// smallest normal f32) then quantize_affine, bit for bit in f32: with low = min(min(x), 0) and
// high = max(max(x), 0),
//   s = max((high - low) / 255, FLT_MIN), zp = clamp(-128 - round(low / s), -128, 127),
//   q = clamp(round(x * (1 / s)) + zp, -128, 127), rounding half to even.
// A row whose scale is not finite (a NaN or infinity in it, or a range beyond FLT_MAX) gets scale NaN,
// zero point 0 and q zeros, so that every product of the row is NaN rather than a finite number.
void quantize_row_affine_int8(const float* x, size_t k, int8_t* q, float* scale, int32_t* zero_point);

// Rows [begin, end) of a [rows, k] matrix, each as quantize_row_affine_int8.
void quantize_rows_affine_int8(
    const float* x, size_t rows, size_t k, int8_t* q, float* scales, int32_t* zero_points, size_t begin, size_t end);

// Rows [begin, end) of q (s8 [rows, k]) less their zero points, as bf16 (raw bits): exact, since
// |q - zero point| <= 255 needs 8 significant bits, bf16's count.
void center_rows_bf16(const int8_t* q, size_t k, const int32_t* zero_points, uint16_t* dst, size_t begin, size_t end);

// terms[r] for r in [begin, end) = sum over groups g, in order, of scales[r, g] * (sum of row r's values
// in g), the integer sums exact: what a zero point contributes to row r's products. Once, as a graph
// is built; threads may call it on disjoint ranges at once.
void int4_column_terms(
    const Int4MatrixShape& shape,
    const uint8_t* weights,
    const GroupScales& scales,
    float* terms,
    size_t begin,
    size_t end);

// dst[r] for r in [begin, end):
//   row_scale * (sum_g scales[r, g] * float(sum_{k in g} q[k] * w[r, k]) - float(zero_point) * terms[r])
//   (+ bias[r]),
// the products summed exactly in int32. The scalar loop adds the groups in order. The vector kernels
// sum (w + 8) * q exactly in lanes of 32 bits, each lane within one group, scale the lanes (of a step,
// or of a group of steps) in f32 into two alternating partial sums, take each group's
// scale * 8 * sum q off, and add the lanes up last.
// The other columns of dst are untouched. Threads may call it on disjoint ranges at once; each keeps
// the row rearranged for its kernel in a buffer of its own, allocated on its first call.
void int4_vector_matrix(const Int4MatrixShape& shape, const Int4RowOperands& operands, size_t begin, size_t end);

// dst[m, r] -= (row_scales[m] * (float(zero_points[m]) + zero_point_offset)) * terms[r] for rows m in
// [begin, end) of a [rows, n] result: the zero points' share, after a matmul of the quantized rows
// (shifted by the offset) that ignored them.
void subtract_zero_point_terms(
    float* dst,
    size_t rows,
    size_t n,
    const float* row_scales,
    const int32_t* zero_points,
    float zero_point_offset,
    const float* terms,
    size_t begin,
    size_t end);

// torchao's weight-only int4 ("4w") linear layers: an f32 row times the same packed int4 weights,
// with grouped scales and optional int8 zero points. The vector kernels turn each nibble into its f32
// weight on the way, and that, not memory, sets their pace: per 64 bytes of weights, 8 permutes, 8 FMAs
// and 8 operations that spread the nibbles over 32-bit lanes, about 15 cycles on AVX-512. One thread,
// n 8192, k 2048, 1 GiB of weights rotated, the Xeon above with other work on its other core (noisy):
// AVX-512 9.5-10.5 GB/s of weight bytes at group 32 and 10.1-11 at group 128 (8.6-9 and 9.3-10.7 with
// zero points), where the int8-row kernel got 11.7-13.8 and a plain read 12.1-14.1 in the same runs;
// AVX2 7.6-8.3 and 7.1-8.3 (6.5-6.7 and 6.8-7.6 with zero points); the scalar loop 0.9-1.2.
struct Int4FloatRowOperands {
  const float* row = nullptr;          // k values
  const uint8_t* weights = nullptr;    // [n, k / 2] packed int4, as for int4_vector_matrix
  GroupScales scales;                  // [n, k / group]
  const int8_t* zero_points = nullptr; // [n, k / group] in [-8, 7], or none (all zero)
  const float* bias = nullptr;         // [n], or none
  float* dst = nullptr;                // [n]
};

// dst[r] for r in [begin, end): torchao's dequantize_affine then linear in f32,
//   sum over k of row[k] * W[r, k] (+ bias[r]), W[r, k] = float(w[r, k] - zero_points[r, g]) * scales[r, g]
// for k in group g. Sums in f32, in an order that depends on the path:
// - the scalar loop adds row[k] * W[r, k] into two sums, of even and of odd k, each in order of k;
// - AVX-512 makes W as above, bit for bit (a 16-entry f32 table per group, indexed by the nibbles),
//   adds the products by FMA into four vector sums (by the parity of k and of k / 32), adds those
//   pairwise, then their lanes;
// - AVX2 sums row[k] * float(w - zero point) over each 64 values into two vector sums (by the parity
//   of k), adds those times their lanes' group scales into two running sums, then those and their lanes.
// Zero points must lie in [-8, 7], as torchao's int4 quantization makes them: the AVX2 kernel holds
// 8 * (w - zero point) in a byte. NaN and infinity in the row propagate as through the f32 products
// (an infinity times a weight of 0 is NaN). AVX2 runs on the row times 2^-27 (2^-28 without zero
// points), which lets it convert the weights from the top byte of an int32: row values below 2^-99 in
// magnitude lose bits there to denormals.
// The other columns of dst are untouched. Threads may call it on disjoint ranges at once; each keeps
// the row rearranged for its kernel, and a weight row's tables, in buffers of its own. `vnni` is not
// read; `vectorized()` picks the scalar loop as for int4_vector_matrix.
void int4_float_vector_matrix(
    const Int4MatrixShape& shape, const Int4FloatRowOperands& operands, size_t begin, size_t end);

// The same layers on a bf16 row (raw bits), on the int8 unit: export-llm's 4w under bf16 activations,
// where int4_products() is "fast" (CompressedMatmulSteps.cpp). The f32 kernel above converts every
// nibble to f32 on the way and runs below the memory's rate; dpbusd takes 64 nibbles an instruction.
// Each 32 values of the row (a segment s, within one group) become integers on one power of two:
// q = round(x * 2^(13 - E_s)), E_s the exponent of the segment's largest magnitude (|q| <= 2^14, each
// value within 2^(E_s - 14) <= max|x_s| * 2^-14 of q * 2^(E_s - 13); exact where a value's exponent is
// within 6 of E_s), split as q = 256 * hi + lo with hi and lo int8, and
//   dst[r] = sum_s scale[r, g(s)] * 2^(E_s - 13) * (256 * sum (w + 8) * hi + sum (w + 8) * lo
//            - (8 + zero point[r, g(s)]) * sum q) (+ bias[r]),
// the integer sums exact, the rest in f32 (rounded to bf16 last into dst_bf16: to nearest even, as
// oneDNN's reorder; a NaN as 0x7FC0). A bf16 model's own dequantize_affine rounds each weight
// times its scale to bf16 (2^-9 of it at most): on a segment's largest value alone 32 times the 2^-14
// this allows each value of the segment.
// The row runs through int4_float_vector_matrix (widened exactly) instead where this kernel does not
// apply (int4_bf16_rows_sliced() false), and where a segment's largest magnitude is NaN, an infinity,
// or outside [2^-100, 2^100) (zero is fine): there IEEE arithmetic decides, as in the f32 kernel.
// The other columns of dst are untouched; threads may call it on disjoint ranges at once.
struct Int4Bf16RowOperands {
  const uint16_t* row = nullptr;       // k bf16 values
  const uint8_t* weights = nullptr;    // [n, k / 2] packed int4, as for int4_vector_matrix
  GroupScales scales;                  // [n, k / group]
  const int8_t* zero_points = nullptr; // [n, k / group] in [-8, 7], or none (all zero)
  const float* bias = nullptr;         // [n], or none
  uint16_t* dst_bf16 = nullptr;        // [n], rounded to bf16; or
  float* dst_f32 = nullptr;            // [n]
};

// Whether int4_bf16_vector_matrix runs its own kernel on `shape`: AVX-512 with VNNI, and a
// vectorized() shape.
bool int4_bf16_rows_sliced(const Int4MatrixShape& shape);

void int4_bf16_vector_matrix(
    const Int4MatrixShape& shape, const Int4Bf16RowOperands& operands, size_t begin, size_t end);

} // namespace executorch::backends::onednn
