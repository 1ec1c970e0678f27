# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The numeric codes and limits of the OneDnnBackend payload: the one place they are defined.

runtime/Schema.h repeats them for the C++ runtime and test_schema_parity.py checks that it agrees,
name for name and value for value; FORMAT.md explains the format in words and names the codes only."""

from enum import IntEnum

import torch

MAGIC = b"ODNN"
VERSION = 3  # 1 and 2 had no checksum; a runtime reads only this one
FLAG_DYNAMIC = 1  # header flag: the dynamic-shape section follows the steps
FLAG_WEIGHT_CHECKSUMS = 2  # header flag: every constant record ends with the CRC-32 of its bytes
NO_VALUE = 0xFFFFFFFF
MAX_RANK = 6
HEADER_SIZE = 40
CHECKSUMMED_FROM = 20  # the CRC-32 covers every byte after its own field: flags, counts and body
MAX_STRING_LENGTH = 1024
MAX_ATTRIBUTE_COUNT = 1 << 20  # per-channel scales of a weight with up to 1M rows (an LM head)


class DType(IntEnum):
    F32 = 0
    BF16 = 1
    F16 = 2
    S32 = 3
    S8 = 4
    U8 = 5
    # Only the host index steps (HOST_INDEX_STEPS) may read and write these: oneDNN's CPU primitives do not take them.
    S64 = 6
    BOOL = 7
    # Constants only: signed 4-bit weights, two per byte along the last dim (low nibble first); the
    # value's dims are the logical ones.
    S4 = 8


class Layout(IntEnum):
    """Where the runtime may keep a value's bytes; set by `_passes/plan_layouts.py`."""

    NATIVE = 0  # as its producing primitive lays them out on this CPU (blocked, channels-last or plain)
    PLAIN = 1  # PyTorch's contiguous row-major order


class AttributeType(IntEnum):
    """The element type of a step attribute's list."""

    I64_LIST = 0
    F64_LIST = 1


TORCH_TO_DTYPE: dict[torch.dtype, DType] = {
    torch.float32: DType.F32,
    torch.bfloat16: DType.BF16,
    torch.float16: DType.F16,
    torch.int32: DType.S32,
    torch.int8: DType.S8,
    torch.uint8: DType.U8,
    torch.int64: DType.S64,
    torch.bool: DType.BOOL,
}


class ShapeOp(IntEnum):
    """Postfix opcodes of a dynamic dim's expression; CONST and SYMBOL take one operand."""

    CONST = 0
    SYMBOL = 1
    ADD = 2
    MUL = 3
    FLOORDIV = 4
    MOD = 5
    MAX = 6
    MIN = 7


MAX_SYMBOLS = 16
MAX_SHAPE_CODE = 256
MAX_SYMBOL_VALUE = 0x7FFFFFFF  # init() refuses a dynamic size whose range reaches past this
MAX_SOLVED_RANGE = 1 << 16  # a size is solved for from an expression over a shorter range only
MAX_ATTENTION_VALUE_WIDTH = 512  # CACHED_ATTENTION's accumulators for one query row live on the stack


class StepKind(IntEnum):
    CONVOLUTION = 1
    DECONVOLUTION = 2
    MATMUL = 3
    ELTWISE = 4
    BINARY = 5
    POOLING = 6
    REDUCTION = 7
    BATCH_NORM = 8
    LAYER_NORM = 9
    SOFTMAX = 10
    REORDER = 11
    RESHAPE = 12
    CONCAT = 13
    RESAMPLING = 14
    PAD = 15
    QUANTIZE_ROWS = 16
    ATTENTION = 17
    RMS_NORM = 18
    ADAPTIVE_POOLING = 19
    ARG_REDUCTION = 20
    GATHER = 21
    HOST_ELEMENTWISE = 22
    INDEX_PUT = 23
    COMPRESSED_MATMUL = 24
    CACHED_ATTENTION = 25
    ROTARY = 26


class EltwiseAlg(IntEnum):
    RELU = 0
    CLIP = 1
    GELU_ERF = 2
    GELU_TANH = 3
    SWISH = 4
    LOGISTIC = 5
    TANH = 6
    HARDSWISH = 7
    HARDSIGMOID = 8
    ELU = 9
    EXP = 10
    LOG = 11
    SQRT = 12
    ABS = 13
    LINEAR = 14
    POW = 15
    SQUARE = 16
    # oneDNN has none of these (its round takes f32 only): the runtime computes them on the host,
    # in f32; never a post-op.
    ROUND = 17  # to nearest, ties to even
    FLOOR = 18
    CEIL = 19
    TRUNC = 20
    LOG1P = 21


HOST_ELTWISE_ALGS = frozenset({EltwiseAlg.ROUND, EltwiseAlg.FLOOR, EltwiseAlg.CEIL, EltwiseAlg.TRUNC, EltwiseAlg.LOG1P})


class BinaryAlg(IntEnum):
    ADD = 0
    SUB = 1
    MUL = 2
    DIV = 3
    MAX = 4
    MIN = 5


class PoolingAlg(IntEnum):
    MAX = 0
    AVG_INCLUDE_PADDING = 1
    AVG_EXCLUDE_PADDING = 2


class ReductionAlg(IntEnum):
    MEAN = 0
    SUM = 1
    MAX = 2
    MIN = 3


class ResamplingAlg(IntEnum):
    NEAREST = 0
    LINEAR = 1


class ArgReductionAlg(IntEnum):
    MAX = 0
    MIN = 1


class HostElementwiseAlg(IntEnum):
    """Elementwise work on the host under numpy broadcasting (F32 or S64 operands)."""

    FLOOR_DIVIDE = 0
    TRUNC_DIVIDE = 1
    EQ = 2  # the comparisons write BOOL
    NE = 3
    LT = 4
    LE = 5
    GT = 6
    GE = 7
    WHERE = 8  # inputs: the BOOL condition, the operand taken where it holds, the other
    LOGICAL_AND = 9  # BOOL operands and result
    LOGICAL_OR = 10
    LOGICAL_XOR = 11
    MAXIMUM = 12  # F32 operands, NaN where either is NaN (PyTorch's maximum and minimum)
    MINIMUM = 13


class PostOpKind(IntEnum):
    ELTWISE = 0
    BINARY = 1
