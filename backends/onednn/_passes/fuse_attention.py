# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Attention as one ATTENTION step: softmax(q @ kᵀ * scale [+ mask]) @ v.

PyTorch's decomposition of scaled_dot_product_attention (and attention written out by hand) lowers to
MATMUL [RESHAPE] [BINARY add mask] SOFTMAX [RESHAPE] MATMUL, the scale a post-op of the first matmul
(fuse_post_ops), and the mask too when no reshape separates them. As one step, the runtime keeps one
block of scores in memory at a time, adds the mask and applies causality inside its softmax, and reads
the keys where they are (`keys_transposed` when the first matmul read them as kᵀ). A constant mask that
is causality's (0 on and below the diagonal, -inf above) becomes the `causal` attribute and is dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..serialization.payload import Graph, Step
from ..serialization.schema import NO_VALUE, BinaryAlg, EltwiseAlg, PostOpKind, StepKind
from ..serialization.shapes import same_dims

INT8_ATTRIBUTES = ("src_scale", "weight_scales", "dst_scale")


@dataclass
class _Scores:
    """The first matmul's reading of the scores: its scale and the mask it (or a BINARY) adds."""

    matmul: Step
    scale: float
    mask: int | None


def fuse_attention(graph: Graph) -> Graph:
    producers, consumers = graph.producers(), graph.consumers()
    for softmax in list(graph.steps):
        fused = _attention(graph, softmax, producers, consumers)
        if fused is not None:
            last, step = fused
            graph.steps[last] = step  # the steps in between are left unread: drop_unused removes them
    return graph


def _attention(
    graph: Graph, softmax: Step, producers: dict[int, int], consumers: dict[int, list[int]]
) -> tuple[int, Step] | None:
    if softmax.kind != StepKind.SOFTMAX or softmax.ints.get("log", [0])[0] != 0:
        return None
    source = softmax.inputs[0]
    if softmax.ints["axis"][0] != len(graph.values[source].dims) - 1:
        return None

    def only_reader(value: int) -> Step | None:
        """The step reading `value`, when exactly one does and it is not a graph output."""
        readers = consumers.get(value, [])
        return graph.steps[readers[0]] if len(readers) == 1 and value not in graph.outputs else None

    def up(value: int, scaling: bool) -> tuple[int, float]:
        """Up through reshapes (and, with `scaling`, multiplications by a constant), read once each."""
        factor = 1.0
        while value in producers and only_reader(value):
            step = graph.steps[producers[value]]
            if scaling and step.kind == StepKind.ELTWISE and step.ints["alg"][0] == EltwiseAlg.LINEAR:
                if step.floats["beta"][0] != 0.0:
                    break
                factor *= step.floats["alpha"][0]
            elif step.kind != StepKind.RESHAPE:
                break
            value = step.inputs[0]
        return value, factor

    scores = _scores(graph, source, producers, up, only_reader)
    if scores is None:
        return None
    probabilities = softmax.outputs[0]
    reader = only_reader(probabilities)
    while reader is not None and reader.kind == StepKind.RESHAPE:
        probabilities = reader.outputs[0]
        reader = only_reader(probabilities)
    first = scores.matmul
    score_dims = graph.values[first.outputs[0]].dims
    if graph.values[source].dims[-1] != score_dims[-1]:
        return None  # a view that regroups the scores' rows: the softmax runs over other rows
    if reader is None or not _plain_matmul(reader) or reader.inputs[0] != probabilities:
        return None
    if not same_dims(graph.values[probabilities].dims, score_dims) or reader.ints.get("transpose_b", [0])[0] != 0:
        return None
    q, k, v = first.inputs[0], first.inputs[1], reader.inputs[1]
    keys_transposed = first.ints.get("transpose_b", [0])[0] == 0
    if not _attention_dims(graph, q, k, v, keys_transposed, score_dims):
        return None
    if keys_transposed:
        k, keys_transposed = _keys_before_transposition(graph, k, producers, only_reader)
    causal = scores.mask is not None and _is_causal(graph, scores.mask, score_dims)
    mask = None if causal else scores.mask
    ints = {
        "causal": [int(causal)],
        "keys_transposed": [int(keys_transposed)],
        "zero_fully_masked_rows": softmax.ints.get("zero_fully_masked_rows", [0]),
    }
    step = Step(
        StepKind.ATTENTION,
        [q, k, v, NO_VALUE if mask is None else mask],
        list(reader.outputs),
        ints,
        {"scale": [scores.scale]},
    )
    return graph.steps.index(reader), step


def _keys_before_transposition(graph: Graph, k: int, producers: dict[int, int], only_reader) -> tuple[int, bool]:  # type: ignore[no-untyped-def]
    """kᵀ made by a copy that swaps the keys' last two dims (then reshapes of the leading dims only, as
    `q @ k.transpose(-2, -1)` exports): the keys as they were, the copy's step made a reshape of them, so
    the attention reads them in place (a KV cache's keys are not copied once more per call). Else kᵀ."""
    dims = graph.values[k].dims
    value = k
    while value in producers and only_reader(value):
        step = graph.steps[producers[value]]
        source_dims = graph.values[step.inputs[0]].dims
        if step.kind == StepKind.RESHAPE and source_dims[-2:] == dims[-2:]:
            value = step.inputs[0]
            continue
        rank = len(source_dims)
        swap = [*range(rank - 2), rank - 1, rank - 2]
        if step.kind != StepKind.REORDER or step.ints.get("permutation") != swap or "offsets" in step.ints:
            break
        if graph.values[step.inputs[0]].dtype != graph.values[value].dtype:
            break
        keys = graph.add_value(graph.values[step.inputs[0]].dtype, (*dims[:-2], dims[-1], dims[-2]))
        graph.steps[producers[value]] = Step(StepKind.RESHAPE, [step.inputs[0]], [keys], sources=step.sources)
        return keys, False
    return k, True


def _scores(graph, source, producers, up, only_reader) -> _Scores | None:  # type: ignore[no-untyped-def]
    """The first matmul behind the softmax's input: through reshapes, a BINARY mask add, and constant
    multiplications before that add."""
    mask = None
    value, factor = up(source, scaling=True)
    step = graph.steps[producers[value]] if value in producers else None
    if step is not None and step.kind == StepKind.BINARY and "post_ops" not in step.ints:
        if factor != 1.0 or step.ints["alg"][0] != BinaryAlg.ADD:
            return None  # a scaling after the mask add scales the mask too
        if not same_dims(graph.values[step.outputs[0]].dims, graph.values[source].dims):
            return None
        for scores, operand in (step.inputs, reversed(step.inputs)):
            top, factor = up(scores, scaling=True)
            if top in producers and graph.steps[producers[top]].kind == StepKind.MATMUL and only_reader(scores):
                value, mask = top, operand
                break
        else:
            return None
        if not _mask_broadcasts(graph, mask, graph.values[source].dims, graph.values[value].dims):
            return None
        step = graph.steps[producers[value]]
    if step is None or step.kind != StepKind.MATMUL or not only_reader(value):
        return None
    post_ops = step.post_ops()
    scale = 1.0
    if post_ops and post_ops[0][:2] == (PostOpKind.ELTWISE, EltwiseAlg.LINEAR) and post_ops[0].beta == 0.0:
        scale, post_ops = post_ops[0].alpha, post_ops[1:]
    if [op[:2] for op in post_ops] == [(PostOpKind.BINARY, BinaryAlg.ADD)] and mask is None and len(step.inputs) == 4:
        if factor != 1.0:
            return None  # scaled after the mask add
        mask, post_ops = step.inputs[3], []
        if not _mask_broadcasts(graph, mask, graph.values[value].dims, graph.values[value].dims):
            return None
    if post_ops or not _plain_matmul(step, allow_post_ops=True) or not math.isfinite(scale):
        return None
    return _Scores(step, scale * factor, mask)


def _plain_matmul(step: Step, allow_post_ops: bool = False) -> bool:
    """A float MATMUL without bias (and without post-ops unless allowed)."""
    if step.kind != StepKind.MATMUL or any(name in step.floats for name in INT8_ATTRIBUTES):
        return False
    has_bias = len(step.inputs) > 2 and step.inputs[2] != NO_VALUE
    return not has_bias and (allow_post_ops or "post_ops" not in step.ints)


def _attention_dims(graph: Graph, q: int, k: int, v: int, keys_transposed: bool, scores: tuple[int, ...]) -> bool:
    """Same batch dims everywhere (no broadcast), rank 3 or 4."""
    qd, kd, vd = (graph.values[value].dims for value in (q, k, v))
    if len(scores) not in (3, 4) or not len(qd) == len(kd) == len(vd) == len(scores):
        return False
    width, keys = (kd[-2], kd[-1]) if keys_transposed else (kd[-1], kd[-2])
    batch = scores[:-2]
    return qd[:-2] == kd[:-2] == vd[:-2] == batch and qd[-1] == width and vd[-2] == keys == scores[-1]


def _mask_broadcasts(graph: Graph, mask: int, seen_as: tuple[int, ...], scores: tuple[int, ...]) -> bool:
    """Whether the mask, added to the scores viewed as `seen_as`, reads the same with the scores as the
    matmul wrote them: it is one row for all, varies along the last two dims only, or the two views are
    the same."""
    dims = graph.values[mask].dims
    if not dims or dims[-1] != seen_as[-1]:
        return False
    if all(d == 1 for d in dims[:-1]):
        return True  # the same for every row (a decode step's mask)
    if len(dims) > 4:
        return False
    if seen_as == scores:
        return len(dims) <= len(scores)
    return seen_as[-2:] == scores[-2:] and all(d == 1 for d in dims[:-2])


def _is_causal(graph: Graph, mask: int, scores: tuple[int, ...]) -> bool:
    """A constant 0 / -inf mask equal to PyTorch's is_causal (query i sees keys 0..i) for every row."""
    tensor = graph.constant_data.get(mask)
    rows, keys = scores[-2], scores[-1]
    if tensor is None or tuple(tensor.shape[-2:]) != (rows, keys):
        return False
    allowed = torch.ones(rows, keys, dtype=torch.bool).tril()
    expected = torch.zeros(rows, keys).masked_fill(~allowed, -math.inf)
    return torch.equal(tensor.float(), expected.expand_as(tensor))
