# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""precision="bf16": activations inside the delegate become bf16; its inputs and outputs stay fp32.

Convolutions and matmuls then read bf16 (their fp32 weights are converted once, at init) and
accumulate in fp32, which is what oneDNN's bf16 kernels (AVX512-BF16, AMX) do. Steps whose result is
numerically sensitive keep an fp32 output: their bf16 inputs are widened and the statistics, sums
and exponentials are computed in fp32. So does a transformer's residual stream. Which kind does what
is a column of serialization/step_kinds.py.
"""

from __future__ import annotations

from ..serialization.payload import Graph, Step
from ..serialization.schema import BinaryAlg, DType, PostOpKind, StepKind
from ..serialization.step_kinds import COMPUTE_IN_BF16, FOLLOW_INPUT_DTYPE, KEEP_FP32

FLOAT_TYPES = (DType.F32, DType.BF16)


def compute_in_bf16(graph: Graph) -> Graph:
    boundary = set(graph.inputs) | set(graph.outputs)
    for step in graph.steps:
        if any(name in step.floats for name in ("src_scale", "weight_scales", "dst_scale")):
            continue  # int8 steps and quantize/dequantize keep the types the quantization chose
        if step.kind in COMPUTE_IN_BF16:
            step.ints["compute_bf16"] = [1]
        keep_fp32 = step.kind in KEEP_FP32 or _is_residual_matmul(step)
        for value_id in step.outputs:
            value = graph.values[value_id]
            if value_id in boundary or value.dtype != DType.F32 or keep_fp32:
                continue
            follows = step.kind in FOLLOW_INPUT_DTYPE and graph.values[step.inputs[0]].dtype in FLOAT_TYPES
            # (A gather of compressed rows dequantizes them: its result is a float like any step's.)
            value.dtype = graph.values[step.inputs[0]].dtype if follows else DType.BF16
    return graph


def _is_residual_matmul(step: Step) -> bool:
    """A transformer's residual stream (a matmul with the residual add as post-op) stays fp32: rounded to
    bf16 after every layer, ViT-Tiny's error against fp32 grew from 1.5e-2 to 2.2e-2."""
    return step.kind == StepKind.MATMUL and any(
        (op.kind, op.alg) == (PostOpKind.BINARY, BinaryAlg.ADD) for op in step.post_ops()
    )
