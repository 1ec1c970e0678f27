# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Reshapes and permutes that change nothing are dropped, and chains of them merged into one.

Exported attention is full of them (a head split is view -> permute -> view); left in place they stand
between a matmul and the residual add that should become its post-op.
"""

from __future__ import annotations

from ..serialization.payload import Graph, Step
from ..serialization.schema import StepKind
from ..serialization.shapes import same_dims


def simplify_layout(graph: Graph) -> Graph:
    """Drop reshapes and permutes that change nothing and merge chains of them.

    Exported attention is full of them (a head split is view -> permute -> view, and the decomposition of
    scaled_dot_product_attention adds identity views); left in place they stand between a matmul and the
    residual add that should become its post-op.
    """
    while _simplify_once(graph):
        pass
    return graph


def _simplify_once(graph: Graph) -> bool:
    producers, consumers = graph.producers(), graph.consumers()
    for index, step in enumerate(graph.steps):
        if not is_layout_only(graph, step):
            continue
        src, dst = step.inputs[0], step.outputs[0]
        if _is_identity(graph, step) and dst not in graph.outputs:
            graph.rename_reads(dst, src)
            del graph.steps[index]
            return True
        if src not in producers or src in graph.outputs or consumers.get(src) != [index]:
            continue
        earlier = graph.steps[producers[src]]
        if earlier.kind != step.kind or not is_layout_only(graph, earlier):
            continue
        if step.kind == StepKind.REORDER:
            first, second = _permutation(graph, earlier), _permutation(graph, step)
            step.ints["permutation"] = [first[axis] for axis in second]
        step.inputs = list(earlier.inputs)
        del graph.steps[producers[src]]
        return True
    return False


def is_layout_only(graph: Graph, step: Step) -> bool:
    """A reshape, or a permute/copy that keeps the type (no cast, no quantization, no slice)."""
    if step.kind not in (StepKind.RESHAPE, StepKind.REORDER) or step.floats:
        return False
    if set(step.ints) - {"permutation"}:
        return False
    return graph.values[step.inputs[0]].dtype == graph.values[step.outputs[0]].dtype


def _permutation(graph: Graph, step: Step) -> list[int]:
    return step.ints.get("permutation") or list(range(len(graph.values[step.inputs[0]].dims)))


def _is_identity(graph: Graph, step: Step) -> bool:
    if step.kind == StepKind.RESHAPE:
        return same_dims(graph.values[step.inputs[0]].dims, graph.values[step.outputs[0]].dims)
    return _permutation(graph, step) == list(range(len(graph.values[step.inputs[0]].dims)))
