# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""A batch norm reading only a convolution's result is folded into the convolution's weights and bias.

In inference a batch norm is a per-channel affine map: conv -> batch norm becomes one convolution, and
the batch norm's pass over memory goes away. Computed in float64, stored in the weights' type.
"""

from __future__ import annotations

import torch

from ..serialization.payload import Graph
from ..serialization.schema import NO_VALUE, DType, StepKind


def fold_batch_norm(graph: Graph) -> Graph:
    """conv -> batch norm becomes one conv with rescaled weights and a shifted bias."""
    index = 0
    while index < len(graph.steps):
        norm = graph.steps[index]
        index += 1
        if norm.kind != StepKind.BATCH_NORM:
            continue
        producers, consumers = graph.producers(), graph.consumers()
        src = norm.inputs[0]
        conv = graph.steps[producers[src]] if src in producers else None
        if conv is None or conv.kind != StepKind.CONVOLUTION or "post_ops" in conv.ints or "src_scale" in conv.floats:
            continue
        if consumers[src] != [index - 1] or src in graph.outputs:
            continue
        weight, bias = graph.constant_data.get(conv.inputs[1]), _optional_constant(graph, conv.inputs[2])
        mean, var = graph.constant_data.get(norm.inputs[1]), graph.constant_data.get(norm.inputs[2])
        gamma, beta = _optional_constant(graph, norm.inputs[3]), _optional_constant(graph, norm.inputs[4])
        if weight is None or mean is None or var is None or any(x is False for x in (bias, gamma, beta)):
            continue
        scale = torch.rsqrt(var.double() + norm.floats["eps"][0])
        if gamma is not None:
            scale = scale * gamma.double()
        shift = -mean.double() * scale + (0 if beta is None else beta.double())
        if bias is not None:
            shift = shift + bias.double() * scale
        folded_weight = weight.double() * scale.reshape(-1, *([1] * (weight.dim() - 1)))
        conv.inputs[1] = graph.add_constant(folded_weight.to(weight.dtype), graph.values[conv.inputs[1]].dtype)
        conv.inputs[2] = graph.add_constant(shift.to(torch.float32), DType.F32)  # biases stay f32
        conv.outputs = list(norm.outputs)
        del graph.steps[index - 1]
        index -= 1
    return graph


def _optional_constant(graph: Graph, value_id: int) -> torch.Tensor | bool | None:
    """The constant's data, None when the input is absent, False when it is not a constant."""
    if value_id == NO_VALUE:
        return None
    return graph.constant_data.get(value_id, False)
