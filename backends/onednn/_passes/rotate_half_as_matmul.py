# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Rotary embeddings' rotate_half, a concat of signed slices of the last dim, becomes one matmul.

cat(-x[..., D/2:], x[..., :D/2]) is x @ R for a constant signed permutation R: one matmul instead of
two slice copies, a negation and a concat, and the multiply by sin and the add that follow become its
post-ops (fuse_post_ops).
"""

from __future__ import annotations

import torch

from ..serialization.payload import Graph, Step
from ..serialization.schema import NO_VALUE, DType, EltwiseAlg, StepKind
from ..serialization.shapes import SymDim, same_dims

# Widest last dim rewritten: the matmul costs D multiply-adds per value, the chain it replaces a few
# memory passes; rotary heads are 64-128 wide.
MAX_WIDTH = 256


def rotate_half_as_matmul(graph: Graph) -> Graph:
    """Rotary embeddings' rotate_half, cat(-x[..., D/2:], x[..., :D/2]), and any concat of signed
    slices of one tensor's last dim that covers it exactly once, become x @ R with R a constant
    signed permutation: one matmul instead of two slice copies, a negation and a concat, and the
    multiply by sin and the add that follow become its post-ops (fuse_post_ops)."""
    producers, consumers = graph.producers(), graph.consumers()
    for index, step in enumerate(graph.steps):
        if step.kind != StepKind.CONCAT or step.outputs[0] in graph.outputs:
            continue
        found = _signed_pieces(graph, step, producers, consumers)
        if found is None:
            continue
        source, pieces = found
        width = graph.values[source].dims[-1]
        rotation = torch.zeros(width, width)
        column = 0
        for start, length, sign in pieces:
            for offset in range(length):
                rotation[start + offset, column + offset] = sign
            column += length
        matrix = graph.add_constant(rotation, DType.F32)
        graph.steps[index] = Step(StepKind.MATMUL, [source, matrix, NO_VALUE], list(step.outputs), {"transpose_b": [0]})
    return graph


def _signed_pieces(
    graph: Graph, concat: Step, producers: dict[int, int], consumers: dict[int, list[int]]
) -> tuple[int, list[tuple[int, int, float]]] | None:
    """(x, [(start, length, sign)]) when every input of `concat` (along x's last dim) is a slice of x's
    last dim, or -1 or +1 times one, used only there, and together they take each of x's columns once."""
    dims = graph.values[concat.outputs[0]].dims
    if concat.ints["axis"][0] != len(dims) - 1 or isinstance(dims[-1], SymDim) or not 2 <= dims[-1] <= MAX_WIDTH:
        return None
    if graph.values[concat.outputs[0]].dtype != DType.F32:
        return None
    pieces, sources = [], set()
    for value in concat.inputs:
        sign = 1.0
        step = _only_producer(graph, value, producers, consumers)
        if step is not None and step.kind == StepKind.ELTWISE and _is_negation(step):
            sign = -1.0
            step = _only_producer(graph, step.inputs[0], producers, consumers)
        if step is None or step.kind != StepKind.REORDER or set(step.ints) != {"offsets"}:
            return None
        offsets = step.ints["offsets"]
        source = step.inputs[0]
        source_dims = graph.values[source].dims
        if any(offsets[:-1]) or graph.values[step.outputs[0]].dims[:-1] != source_dims[:-1]:
            return None
        sources.add(source)
        pieces.append((offsets[-1], graph.values[step.outputs[0]].dims[-1], sign))
    if len(sources) != 1:
        return None
    (source,) = sources
    columns = sorted(column for start, length, _ in pieces for column in range(start, start + length))
    if columns != list(range(dims[-1])) or not same_dims(graph.values[source].dims, dims):
        return None
    return source, pieces


def _only_producer(graph: Graph, value: int, producers: dict[int, int], consumers: dict[int, list[int]]) -> Step | None:
    """The step producing `value` when nothing else reads it."""
    if value not in producers or len(consumers.get(value, [])) != 1 or value in graph.outputs:
        return None
    return graph.steps[producers[value]]


def _is_negation(step: Step) -> bool:
    return (
        step.ints.get("alg") == [EltwiseAlg.LINEAR]
        and step.floats.get("alpha") == [-1.0]
        and step.floats.get("beta") == [0.0]
    )
