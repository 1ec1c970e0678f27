# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Per-channel gates on a 1x1 convolution's input move onto the convolution's weights.

A squeeze-and-excitation block (MobileNetV3, EfficientNet) multiplies an activation x [1, C, H, W] by
gates s [1, C, 1, 1] computed from x itself, and the product feeds only the block's 1x1 projection. For
one image conv(x * s, W) = conv(x, W * s): the gates then scale the [C_out, C, 1, 1] weights (one small
binary step, and the weights' reorder into the kernel's layout, per run) instead of the whole
activation (a pass over C * H * W values both ways). Taken where the activation outweighs the weights
enough to pay for the reorder, H * W > 6 * C_out: EfficientNet-B0's blocks from 112x112 to 28x28 and
MobileNetV3-small's at 56x56, not their 14x14 ones.
"""

from __future__ import annotations

from ..serialization.payload import Graph, Step
from ..serialization.schema import BinaryAlg, DType, StepKind
from ..serialization.shapes import SymDim

# Gated positions per output channel above which the fold pays. oneDNN reorders the scaled weights
# into the kernel's layout at about 1 ns a value (80x480 into Acdb32a: 33 us on the model-207 Xeon) and
# multiplies activations at about 0.2, so a 14x14 layer projecting to 80 channels (196 positions, 2.45
# per channel) lost by folding: 42 us against 18. Raising the bound from 2 to 6 unfolds those layers:
# MobileNetV3-small 2.1% and EfficientNet-B0 1.1% faster (BENCHMARKS.md); 24 changed nothing more.
FOLD_MIN_POSITIONS_PER_OUTPUT_CHANNEL = 6

# The attributes of a plain fp32 convolution (a quantized one carries scales and zero points too).
PLAIN_CONVOLUTION_INTS = frozenset({"strides", "padding_l", "padding_r", "dilation", "groups", "post_ops"})
PLAIN_CONVOLUTION_FLOATS = frozenset({"post_op_params"})


def fold_channel_gates(graph: Graph) -> Graph:
    """`conv1x1(x * s)` with s [1, C, 1, 1] becomes `conv1x1(x)` with weights `W * s`, where cheaper."""
    for gating in graph.steps:  # each rewritten step keeps its place: after the gates, before the conv
        found = _gated_projection(graph, gating)
        if found is None:
            continue
        conv, activation, gates = found
        weights = conv.inputs[1]
        scaled = graph.add_value(DType.F32, graph.values[weights].dims)
        gating.inputs, gating.outputs = [weights, gates], [scaled]
        conv.inputs[0], conv.inputs[1] = activation, scaled
    return graph


def _gated_projection(graph: Graph, step: Step) -> tuple[Step, int, int] | None:
    """The 1x1 convolution reading `step`'s product, the activation and the gates, if the fold applies."""
    if step.kind != StepKind.BINARY or step.ints.get("alg") != [BinaryAlg.MUL] or set(step.ints) != {"alg"}:
        return None
    if step.floats or step.outputs[0] in graph.outputs:
        return None
    users = graph.consumers().get(step.outputs[0], [])
    if len(users) != 1:
        return None
    conv = graph.steps[users[0]]
    if conv.kind != StepKind.CONVOLUTION or conv.inputs[0] != step.outputs[0] or conv.inputs.count(conv.inputs[0]) != 1:
        return None
    if set(conv.ints) - PLAIN_CONVOLUTION_INTS or set(conv.floats) - PLAIN_CONVOLUTION_FLOATS:
        return None
    weights = graph.values[conv.inputs[1]]
    if conv.inputs[1] not in graph.constant_data or weights.dtype != DType.F32 or len(weights.dims) != 4:
        return None
    plain_1x1 = (
        weights.dims[2:] == (1, 1)
        and conv.ints["groups"] == [1]
        and conv.ints["strides"] == [1, 1]
        and conv.ints["padding_l"] == [0, 0]
        and conv.ints["padding_r"] == [0, 0]
    )
    if not plain_1x1:
        return None
    for activation, gates in (step.inputs, step.inputs[::-1]):
        x, s = graph.values[activation], graph.values[gates]
        dims = (*x.dims, *s.dims, *weights.dims)
        if any(isinstance(dim, SymDim) for dim in dims) or x.dtype != DType.F32 or s.dtype != DType.F32:
            continue
        if len(x.dims) != 4 or x.dims[0] != 1 or s.dims != (1, x.dims[1], 1, 1) or weights.dims[1] != x.dims[1]:
            continue
        if x.dims[2] * x.dims[3] > FOLD_MIN_POSITIONS_PER_OUTPUT_CHANNEL * weights.dims[0]:
            return conv, activation, gates
    return None
