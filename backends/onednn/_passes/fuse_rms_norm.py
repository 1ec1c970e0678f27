# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""RMSNorm as one RMS_NORM step: x * rsqrt(mean(x * x, -1) + eps) [* weight].

Llama-style models (and Hugging Face's LlamaRMSNorm) export it as six steps: the square (a binary
multiply), the mean over the last dim, + eps, rsqrt, and two multiplies. The runtime computes it in one
pass per row on the host (oneDNN 3.2's layer normalization always subtracts the mean).
"""

from __future__ import annotations

from ..serialization.payload import Graph, Step
from ..serialization.schema import NO_VALUE, BinaryAlg, EltwiseAlg, ReductionAlg, StepKind
from ..serialization.shapes import same_dims


def fuse_rms_norm(graph: Graph) -> Graph:
    producers, consumers = graph.producers(), graph.consumers()

    def produced_once_read(value: int, kind: StepKind) -> Step | None:
        """The step of `kind` producing `value`, when only one step reads `value`."""
        if value not in producers or len(consumers.get(value, [])) != 1 or value in graph.outputs:
            return None
        step = graph.steps[producers[value]]
        return step if step.kind == kind and "post_ops" not in step.ints else None

    # Last steps first: the multiply by the weight is tried before the multiply it reads.
    for index in reversed(range(len(graph.steps))):
        fused = _rms_norm(graph, graph.steps[index], produced_once_read)
        if fused is not None:
            graph.steps[index] = fused  # the steps before it are left unread: drop_unused removes them
    return graph


def _rms_norm(graph: Graph, last: Step, produced_once_read) -> Step | None:  # type: ignore[no-untyped-def]
    if not _is_binary(last, BinaryAlg.MUL):
        return None
    weight = NO_VALUE
    normalized = _normalized(graph, last, produced_once_read)
    if normalized is None:
        for operand, other in (last.inputs, reversed(last.inputs)):
            inner = produced_once_read(operand, StepKind.BINARY)
            if inner is not None and _is_weight(graph, other, graph.values[operand].dims):
                normalized, weight = _normalized(graph, inner, produced_once_read), other
                break
    if normalized is None:
        return None
    x, eps = normalized
    if not same_dims(graph.values[last.outputs[0]].dims, graph.values[x].dims):
        return None  # a weight of higher rank broadcasts the result wider
    return Step(StepKind.RMS_NORM, [x, weight], list(last.outputs), floats={"eps": [eps]})


def _normalized(graph: Graph, step: Step, produced_once_read) -> tuple[int, float] | None:  # type: ignore[no-untyped-def]
    """(x, eps) when `step` is x * rsqrt(mean(x * x, -1) + eps)."""
    if not _is_binary(step, BinaryAlg.MUL):
        return None
    for x, factor in (step.inputs, reversed(step.inputs)):
        rsqrt = produced_once_read(factor, StepKind.ELTWISE)
        if rsqrt is None or not _is_eltwise(rsqrt, EltwiseAlg.POW, 1.0, -0.5):
            continue
        eps, mean_value = 0.0, rsqrt.inputs[0]
        shifted = produced_once_read(mean_value, StepKind.ELTWISE)
        if shifted is not None and shifted.ints["alg"][0] == EltwiseAlg.LINEAR and shifted.floats["alpha"][0] == 1.0:
            eps, mean_value = shifted.floats["beta"][0], shifted.inputs[0]
        mean = produced_once_read(mean_value, StepKind.REDUCTION)
        if mean is None or mean.ints["alg"][0] != ReductionAlg.MEAN or eps < 0.0:
            continue
        dims, reduced = graph.values[x].dims, graph.values[mean_value].dims
        if reduced != (*dims[:-1], 1):
            continue
        square = produced_once_read(mean.inputs[0], StepKind.BINARY)
        if square is not None and _is_binary(square, BinaryAlg.MUL) and square.inputs == [x, x]:
            return x, eps
    return None


def _is_binary(step: Step, alg: BinaryAlg) -> bool:
    return step.kind == StepKind.BINARY and step.ints["alg"][0] == alg and "post_ops" not in step.ints


def _is_eltwise(step: Step, alg: EltwiseAlg, alpha: float, beta: float) -> bool:
    return step.ints["alg"][0] == alg and step.floats["alpha"] == [alpha] and step.floats["beta"] == [beta]


def _is_weight(graph: Graph, value: int, dims: tuple[int, ...]) -> bool:
    """One value per element of the last dim, the same for every row."""
    weight_dims = graph.values[value].dims
    return bool(weight_dims) and weight_dims[-1] == dims[-1] and all(d == 1 for d in weight_dims[:-1])
