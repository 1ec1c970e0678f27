# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Activations written out as arithmetic become one ELTWISE step.

Hugging Face's GPT-2 writes its GELU as `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))`:
after lowering that is nine elementwise steps over the MLP's widest tensor, which oneDNN computes in
one pass as eltwise_gelu_tanh. Rather than match each
way of writing a formula, a chain of elementwise steps that is a function of one value x alone is
evaluated on probe points and compared with the activations oneDNN has.

It runs after fuse_post_ops (reading the eltwise post-ops the chain's steps took), so the step it makes
stays a step of its own: on a CPU with AVX2 but not AVX-512 the runtime computes tanh GELU on the host,
where oneDNN's tanh reads tables through gathers (as a post-op of GPT-2's MLP matmul it cost 2.1-2.6 ms
per layer on AMD Zen 1, 2 threads, 128 tokens, against about 0.7 ms on the host). `aten.gelu` fuses as
before.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..serialization.payload import Graph, Step
from ..serialization.schema import BinaryAlg, DType, EltwiseAlg, PostOpKind, StepKind
from ..serialization.shapes import same_dims

Function = Callable[[torch.Tensor], torch.Tensor]

# float64, so that the float32 constants of the steps are the only difference from the activation.
PROBES = torch.cat([torch.linspace(-8.0, 8.0, 161, dtype=torch.float64), torch.tensor([-0.01, 0.003, 0.25])])
# A bf16 program rounds the formula's constants to bf16 as eager PyTorch does (sqrt(2 / pi) becomes
# 0.796875), which moves its result by about 1e-4: far below what each of its bf16 steps rounds away.
TOLERANCE = {DType.F32: 1e-6, DType.BF16: 1e-3}
SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
# Activations are short formulas (GPT-2's GELU is nine steps): a longer chain is not evaluated.
MAX_CHAIN_STEPS = 16

# alg -> f(x, alpha, beta), as oneDNN defines its eltwise algorithms.
ELTWISE: dict[EltwiseAlg, Callable[[torch.Tensor, float, float], torch.Tensor]] = {
    EltwiseAlg.LINEAR: lambda x, a, b: a * x + b,
    EltwiseAlg.TANH: lambda x, a, b: torch.tanh(x),
    EltwiseAlg.LOGISTIC: lambda x, a, b: torch.sigmoid(x),
    EltwiseAlg.EXP: lambda x, a, b: torch.exp(x),
    EltwiseAlg.SQUARE: lambda x, a, b: x * x,
    EltwiseAlg.POW: lambda x, a, b: a * torch.pow(x, b),
    EltwiseAlg.CLIP: lambda x, a, b: torch.clamp(x, a, b),
    EltwiseAlg.RELU: lambda x, a, b: torch.where(x > 0, x, a * x),
}
BINARY: dict[BinaryAlg, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    BinaryAlg.ADD: torch.add,
    BinaryAlg.SUB: torch.sub,
    BinaryAlg.MUL: torch.mul,
    BinaryAlg.DIV: torch.div,
    BinaryAlg.MAX: torch.maximum,
    BinaryAlg.MIN: torch.minimum,
}
# (alg, alpha, beta) -> the activation, for the activations a model writes out by hand.
ACTIVATIONS: dict[tuple[EltwiseAlg, float, float], Function] = {
    (EltwiseAlg.GELU_TANH, 0.0, 0.0): lambda x: 0.5 * x * (1 + torch.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x**3))),
    (EltwiseAlg.SWISH, 1.0, 0.0): lambda x: x * torch.sigmoid(x),
    (EltwiseAlg.HARDSWISH, 1.0 / 6.0, 0.5): lambda x: x * torch.clamp(x / 6 + 0.5, 0, 1),
}


def recognize_activations(graph: Graph) -> Graph:
    """Replace each chain of elementwise steps computing a known activation of one value by one step."""
    while _replace_one(graph):
        pass
    return graph


def _replace_one(graph: Graph) -> bool:
    roots, consumers = _single_roots(graph), graph.consumers()
    # Last steps first, so that the whole chain is tried before the part of it an inner step ends.
    for index in sorted(roots, reverse=True):
        chain = _chain(graph, index, roots[index])
        if not 2 <= len(chain) <= MAX_CHAIN_STEPS or not _only_read_inside(graph, chain, index, consumers):
            continue
        activation = _activation(graph, chain, roots[index])
        if activation is None:
            continue
        alg, alpha, beta = activation
        last = graph.steps[index]
        for inner in chain[:-1]:
            last.sources |= graph.steps[inner].sources
        last.kind, last.inputs = StepKind.ELTWISE, [roots[index]]
        last.ints, last.floats = {"alg": [alg]}, {"alpha": [alpha], "beta": [beta]}
        for inner in reversed(chain[:-1]):
            del graph.steps[inner]
        return True
    return False


def _single_roots(graph: Graph) -> dict[int, int]:
    """Step index -> the one value x its result is an elementwise function of, for the elementwise
    steps whose operands all come from the same x through such steps, at x's dims and dtype."""
    root_of_value: dict[int, int] = {}
    roots: dict[int, int] = {}
    for index, step in enumerate(graph.steps):
        if not _evaluable(step):
            continue
        operand_roots = {root_of_value.get(value, value) for value in step.inputs}
        if len(operand_roots) != 1:
            continue
        (root,) = operand_roots
        x, out = graph.values[root], graph.values[step.outputs[0]]
        if x.constant_key is not None or root in graph.constant_data or x.dtype not in (DType.F32, DType.BF16):
            continue
        if out.dtype != x.dtype or not same_dims(out.dims, x.dims):
            continue
        roots[index] = root
        root_of_value[step.outputs[0]] = root
    return roots


def _evaluable(step: Step) -> bool:
    if len(step.outputs) != 1 or len(step.inputs) != (1 if step.kind == StepKind.ELTWISE else 2):
        return False
    if any(op.kind != PostOpKind.ELTWISE or EltwiseAlg(op.alg) not in ELTWISE for op in step.post_ops()):
        return False
    if step.kind == StepKind.ELTWISE:
        return EltwiseAlg(step.ints["alg"][0]) in ELTWISE
    return step.kind == StepKind.BINARY and BinaryAlg(step.ints["alg"][0]) in BINARY


def _chain(graph: Graph, last: int, root: int) -> list[int]:
    """Indices, in order, of the steps between `root` and the result of step `last`."""
    producers = graph.producers()
    wanted, pending = set(), [last]
    while pending:
        index = pending.pop()
        if index in wanted:
            continue
        wanted.add(index)
        pending.extend(producers[value] for value in graph.steps[index].inputs if value != root)
    return sorted(wanted)


def _only_read_inside(graph: Graph, chain: list[int], last: int, consumers: dict[int, list[int]]) -> bool:
    """Whether the chain's intermediate values are read by the chain alone (so it can go)."""
    members = set(chain)
    for index in chain:
        if index == last:
            continue
        value = graph.steps[index].outputs[0]
        if value in graph.outputs or any(reader not in members for reader in consumers.get(value, [])):
            return False
    return True


def _activation(graph: Graph, chain: list[int], root: int) -> tuple[EltwiseAlg, float, float] | None:
    computed = {root: PROBES}
    for index in chain:
        step = graph.steps[index]
        operands = [computed[value] for value in step.inputs]
        if step.kind == StepKind.ELTWISE:
            alg, alpha, beta = EltwiseAlg(step.ints["alg"][0]), step.floats["alpha"][0], step.floats["beta"][0]
            result = ELTWISE[alg](operands[0], alpha, beta)
        else:
            result = BINARY[BinaryAlg(step.ints["alg"][0])](*operands)
        for op in step.post_ops():
            result = ELTWISE[EltwiseAlg(op.alg)](result, op.alpha, op.beta)
        computed[step.outputs[0]] = result
    result = computed[graph.steps[chain[-1]].outputs[0]]
    tolerance = TOLERANCE[graph.values[root].dtype]
    for activation, reference in ACTIVATIONS.items():
        expected = reference(PROBES)
        if bool(((result - expected).abs() <= tolerance * (1 + expected.abs())).all()):
            return activation
    return None
