# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""What each step kind is to the passes, one row per StepKind: the one place a new kind is described.

The passes read their sets from here (fuse_post_ops: post-op hosts; fuse_requantize: int8 steps that
write a quantized result; compute_in_bf16: which kinds compute in bf16 or keep fp32; plan_layouts:
which kinds pick, follow or need plain layouts; the payload writer: which kinds may touch int64 and
bool values). test_step_kinds.py checks that every kind has a row and that the rows agree with each
other and with what fuse_post_ops does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from .schema import BinaryAlg, StepKind

# Binary algorithms whose operands may be swapped: fuse_post_ops fuses either operand's producer,
# plan_layouts puts the native operand first, the lowering puts the full-size operand first.
COMMUTATIVE = frozenset({BinaryAlg.ADD, BinaryAlg.MUL, BinaryAlg.MAX, BinaryAlg.MIN})


class LayoutRole(Enum):
    """How a step's result is laid out (see `_passes/plan_layouts.py`)."""

    CHOOSES = "chooses"  # its oneDNN primitive picks the layout of its result (format_tag::any)
    FOLLOWS_FIRST_INPUT = "follows"  # computes in the layout of its first input
    VIEW_OF_FIRST_INPUT = "view"  # passes its input's layout on through a view or a copy
    JOINS_INPUTS = "joins"  # keeps its inputs' layouts when none is plain, else writes plain (concat)
    WRITES_PLAIN = "plain"  # its result is always plain


@dataclass(frozen=True)
class StepKindRow:
    layout: LayoutRole
    # Number of fixed input slots before the post-op operands; None: the kind takes no post-ops.
    post_op_fixed_inputs: int | None = None
    # Takes a binary post-op (its dst is the post-op's first operand), not only eltwise ones.
    binary_post_op_host: bool = False
    reads_plain: bool = False  # reads its first input in plain layout only
    # An int8 step of this kind writes a quantized result itself (dst scale and zero point) when only a
    # quantize reads its fp32 result (fuse_requantize).
    requantize_host: bool = False
    # Under precision="bf16": a matrix step reads bf16 and accumulates in fp32 (compute_bf16) even between
    # fp32 delegate inputs and outputs; a numerically sensitive step keeps an fp32 result; a layout step
    # keeps its input's type (a type change there would be an extra conversion).
    computes_in_bf16: bool = False
    keeps_fp32: bool = False
    follows_input_dtype: bool = False
    host_index: bool = False  # a host index step: the only kind that may read or write int64 and bool


STEP_KINDS: dict[StepKind, StepKindRow] = {
    StepKind.CONVOLUTION: StepKindRow(
        LayoutRole.CHOOSES,
        post_op_fixed_inputs=3,
        binary_post_op_host=True,
        requantize_host=True,
        computes_in_bf16=True,
    ),
    StepKind.DECONVOLUTION: StepKindRow(
        LayoutRole.CHOOSES, post_op_fixed_inputs=3, binary_post_op_host=True, computes_in_bf16=True
    ),
    StepKind.MATMUL: StepKindRow(
        LayoutRole.WRITES_PLAIN,
        post_op_fixed_inputs=3,
        binary_post_op_host=True,
        reads_plain=True,
        requantize_host=True,
        computes_in_bf16=True,
    ),
    StepKind.ELTWISE: StepKindRow(LayoutRole.FOLLOWS_FIRST_INPUT),
    # Not a binary post-op host: a binary step with a broadcast binary post-op (RMSNorm's x * r * weight)
    # ran so slowly in oneDNN 3.2 that the Llama-style example's prefill fell from ~3150 to ~1750
    # tokens/s (measured 2026-11-30).
    StepKind.BINARY: StepKindRow(LayoutRole.FOLLOWS_FIRST_INPUT, post_op_fixed_inputs=2),
    StepKind.POOLING: StepKindRow(LayoutRole.CHOOSES),
    StepKind.REDUCTION: StepKindRow(LayoutRole.CHOOSES, keeps_fp32=True),
    StepKind.BATCH_NORM: StepKindRow(LayoutRole.FOLLOWS_FIRST_INPUT, keeps_fp32=True),
    StepKind.LAYER_NORM: StepKindRow(LayoutRole.WRITES_PLAIN, reads_plain=True, keeps_fp32=True),
    StepKind.SOFTMAX: StepKindRow(LayoutRole.WRITES_PLAIN, reads_plain=True, keeps_fp32=True),
    StepKind.REORDER: StepKindRow(LayoutRole.VIEW_OF_FIRST_INPUT, follows_input_dtype=True),
    StepKind.RESHAPE: StepKindRow(LayoutRole.VIEW_OF_FIRST_INPUT, follows_input_dtype=True),
    StepKind.CONCAT: StepKindRow(LayoutRole.JOINS_INPUTS),
    StepKind.RESAMPLING: StepKindRow(LayoutRole.CHOOSES),
    StepKind.PAD: StepKindRow(LayoutRole.WRITES_PLAIN),
    StepKind.QUANTIZE_ROWS: StepKindRow(LayoutRole.WRITES_PLAIN, reads_plain=True, keeps_fp32=True),
    # Attention keeps its scores and softmax in fp32 under bf16.
    StepKind.ATTENTION: StepKindRow(LayoutRole.WRITES_PLAIN, reads_plain=True, computes_in_bf16=True),
    StepKind.RMS_NORM: StepKindRow(LayoutRole.WRITES_PLAIN, reads_plain=True, keeps_fp32=True),
    StepKind.ADAPTIVE_POOLING: StepKindRow(LayoutRole.WRITES_PLAIN, reads_plain=True, keeps_fp32=True),
    StepKind.ARG_REDUCTION: StepKindRow(LayoutRole.WRITES_PLAIN, host_index=True),
    # A gather copies rows of its data as they are.
    StepKind.GATHER: StepKindRow(LayoutRole.WRITES_PLAIN, follows_input_dtype=True, host_index=True),
    StepKind.HOST_ELEMENTWISE: StepKindRow(LayoutRole.WRITES_PLAIN, host_index=True),
    StepKind.INDEX_PUT: StepKindRow(LayoutRole.WRITES_PLAIN, host_index=True),
    # Weights kept compressed (s4/s8 with grouped scales); under bf16 the activations turn bf16 and the
    # weights are decompressed to bf16 inside the kernel.
    StepKind.COMPRESSED_MATMUL: StepKindRow(LayoutRole.WRITES_PLAIN, reads_plain=True, computes_in_bf16=True),
    # ExecuTorch's custom_sdpa over a KV cache, on the host in f32; reads its start position (int64).
    StepKind.CACHED_ATTENTION: StepKindRow(LayoutRole.WRITES_PLAIN, reads_plain=True, keeps_fp32=True, host_index=True),
    # An interleaved rotary embedding (_passes/fuse_interleaved_rotary.py), on the host; under bf16 it
    # reads and writes bf16 and computes in f32.
    StepKind.ROTARY: StepKindRow(LayoutRole.WRITES_PLAIN, reads_plain=True),
}


def kinds_where(has: Callable[[StepKindRow], bool]) -> frozenset[StepKind]:
    return frozenset(kind for kind, row in STEP_KINDS.items() if has(row))


POST_OP_FIXED_INPUTS: dict[StepKind, int] = {
    kind: row.post_op_fixed_inputs for kind, row in STEP_KINDS.items() if row.post_op_fixed_inputs is not None
}
BINARY_POST_OP_HOSTS = kinds_where(lambda row: row.binary_post_op_host)
READ_PLAIN = kinds_where(lambda row: row.reads_plain)
REQUANTIZE_HOSTS = kinds_where(lambda row: row.requantize_host)
COMPUTE_IN_BF16 = kinds_where(lambda row: row.computes_in_bf16)
KEEP_FP32 = kinds_where(lambda row: row.keeps_fp32)
FOLLOW_INPUT_DTYPE = kinds_where(lambda row: row.follows_input_dtype)
HOST_INDEX_STEPS = kinds_where(lambda row: row.host_index)
