# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Interleaved rotary embeddings as one ROTARY step.

Meta's Llama, and so ExecuTorch's export_llm models, rotate pairs: x viewed as [..., P, 2] splits into
x0 = x[..., 0] and x1 = x[..., 1], and the result is stack(x0 * cos - x1 * sin, x0 * sin + x1 * cos, -1)
with the tables cos and sin [S, P] broadcast over the heads. Lowered op by op that is 13 steps: two
strided slices, four copies of the tables over the heads (oneDNN's binary has no fast kernel for that
broadcast: ops/rules.py's broadcasts_between_kept_dims), six binaries and the interleaving concat, of a
few microseconds each at decode: about 1 ms of a 24 ms token of the 1.1B checkpoint of
examples/onednn/llm_benchmark.py (queries and keys of 16 layers). The runtime computes ROTARY in one
pass (runtime/Rotary.h), the f32 products and sums as the separate steps round them.
"""

from __future__ import annotations

from ..serialization.payload import Graph, Step
from ..serialization.schema import BinaryAlg, DType, StepKind
from ..serialization.shapes import left_pad, same, same_dims

FLOAT_TYPES = (DType.F32, DType.BF16)


def fuse_interleaved_rotary(graph: Graph) -> Graph:
    producers, consumers = graph.producers(), graph.consumers()
    for index, step in enumerate(graph.steps):
        match = _Match(graph, producers)
        operands = match.rotary(step)
        if operands is None:
            continue
        match.walked.add(index)
        if not match.is_private(consumers, index):
            continue
        graph.steps[index] = Step(StepKind.ROTARY, list(operands), list(step.outputs))
        # the steps it replaces are left unread: drop_unused removes them
    return graph


class _Match:
    """One attempt at the pattern ending in a concat, remembering the steps it walks through."""

    def __init__(self, graph: Graph, producers: dict[int, int]) -> None:
        self.graph, self.producers = graph, producers
        self.walked: set[int] = set()

    def is_private(self, consumers: dict[int, list[int]], last: int) -> bool:
        """Whether nothing outside the pattern reads what its inner steps compute."""
        inner = self.walked - {last}
        return all(
            out not in self.graph.outputs and set(consumers.get(out, [])) <= self.walked
            for index in inner
            for out in self.graph.steps[index].outputs
        )

    def rotary(self, stack: Step) -> tuple[int, int, int] | None:
        """(x, cos, sin) when `stack` is the interleaving concat of the two rotated halves of x."""
        dims = self._dims(stack.outputs[0])
        if stack.kind != StepKind.CONCAT or len(stack.inputs) != 2 or len(dims) < 2 or dims[-1] != 2:
            return None
        if stack.ints["axis"] != [len(dims) - 1]:
            return None
        halves = [self._reshaped(value, adds_one=True) for value in stack.inputs]
        if halves[0] is None or halves[1] is None:
            return None
        real, imag = (self._step(value, StepKind.BINARY) for value in halves)
        if real is None or imag is None or not (_is(real, BinaryAlg.SUB) and _is(imag, BinaryAlg.ADD)):
            return None
        terms = [self._product(value) for value in real.inputs + imag.inputs]
        if any(term is None for term in terms):
            return None
        (x, part0, cos), (x_b, part1, sin), *imag_terms = terms  # type: ignore[misc]
        if (part0, part1) != (0, 1) or x_b != x or sorted(imag_terms) != sorted([(x, 0, sin), (x, 1, cos)]):
            return None
        if not same_dims(self._dims(x), dims) or self.graph.values[x].dtype not in FLOAT_TYPES:
            return None
        rows = dims[:-1]
        for table in (cos, sin):
            table_dims = left_pad(self._dims(table), len(rows))
            if len(table_dims) != len(rows) or not same(table_dims[-1], rows[-1]):
                return None
            if not all(same(t, r) or t == 1 for t, r in zip(table_dims, rows)):
                return None
        if not same_dims(self._dims(cos), self._dims(sin)):
            return None
        return x, cos, sin

    def _product(self, value: int) -> tuple[int, int, int] | None:
        """(x, part, table) when `value` is x[..., part] times a table (or a copy of one over some dims)."""
        step = self._step(value, StepKind.BINARY)
        if step is None or not _is(step, BinaryAlg.MUL):
            return None
        for operand, other in (step.inputs, reversed(step.inputs)):
            part = self._part(operand)
            if part is not None:
                return part[0], part[1], self._uncopied(other)
        return None

    def _part(self, value: int) -> tuple[int, int] | None:
        """(x, p) when `value` is x[..., p] of an x [..., 2], as a slice reshaped to drop its last dim."""
        sliced = self._reshaped(value, adds_one=False)
        if sliced is None:
            return None
        step = self._step(sliced, StepKind.REORDER)
        if step is None or set(step.ints) != {"offsets"}:
            return None
        offsets, x = step.ints["offsets"], step.inputs[0]
        x_dims, sliced_dims = self._dims(x), self._dims(sliced)
        if any(offsets[:-1]) or offsets[-1] not in (0, 1) or x_dims[-1] != 2 or sliced_dims[-1] != 1:
            return None
        return (x, offsets[-1]) if same_dims(x_dims[:-1], sliced_dims[:-1]) else None

    def _uncopied(self, value: int) -> int:
        """The value that concats of copies (a broadcast the lowering made explicit) repeat into `value`."""
        while True:
            step = self._step(value, StepKind.CONCAT, walk=False)
            if step is None or len(set(step.inputs)) != 1:
                return value
            axis = step.ints["axis"][0]
            if self._dims(step.inputs[0])[axis] != 1:
                return value
            self.walked.add(self.producers[value])
            value = step.inputs[0]

    def _reshaped(self, value: int, adds_one: bool) -> int | None:
        """v when `value` is v reshaped to add a last dim of 1 (`adds_one`) or to drop one."""
        step = self._step(value, StepKind.RESHAPE)
        if step is None:
            return None
        source = step.inputs[0]
        wide, narrow = (value, source) if adds_one else (source, value)
        return source if same_dims(self._dims(wide), (*self._dims(narrow), 1)) else None

    def _step(self, value: int, kind: StepKind, walk: bool = True) -> Step | None:
        index = self.producers.get(value)
        if index is None or self.graph.steps[index].kind != kind:
            return None
        if walk:
            self.walked.add(index)
        return self.graph.steps[index]

    def _dims(self, value: int) -> tuple[int, ...]:
        return tuple(self.graph.values[value].dims)


def _is(step: Step, alg: BinaryAlg) -> bool:
    return step.ints["alg"][0] == alg and "post_ops" not in step.ints
