// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// Numeric codes and limits of the OneDnnBackend payload, repeated from serialization/schema.py (their
// one definition) for the runtime: test/test_schema_parity.py fails when the two differ. Each
// enumeration's kNum... is one past its largest code, which tables keyed by the code (CodeTable.h) check
// against at compile time.
#pragma once

#include <cstddef>
#include <cstdint>

#include "CodeTable.h"

namespace executorch::backends::onednn {

inline constexpr char kMagic[4] = {'O', 'D', 'N', 'N'};
// Version 3 (1 and 2 had no checksum and are no longer read). The header's CRC-32 covers every byte
// from kChecksummedFrom on; flag kFlagDynamic says the dynamic-shape section follows the steps, flag
// kFlagWeightChecksums that every constant record ends with the CRC-32 of the constant's bytes.
inline constexpr uint32_t kVersion = 3;
inline constexpr size_t kHeaderSize = 40;
inline constexpr size_t kChecksummedFrom = 20;
inline constexpr uint32_t kFlagDynamic = 1;
inline constexpr uint32_t kFlagWeightChecksums = 2;
inline constexpr uint32_t kNoValue = 0xFFFFFFFFu;
inline constexpr uint32_t kMaxRank = 6;
inline constexpr uint32_t kMaxStringLength = 1024;
inline constexpr uint32_t kMaxAttributeCount = 1u << 20; // per-channel scales of a 1M-row weight

// S64 and BOOL values are read and written only by the host index steps (is_host_index_step): oneDNN's
// CPU primitives do not compute on them.
// S4: constants only, two values a byte along the last dim (low nibble first).
enum class DType : uint8_t { F32 = 0, BF16 = 1, F16 = 2, S32 = 3, S8 = 4, U8 = 5, S64 = 6, Bool = 7, S4 = 8 };
inline constexpr uint8_t kNumDTypes = 9;

// Where a value's bytes may stay (set ahead of time by _passes/plan_layouts.py): in the layout its
// producing primitive picks on this CPU, or plain.
enum class Layout : uint8_t { Native = 0, Plain = 1 };
inline constexpr uint8_t kNumLayouts = 2;

// Opcodes of a dim's expression over the dynamic sizes (postfix; CONST and SYMBOL take one operand).
enum class ShapeOp : int64_t {
  Const = 0,
  Symbol = 1,
  Add = 2,
  Mul = 3,
  FloorDiv = 4,
  Mod = 5,
  Max = 6,
  Min = 7,
};
inline constexpr int64_t kNumShapeOps = 8;
inline constexpr uint32_t kMaxSymbols = 16;
inline constexpr uint32_t kMaxShapeCode = 256; // i64 entries per expression
inline constexpr int64_t kMaxSymbolValue = 0x7FFFFFFF;
// Ranges longer than this are solved for only from the size itself (checking that an expression
// gives each size from one value alone walks the range).
inline constexpr int64_t kMaxSolvedRange = int64_t{1} << 16;
// CACHED_ATTENTION's accumulators for one query row live on the stack.
inline constexpr uint32_t kMaxAttentionValueWidth = 512;

enum class AttributeType : uint8_t { I64List = 0, F64List = 1 };
inline constexpr uint8_t kNumAttributeTypes = 2;

enum class StepKind : uint32_t {
  Convolution = 1,
  Deconvolution = 2,
  Matmul = 3,
  Eltwise = 4,
  Binary = 5,
  Pooling = 6,
  Reduction = 7,
  BatchNorm = 8,
  LayerNorm = 9,
  Softmax = 10,
  Reorder = 11,
  Reshape = 12,
  Concat = 13,
  Resampling = 14,
  Pad = 15,
  QuantizeRows = 16,
  Attention = 17,
  RmsNorm = 18,
  AdaptivePooling = 19,
  ArgReduction = 20,
  Gather = 21,
  HostElementwise = 22,
  IndexPut = 23,
  CompressedMatmul = 24,
  CachedAttention = 25,
  Rotary = 26,
};
inline constexpr uint32_t kNumStepKinds = 27; // codes 1..26; 0 is unused

enum class EltwiseAlg : int64_t {
  Relu = 0,
  Clip = 1,
  GeluErf = 2,
  GeluTanh = 3,
  Swish = 4,
  Logistic = 5,
  Tanh = 6,
  Hardswish = 7,
  Hardsigmoid = 8,
  Elu = 9,
  Exp = 10,
  Log = 11,
  Sqrt = 12,
  Abs = 13,
  Linear = 14,
  Pow = 15,
  Square = 16,
  // Host-only (HostLoops.h), never post-ops.
  Round = 17,
  Floor = 18,
  Ceil = 19,
  Trunc = 20,
  Log1p = 21,
};
inline constexpr int64_t kNumEltwiseAlgs = 22;
enum class BinaryAlg : int64_t { Add = 0, Sub = 1, Mul = 2, Div = 3, Max = 4, Min = 5 };
inline constexpr int64_t kNumBinaryAlgs = 6;
enum class PoolingAlg : int64_t { Max = 0, AvgIncludePadding = 1, AvgExcludePadding = 2 };
inline constexpr int64_t kNumPoolingAlgs = 3;
enum class ReductionAlg : int64_t { Mean = 0, Sum = 1, Max = 2, Min = 3 };
inline constexpr int64_t kNumReductionAlgs = 4;
enum class ResamplingAlg : int64_t { Nearest = 0, Linear = 1 };
inline constexpr int64_t kNumResamplingAlgs = 2;
enum class PostOpKind : int64_t { Eltwise = 0, Binary = 1 };
inline constexpr int64_t kNumPostOpKinds = 2;
enum class ArgReductionAlg : int64_t { Max = 0, Min = 1 };
inline constexpr int64_t kNumArgReductionAlgs = 2;
// Elementwise work on the host, with numpy broadcasting: the divisions with a rounding mode (F32 or
// S64), comparisons (F32 or S64 operands, a BOOL result), WHERE (BOOL condition, then two operands)
// the logical operations (BOOL operands and result), and maximum and minimum (F32: a NaN in either
// operand gives NaN, as PyTorch's do and oneDNN's binary max and min do not).
enum class HostElementwiseAlg : int64_t {
  FloorDivide = 0,
  TruncDivide = 1,
  Eq = 2,
  Ne = 3,
  Lt = 4,
  Le = 5,
  Gt = 6,
  Ge = 7,
  Where = 8,
  LogicalAnd = 9,
  LogicalOr = 10,
  LogicalXor = 11,
  Maximum = 12,
  Minimum = 13,
};
inline constexpr int64_t kNumHostElementwiseAlgs = 14;

// Input slots of a step kind: `fixed_inputs` slots, of which those at index >= `required_inputs`
// may be NO_VALUE (or left off at the end). Kinds with post-ops take one more input per binary
// post-op after the fixed slots; variadic kinds take `required_inputs` or more inputs. A host index
// step is the only kind that may read or write S64 and BOOL values (serialization/step_kinds.py's
// host_index: test_schema_parity.py compares the two).
struct StepSignature {
  const char* name;
  uint32_t required_inputs;
  uint32_t fixed_inputs;
  bool variadic;
  bool has_post_ops;
  uint32_t outputs;
  bool host_index;
};

inline constexpr CodeRow<StepKind, StepSignature> kStepSignatures[] = {
    {StepKind::Convolution, {"CONVOLUTION", 2, 3, false, true, 1, false}},
    {StepKind::Deconvolution, {"DECONVOLUTION", 2, 3, false, true, 1, false}},
    {StepKind::Matmul, {"MATMUL", 2, 3, false, true, 1, false}},
    {StepKind::Eltwise, {"ELTWISE", 1, 1, false, false, 1, false}},
    {StepKind::Binary, {"BINARY", 2, 2, false, true, 1, false}},
    {StepKind::Pooling, {"POOLING", 1, 1, false, false, 1, false}},
    {StepKind::Reduction, {"REDUCTION", 1, 1, false, false, 1, false}},
    {StepKind::BatchNorm, {"BATCH_NORM", 3, 5, false, false, 1, false}},
    {StepKind::LayerNorm, {"LAYER_NORM", 1, 3, false, false, 1, false}},
    {StepKind::Softmax, {"SOFTMAX", 1, 1, false, false, 1, false}},
    {StepKind::Reorder, {"REORDER", 1, 1, false, false, 1, false}},
    {StepKind::Reshape, {"RESHAPE", 1, 1, false, false, 1, false}},
    {StepKind::Concat, {"CONCAT", 1, 1, true, false, 1, false}},
    {StepKind::Resampling, {"RESAMPLING", 1, 1, false, false, 1, false}},
    {StepKind::Pad, {"PAD", 1, 1, false, false, 1, false}},
    {StepKind::QuantizeRows, {"QUANTIZE_ROWS", 1, 1, false, false, 2, false}},
    {StepKind::Attention, {"ATTENTION", 3, 4, false, false, 1, false}},
    {StepKind::RmsNorm, {"RMS_NORM", 1, 2, false, false, 1, false}},
    {StepKind::AdaptivePooling, {"ADAPTIVE_POOLING", 1, 1, false, false, 1, false}},
    {StepKind::ArgReduction, {"ARG_REDUCTION", 1, 1, false, false, 1, true}},
    {StepKind::Gather, {"GATHER", 2, 4, false, false, 1, true}},
    {StepKind::HostElementwise, {"HOST_ELEMENTWISE", 2, 3, false, false, 1, true}},
    {StepKind::IndexPut, {"INDEX_PUT", 3, 3, true, false, 1, true}},
    {StepKind::CompressedMatmul, {"COMPRESSED_MATMUL", 3, 5, false, false, 1, false}},
    {StepKind::CachedAttention, {"CACHED_ATTENTION", 4, 4, false, false, 1, true}},
    {StepKind::Rotary, {"ROTARY", 3, 3, false, false, 1, false}},
};
static_assert(covers_codes(kStepSignatures, 1, kNumStepKinds), "one signature per StepKind (code 0 is unused)");

inline bool is_known_step_kind(uint32_t code) {
  return find_code(kStepSignatures, code) != nullptr;
}

// For a kind Payload.cpp has checked with is_known_step_kind().
inline const StepSignature& step_signature(StepKind kind) {
  return *find_code(kStepSignatures, static_cast<int64_t>(kind));
}

inline bool is_host_index_step(StepKind kind) {
  const StepSignature* signature = find_code(kStepSignatures, static_cast<int64_t>(kind));
  return signature != nullptr && signature->host_index;
}

inline const char* step_kind_name(StepKind kind) {
  const StepSignature* signature = find_code(kStepSignatures, static_cast<int64_t>(kind));
  return signature != nullptr ? signature->name : "UNKNOWN";
}

inline const char* dtype_name(uint8_t code) {
  static constexpr CodeRow<DType, const char*> kNames[] = {
      {DType::F32, "F32"},
      {DType::BF16, "BF16"},
      {DType::F16, "F16"},
      {DType::S32, "S32"},
      {DType::S8, "S8"},
      {DType::U8, "U8"},
      {DType::S64, "S64"},
      {DType::Bool, "BOOL"},
      {DType::S4, "S4"},
  };
  static_assert(covers_codes(kNames, 0, kNumDTypes), "dtype_name needs one row per DType");
  const char* const* name = find_code(kNames, code);
  return name != nullptr ? *name : "UNKNOWN";
}

} // namespace executorch::backends::onednn
