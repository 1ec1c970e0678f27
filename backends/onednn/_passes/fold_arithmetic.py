# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Arithmetic that changes nothing or that a matmul can apply more cheaply is folded away.

drop_neutral_binaries removes `x + 0`, `x * 1` and the like with a constant operand; fold_operand_scales
moves the scales of a matmul's operands to one post-op of its result. Both come from exported
attention (an all-zero mask, queries and keys scaled by sqrt(scale) each). fold_channel_scales moves a
per-column constant factor of a compressed matmul's result into its weights' scales (export_llm's
weight-only int8 linears).
"""

from __future__ import annotations

import torch

from ..serialization.payload import Graph, Step
from ..serialization.schema import NO_VALUE, BinaryAlg, DType, EltwiseAlg, PostOpKind, StepKind
from ..serialization.shapes import same_dims
from .simplify_layout import is_layout_only

# alg -> (neutral constant, whether it may be the first operand too)
NEUTRAL_OPERANDS = {
    BinaryAlg.ADD: (0.0, True),
    BinaryAlg.SUB: (0.0, False),
    BinaryAlg.MUL: (1.0, True),
    BinaryAlg.DIV: (1.0, False),
}


def drop_neutral_binaries(graph: Graph) -> Graph:
    """Remove `x + 0`, `x * 1` and the like with a constant operand.

    Exported attention adds an all-zero mask when the model builds one from an all-visible padding mask.
    """

    def absorbed(step: Step) -> bool:
        kept = _neutral_binary_operand(graph, step)
        if kept is None or step.outputs[0] in graph.outputs:
            return False
        graph.rename_reads(step.outputs[0], kept)
        return True

    graph.remove_absorbed(absorbed)
    return graph


def _neutral_binary_operand(graph: Graph, step: Step) -> int | None:
    """The operand this binary passes through unchanged, if the other is a neutral constant."""
    if step.kind != StepKind.BINARY or "post_ops" in step.ints or step.floats:
        return None
    alg = BinaryAlg(step.ints["alg"][0])
    if alg not in NEUTRAL_OPERANDS:
        return None
    neutral, either_side = NEUTRAL_OPERANDS[alg]
    src0, src1 = step.inputs
    out = graph.values[step.outputs[0]]
    for kept, constant in ((src0, src1), (src1, src0)) if either_side else ((src0, src1),):
        tensor = graph.constant_data.get(constant)
        value = graph.values[kept]
        if tensor is None or not same_dims(value.dims, out.dims) or value.dtype != out.dtype:
            continue
        if bool(torch.all(tensor == neutral)):
            return kept
    return None


def fold_operand_scales(graph: Graph) -> Graph:
    """Move `matmul(a * s, b * t)` to `matmul(a, b) * (s * t)`: one post-op instead of two passes over memory.

    The decomposition of scaled_dot_product_attention scales queries and keys by sqrt(scale) each.
    Only for matmuls without bias or quantization, whose scaled operands feed nothing else.
    """
    for step in graph.steps:
        if step.kind != StepKind.MATMUL or len(step.inputs) < 3 or step.inputs[2] != NO_VALUE:
            continue
        if set(step.ints) - {"transpose_b", "post_ops"} or set(step.floats) - {"post_op_params"}:
            continue
        scale = 1.0
        for operand in (0, 1):
            found = _scaled_source(graph, step, operand)
            if found is None:
                continue
            scaling, reader = found
            graph.rename_reads(scaling.outputs[0], scaling.inputs[0], [reader])
            del graph.steps[next(i for i, s in enumerate(graph.steps) if s is scaling)]
            scale *= scaling.floats["alpha"][0]
        if scale != 1.0:
            step.ints["post_ops"] = [PostOpKind.ELTWISE, EltwiseAlg.LINEAR, *step.ints.get("post_ops", [])]
            step.floats["post_op_params"] = [scale, 0.0, *step.floats.get("post_op_params", [])]
    return graph


def _scaled_source(graph: Graph, matmul: Step, operand: int) -> tuple[Step, Step] | None:
    """The `x * alpha` step behind this operand (through layout-only steps) and the step reading it."""
    producers, consumers = graph.producers(), graph.consumers()
    reader, value_id = matmul, matmul.inputs[operand]
    if matmul.inputs.count(value_id) != 1:
        return None
    while value_id in producers and value_id not in graph.outputs and len(consumers.get(value_id, [])) == 1:
        producer = graph.steps[producers[value_id]]
        if producer.kind == StepKind.ELTWISE and producer.ints["alg"][0] == EltwiseAlg.LINEAR:
            return (producer, reader) if producer.floats["beta"][0] == 0.0 else None
        if not is_layout_only(graph, producer):
            return None
        reader, value_id = producer, producer.inputs[0]
    return None


def fold_channel_scales(graph: Graph) -> Graph:
    """`compressed_matmul(x, W) * s` with s a constant per output column (dims [N] or [1, .., N]) becomes
    the matmul with its scales times s: one pass over the result less. Not with a bias, which s would
    scale too."""

    def absorbed(scaling: Step) -> bool:
        found = _channel_scaled_matmul(graph, scaling)
        if found is None:
            return False
        matmul, factors = found
        scales = graph.constant_data[matmul.inputs[2]] * factors.reshape(-1, 1).float()
        matmul.inputs[2] = graph.add_constant(scales, DType.F32)
        matmul.outputs = [scaling.outputs[0]]
        return True

    graph.remove_absorbed(absorbed)
    return graph


def _channel_scaled_matmul(graph: Graph, step: Step) -> tuple[Step, torch.Tensor] | None:
    """The compressed matmul `step` scales per column and the factors, if the fold applies."""
    if step.kind != StepKind.BINARY or step.ints != {"alg": [BinaryAlg.MUL]} or step.floats:
        return None
    producers, consumers = graph.producers(), graph.consumers()
    for product, constant in (step.inputs, step.inputs[::-1]):
        factors = graph.constant_data.get(constant)
        if product not in producers or factors is None or product in graph.outputs:
            continue
        matmul = graph.steps[producers[product]]
        if matmul.kind != StepKind.COMPRESSED_MATMUL or len(consumers[product]) != 1:
            continue
        if matmul.inputs[2] not in graph.constant_data:
            continue
        if len(matmul.inputs) > 3 and matmul.inputs[3] != NO_VALUE:
            continue
        columns = graph.values[matmul.inputs[1]].dims[0]
        result, out = graph.values[product], graph.values[step.outputs[0]]
        per_column = factors.dim() >= 1 and factors.numel() == columns and factors.shape[-1] == columns
        if per_column and same_dims(result.dims, out.dims) and result.dtype == out.dtype:
            return matmul, factors
    return None
