// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// int4_bf16_vector_matrix (Int4VectorMatrix.h): a bf16 row times int4 weights on the int8 unit, each 32
// values of the row split into two int8 slices on one power of two. Per step of 128 values: the
// int8-row kernel's nibbles (Int4Steps.h) against the hi slice (two dpbusd), that sum times 256, the lo
// slice's two dpbusd onto it (at most 2^21 in magnitude: exact in f32), scaled by the segments' scale
// times unit in one FMA. n 8192 x k 2048 and n 2048 x k 8192 in groups of 32, bf16 scales, 384 MiB of
// weights rotated, three runs each (the AMX Xeon of Int4VectorMatrix.h, a 2-core VM, a noisy hour):
// one thread 9.8-11.2 GB/s of weight bytes, where the f32-row kernel (on the row widened) made 8.3-8.9
// and the int8-row one 9.8-12.5; two threads 19.7-21.1, 15.6-17.3 and 16.6-23.6.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "Bf16.h"
#include "Int4Steps.h"
#include "Int4VectorMatrix.h"

namespace executorch::backends::onednn {
namespace {

// q = round(x * 2^(kUnitBits - E)) for a segment whose largest magnitude lies in [2^E, 2^(E + 1)):
// |q| <= 2^14, so that hi = (q + 128) >> 8 lies in [-64, 64] and lo = q - 256 * hi in [-128, 127].
constexpr int kUnitBits = 13;
// Segments whose largest magnitude lies outside [2^-kExponentLimit, 2^kExponentLimit) run the f32
// kernel: their unit could leave f32's normal range once multiplied by a scale.
constexpr int kExponentLimit = 100;

// A row as the kernel reads it, and a weight row's per-segment factors: one per thread.
struct SlicedRow {
  std::vector<int8_t> natural;          // both slices in order of k, hi then lo
  std::vector<int8_t> arranged;         // both as the steps read them (arrange_for_steps)
  LineAlignedBytes steps;               // per step: its 128 hi, then its 128 lo (64 and 64 in a last step of 64)
  std::vector<float> unit;              // per segment: 2^(E_s - kUnitBits)
  std::vector<float> sums;              // per segment: the sum of its q
  std::vector<float> biased_sums;       // per segment: 8 * sums, the weights' bias of 8 times the row
  std::vector<uint32_t> segment_groups; // per segment: its group (groups of other than 32)
  std::vector<float> scales;            // a weight row's, per segment: its group's scale * unit
  std::vector<float> zero_points;       // a weight row's zero points as f32 (groups of other than 32)
  std::vector<float> widened;           // the row in f32, for the f32 kernel
  std::vector<float> results;           // the f32 kernel's results, at their columns
};

// 2^exponent for exponent in f32's normal range.
inline float power_of_two(int exponent) {
  const uint32_t bits = static_cast<uint32_t>(exponent + 127) << 23;
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

// 16 bf16 values as f32 (exact).
ODNN_AVX512_VNNI inline __m512 widen(__m256i bits) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// 16 values into `high` and `low`; returns their q.
ODNN_AVX512_VNNI inline __m512i slice16(__m256i bits, __m512 up, int8_t* high, int8_t* low) {
  const __m512i q =
      _mm512_cvt_roundps_epi32(_mm512_mul_ps(widen(bits), up), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512i hi = _mm512_srai_epi32(_mm512_add_epi32(q, _mm512_set1_epi32(128)), 8);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(high), _mm512_cvtepi32_epi8(hi));
  _mm_storeu_si128(
      reinterpret_cast<__m128i*>(low), _mm512_cvtepi32_epi8(_mm512_sub_epi32(q, _mm512_slli_epi32(hi, 8))));
  return q;
}

// False where a segment's largest magnitude is NaN, infinite, or outside [2^-100, 2^100) and not 0.
ODNN_AVX512_VNNI bool slice_row(const uint16_t* row, size_t k, SlicedRow& out) {
  const size_t segments = k / kSegment;
  out.natural.resize(2 * k);
  out.arranged.resize(2 * k);
  int8_t* steps = out.steps.resize(2 * k);
  // Whole vectors of segments, the last padded with zeros (segment_factors()).
  const size_t padded = (segments + 15) / 16 * 16;
  for (std::vector<float>* values : {&out.unit, &out.sums, &out.biased_sums}) {
    values->resize(padded);
    std::fill(values->begin() + static_cast<ptrdiff_t>(segments), values->end(), 0.0f);
  }
  int8_t* high = out.natural.data();
  int8_t* low = high + k;
  for (size_t s = 0; s < segments; ++s) {
    const __m512i bits = _mm512_loadu_si512(row + s * kSegment);
    const __m512i magnitude = _mm512_and_si512(bits, _mm512_set1_epi16(0x7FFF));
    const uint32_t largest = _mm512_reduce_max_epu32(_mm512_max_epu32(
        _mm512_cvtepu16_epi32(_mm512_castsi512_si256(magnitude)),
        _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(magnitude, 1))));
    // The largest value's exponent: its bits are the largest, as for any non-negative floats.
    // An all-zero segment takes 0 (its q are all 0).
    const int exponent = largest == 0 ? 0 : static_cast<int>(largest >> 7) - 127;
    if (exponent < -kExponentLimit || exponent >= kExponentLimit) {
      return false; // also NaN and infinity (field 255) and denormals (field 0)
    }
    const __m512 up = _mm512_set1_ps(power_of_two(kUnitBits - exponent));
    const __m512i first = slice16(_mm512_castsi512_si256(bits), up, high + s * kSegment, low + s * kSegment);
    const __m512i second =
        slice16(_mm512_extracti64x4_epi64(bits, 1), up, high + s * kSegment + 16, low + s * kSegment + 16);
    out.unit[s] = power_of_two(exponent - kUnitBits);
    out.sums[s] = static_cast<float>(_mm512_reduce_add_epi32(_mm512_add_epi32(first, second))); // |sum| <= 2^19
    out.biased_sums[s] = 8.0f * out.sums[s];
  }
  int8_t* arranged = out.arranged.data();
  arrange_for_steps(high, k, arranged);
  arrange_for_steps(low, k, arranged + k);
  // Per step, its hi values then its lo ones: one stream for the kernel to read (measured: 10.5 GB/s of
  // weight bytes at k 8192 against 9.6 from two).
  for (size_t begin = 0; begin < k; begin += kStep) {
    const size_t count = std::min(kStep, k - begin);
    std::memcpy(steps + 2 * begin, arranged + begin, count);
    std::memcpy(steps + 2 * begin + count, arranged + k + begin, count);
  }
  return true;
}

// Segment s's inputs to a weight row's factors, 16 segments from `s` (the lanes of `mask`).
template <bool ZeroPoints, bool GroupOf32>
ODNN_AVX512_VNNI inline void segment_inputs(
    const Int4Bf16RowOperands& operands,
    const float* group_scales,
    const SlicedRow& p,
    size_t row_groups,
    size_t s,
    __mmask16 mask,
    __m512& scale,
    __m512& zero) {
  if constexpr (GroupOf32) {
    const uint16_t* bf16 = operands.scales.bf16_data();
    scale = bf16 != nullptr ? widen(_mm256_maskz_loadu_epi16(mask, bf16 + row_groups + s))
                            : _mm512_maskz_loadu_ps(mask, operands.scales.f32_data() + row_groups + s);
    if constexpr (ZeroPoints) {
      zero =
          _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(mask, operands.zero_points + row_groups + s)));
    }
  } else {
    const __m512i group = _mm512_maskz_loadu_epi32(mask, p.segment_groups.data() + s);
    scale = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mask, group, group_scales, 4);
    if constexpr (ZeroPoints) {
      zero = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mask, group, p.zero_points.data(), 4);
    }
  }
}

// Weight row r's per-segment scales (its group's scale times the segment's unit) into p.scales; returns
// their surplus, sum over segments of scale * (8 + zero point) * sums, in lanes. Groups of 32 read the
// scales where they lie, others from `group_scales`, the row's scales in f32. The per-call arrays are
// padded with zeros to whole vectors: only the scales' last load is masked.
template <bool ZeroPoints, bool GroupOf32>
ODNN_AVX512_VNNI __m512 segment_factors(
    const Int4MatrixShape& shape,
    const Int4Bf16RowOperands& operands,
    const float* group_scales,
    size_t r,
    SlicedRow& p) {
  const size_t segments = shape.k / kSegment, groups = shape.k / shape.group;
  if constexpr (ZeroPoints && !GroupOf32) {
    for (size_t g = 0; g < groups; g += 16) {
      const __mmask16 mask = first_lanes(groups - g);
      _mm512_mask_storeu_ps(
          p.zero_points.data() + g,
          mask,
          _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(mask, operands.zero_points + r * groups + g))));
    }
  }
  const float* unit = p.unit.data();
  const float* sums = ZeroPoints ? p.sums.data() : p.biased_sums.data();
  float* scales = p.scales.data();
  __m512 surplus = _mm512_setzero_ps();
  for (size_t s = 0; s < segments; s += 16) {
    const __mmask16 mask = first_lanes(segments - s);
    __m512 scale, zero = _mm512_setzero_ps();
    segment_inputs<ZeroPoints, GroupOf32>(operands, group_scales, p, r * groups, s, mask, scale, zero);
    const __m512 scaled = _mm512_mul_ps(scale, _mm512_loadu_ps(unit + s));
    _mm512_storeu_ps(scales + s, scaled);
    __m512 weight = _mm512_loadu_ps(sums + s);
    if constexpr (ZeroPoints) {
      weight = _mm512_mul_ps(_mm512_add_ps(zero, _mm512_set1_ps(8.0f)), weight);
    }
    surplus = _mm512_fmadd_ps(scaled, weight, surplus);
  }
  return surplus;
}

inline void store(const Int4Bf16RowOperands& operands, size_t r, float value) {
  if (operands.dst_f32 != nullptr) {
    operands.dst_f32[r] = value;
  } else {
    operands.dst_bf16[r] = to_bf16_bits(value);
  }
}

// Step t's products of both slices, combined: 256 * hi + lo per lane. `sliced` as SlicedRow::steps.
ODNN_AVX512_VNNI inline __m512 step_lanes(const uint8_t* weights, const int8_t* sliced, size_t t) {
  const __m512i bytes = _mm512_loadu_si512(weights + t * (kStep / 2));
  const __m512i even = biased_nibbles_avx512(bytes), odd = biased_nibbles_avx512(_mm512_srli_epi16(bytes, 4));
  const int8_t* high = sliced + 2 * t * kStep;
  const int8_t* low = high + kStep;
  const __m512i hi = _mm512_dpbusd_epi32(
      _mm512_dpbusd_epi32(_mm512_setzero_si512(), even, _mm512_loadu_si512(high)), odd, _mm512_loadu_si512(high + 64));
  const __m512i both = _mm512_dpbusd_epi32(
      _mm512_dpbusd_epi32(_mm512_slli_epi32(hi, 8), even, _mm512_loadu_si512(low)), odd, _mm512_loadu_si512(low + 64));
  return _mm512_cvtepi32_ps(both);
}

// Step t's four segment scales, each over its four lanes.
ODNN_AVX512_VNNI inline __m512 step_scales(const float* scales, size_t t) {
  return _mm512_permutexvar_ps(
      _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0),
      _mm512_castps128_ps512(_mm_loadu_ps(scales + 4 * t)));
}

// The last 64 values where k % 128 == 64: one vector [low nibbles | high nibbles] of its 32 bytes;
// lanes 0-3 and 8-11 hold its first segment, 4-7 and 12-15 its second.
ODNN_AVX512_VNNI inline __m512 tail(size_t k, const uint8_t* weights, const float* scales, const SlicedRow& p) {
  const size_t begin = k - kStep / 2;
  const __m512i both =
      _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(weights + begin / 2)));
  const __m512i nibbles = biased_nibbles_avx512(_mm512_mask_srli_epi16(both, 0xFFFF0000u, both, 4));
  const int8_t* high = p.steps.data() + 2 * begin;
  const __m512i hi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), nibbles, _mm512_loadu_si512(high));
  const __m512i lo = _mm512_dpbusd_epi32(_mm512_setzero_si512(), nibbles, _mm512_loadu_si512(high + kStep / 2));
  const size_t s = begin / kSegment;
  const __m512 scale = _mm512_mask_blend_ps(0xF0F0, _mm512_set1_ps(scales[s]), _mm512_set1_ps(scales[s + 1]));
  return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_slli_epi32(hi, 8), lo)), scale);
}

template <bool ZeroPoints, bool GroupOf32>
ODNN_AVX512_VNNI void sliced_rows(
    const Int4MatrixShape& shape, const Int4Bf16RowOperands& operands, SlicedRow& p, size_t begin, size_t end) {
  const size_t segments = shape.k / kSegment, steps = shape.k / kStep, groups = shape.k / shape.group;
  p.scales.resize((segments + 15) / 16 * 16);
  p.zero_points.resize(ZeroPoints && !GroupOf32 ? groups : 0);
  const uint8_t* last_line = last_line_of(shape.k, operands.weights, end);
  ScaleRows scale_rows(operands.scales, groups);
  for (size_t r = begin; r < end; ++r) {
    const uint8_t* weights = operands.weights + r * (shape.k / 2);
    const __m512 surplus =
        segment_factors<ZeroPoints, GroupOf32>(shape, operands, GroupOf32 ? nullptr : scale_rows(r), r, p);
    const float* scales = p.scales.data();
    // Two sums, so that consecutive steps do not wait on each other's FMA.
    __m512 sum0 = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
    for (size_t t = 0; t < steps; t += 2) {
      fetch_ahead(weights + t * (kStep / 2), last_line);
      sum0 = _mm512_fmadd_ps(step_lanes(weights, p.steps.data(), t), step_scales(scales, t), sum0);
      if (t + 1 < steps) {
        fetch_ahead(weights + (t + 1) * (kStep / 2), last_line);
        sum1 = _mm512_fmadd_ps(step_lanes(weights, p.steps.data(), t + 1), step_scales(scales, t + 1), sum1);
      }
    }
    if (shape.k % kStep != 0) {
      fetch_ahead(weights + steps * (kStep / 2), last_line);
      sum1 = _mm512_add_ps(sum1, tail(shape.k, weights, scales, p));
    }
    const float dot = _mm512_reduce_add_ps(_mm512_sub_ps(_mm512_add_ps(sum0, sum1), surplus));
    store(operands, r, operands.bias != nullptr ? dot + operands.bias[r] : dot);
  }
}

template <bool ZeroPoints>
void run_sliced(
    const Int4MatrixShape& shape, const Int4Bf16RowOperands& operands, SlicedRow& p, size_t begin, size_t end) {
  if (shape.group == kSegment) {
    sliced_rows<ZeroPoints, true>(shape, operands, p, begin, end);
    return;
  }
  p.segment_groups.resize(shape.k / kSegment);
  for (size_t s = 0; s < p.segment_groups.size(); ++s) {
    p.segment_groups[s] = static_cast<uint32_t>(s * kSegment / shape.group);
  }
  sliced_rows<ZeroPoints, false>(shape, operands, p, begin, end);
}

} // namespace

bool int4_bf16_rows_sliced(const Int4MatrixShape& shape) {
  return shape.isa == RowIsa::avx512 && shape.vnni && shape.vectorized();
}

void int4_bf16_vector_matrix(
    const Int4MatrixShape& shape, const Int4Bf16RowOperands& operands, size_t begin, size_t end) {
  if (begin >= end) {
    return;
  }
  thread_local SlicedRow prepared;
  if (int4_bf16_rows_sliced(shape) && slice_row(operands.row, shape.k, prepared)) {
    if (operands.zero_points != nullptr) {
      run_sliced<true>(shape, operands, prepared, begin, end);
    } else {
      run_sliced<false>(shape, operands, prepared, begin, end);
    }
    return;
  }
  prepared.widened.resize(shape.k);
  for (size_t k = 0; k < shape.k; ++k) {
    prepared.widened[k] = from_bf16_bits(operands.row[k]);
  }
  float* results = operands.dst_f32;
  if (results == nullptr) {
    prepared.results.resize(end); // the f32 kernel writes columns [begin, end) of its dst
    results = prepared.results.data();
  }
  const Int4FloatRowOperands widened{
      prepared.widened.data(), operands.weights, operands.scales, operands.zero_points, operands.bias, results};
  int4_float_vector_matrix(shape, widened, begin, end);
  if (operands.dst_f32 == nullptr) {
    for (size_t r = begin; r < end; ++r) {
      operands.dst_bf16[r] = to_bf16_bits(results[r]);
    }
  }
}

} // namespace executorch::backends::onednn
