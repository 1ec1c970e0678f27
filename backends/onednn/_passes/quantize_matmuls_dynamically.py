# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""dynamic_int8=True: matmuls with a stored 2-D weight (linear layers) compute in int8, their activations
quantized per row (per token) at run time and their weights per output column ahead of time.

    a @ W + bias   becomes   QUANTIZE_ROWS(a) -> q (s8), row_scale (f32, [..., 1])
                             MATMUL(q, Wq; weight_scales) * row_scale + bias

Wq = round(W / weight_scale), weight_scale = max|W column| / 127, symmetric: oneDNN 3.2 takes one src
zero point per tensor only, and a per-tensor activation scale is what loses precision on transformer
activations, whose tokens differ in magnitude. The row scale and the bias become the first post-ops of
the matmul (fuse_post_ops folds the two binaries), so activations and residual adds fused after them
apply to the dequantized result. One QUANTIZE_ROWS serves every matmul reading the same activation
(a transformer's q, k and v projections). Runs before fuse_post_ops.
"""

from __future__ import annotations

import torch

from ..serialization.payload import Graph, Step
from ..serialization.schema import NO_VALUE, BinaryAlg, DType, StepKind

FLOAT_TYPES = {DType.F32, DType.BF16}
INT8_ATTRIBUTES = ("src_scale", "weight_scales", "dst_scale")


def quantize_matmuls_dynamically(graph: Graph) -> Graph:
    rows: dict[int, tuple[int, int]] = {}  # activation -> its quantized value and row scales
    steps: list[Step] = []
    for step in graph.steps:
        if not _has_stored_weight(graph, step):
            steps.append(step)
            continue
        activation = step.inputs[0]
        if activation not in rows:
            dims = graph.values[activation].dims
            quantized = graph.add_value(DType.S8, dims)
            scales = graph.add_value(DType.F32, (*dims[:-1], 1))
            steps.append(Step(StepKind.QUANTIZE_ROWS, [activation], [quantized, scales]))
            rows[activation] = (quantized, scales)
        steps.extend(_int8_matmul(graph, step, *rows[activation]))
    graph.steps = steps
    return graph


def _has_stored_weight(graph: Graph, step: Step) -> bool:
    if step.kind != StepKind.MATMUL or any(name in step.floats for name in INT8_ATTRIBUTES):
        return False
    if "post_ops" in step.ints:  # a scale folded into it (attention scores): not a linear layer
        return False
    activation, weight = step.inputs[:2]
    weights = graph.constant_data.get(weight)
    return (
        weights is not None
        and weights.dim() == 2
        and graph.values[weight].dtype in FLOAT_TYPES
        and graph.values[activation].dtype in FLOAT_TYPES
        and activation not in graph.constant_data
    )


def _int8_matmul(graph: Graph, step: Step, quantized: int, scales: int) -> list[Step]:
    """The matmul on s8 operands, then the row-scale multiply and the bias add (fused later)."""
    weight = step.inputs[1]
    transpose_b = bool(step.ints.get("transpose_b", [0])[0])
    weights, weight_scales = quantize_per_column(graph.constant_data[weight].float(), transpose_b)
    out = step.outputs[0]
    out_dims = graph.values[out].dims
    product = graph.add_value(DType.F32, out_dims)
    matmul = Step(
        StepKind.MATMUL,
        [quantized, graph.add_constant(weights, DType.S8)],
        [product],
        ints=dict(step.ints),
        floats={**step.floats, "weight_scales": weight_scales},
    )
    bias = step.inputs[2] if len(step.inputs) > 2 and step.inputs[2] != NO_VALUE else None
    scaled = out if bias is None else graph.add_value(DType.F32, out_dims)
    steps = [matmul, Step(StepKind.BINARY, [product, scales], [scaled], ints={"alg": [BinaryAlg.MUL]})]
    if bias is not None:
        steps.append(Step(StepKind.BINARY, [scaled, bias], [out], ints={"alg": [BinaryAlg.ADD]}))
    return steps


def quantize_per_column(weights: torch.Tensor, transpose_b: bool) -> tuple[torch.Tensor, list[float]]:
    """s8 weights (symmetric, [-127, 127]) and one scale per output column: the matmul's N, dim 0 of a
    [N, K] weight (transpose_b) or dim 1 of a [K, N] one."""
    reduce_dim = 1 if transpose_b else 0
    max_abs = weights.abs().amax(dim=reduce_dim)
    scales = torch.where(max_abs > 0, max_abs / 127, torch.ones_like(max_abs))
    per_column = scales.unsqueeze(reduce_dim)
    quantized = torch.clamp(torch.round(weights / per_column), -127, 127).to(torch.int8)
    return quantized, scales.tolist()
