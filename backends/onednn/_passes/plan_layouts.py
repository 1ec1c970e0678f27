# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Where activations may stay in oneDNN's own layouts, decided for the whole partition ahead of time.

Which layout a convolution computes fastest in depends on the CPU, so the plan does not name it:
oneDNN picks it at init (`format_tag::any`). On AVX2 and AVX-512 it picks channels-last for every
convolution (an AVX-512 f32 stem reading an image's few channels with a stride asks for the image's plain
layout instead and writes blocked aBcd16b: README, Layouts), in f32, bf16 and int8; with
SSE4.1 it picks blocked aBcd8b everywhere, and channels-last would run MobileNetV2's depthwise
convolutions on the reference kernel (9.8 -> 106 ms, measured). What the plan decides is the rest:
- every activation is NATIVE (kept as its producer lays it out) or PLAIN. A value that a convolution,
  pooling, ... produced and that only plain-only steps read (matmul, softmax, layer norm, slices, the
  caller's output tensor) is PLAIN: pooling, resampling and reductions then write it plain directly,
  other steps convert their result once, right after computing it. Everything else stays NATIVE, so
  chains of convolutions, their post-ops, pools, concats and elementwise steps never convert, and a
  permute or reshape of channels-last memory stays a view.
- a commutative binary step computes in the layout of its first operand: when only its second one
  may be native (a convolution's result added to a graph input), the two are swapped, so the plain
  operand is converted, not the convolution's result and everything downstream of it.
Which kind picks, follows or needs a plain layout is a column of serialization/step_kinds.py.
"""

from __future__ import annotations

from ..serialization.payload import Graph, Step
from ..serialization.schema import BinaryAlg, Layout, StepKind
from ..serialization.step_kinds import COMMUTATIVE, READ_PLAIN, STEP_KINDS, LayoutRole

# Roles whose result is native when their first input is (a slice excepted: it copies a block out plain).
FROM_FIRST_INPUT = frozenset({LayoutRole.FOLLOWS_FIRST_INPUT, LayoutRole.VIEW_OF_FIRST_INPUT})


def plan_layouts(graph: Graph) -> Graph:
    """Set every value's `layout` and order commutative operands (see the module docstring)."""
    may_be_native = [False] * len(graph.values)
    for step in graph.steps:
        if step.kind == StepKind.BINARY:
            _put_native_operand_first(graph, step, may_be_native)
        for output in step.outputs:
            may_be_native[output] = _may_write_native(step, may_be_native)
    consumers, outputs = graph.consumers(), set(graph.outputs)
    for value_id, value in enumerate(graph.values):
        readers = [graph.steps[index] for index in consumers.get(value_id, [])]
        read = bool(readers) or value_id in outputs  # the caller's output tensor reads plain
        plain_only = read and all(_reads_plain(step, value_id) for step in readers)
        value.layout = Layout.PLAIN if may_be_native[value_id] and plain_only else Layout.NATIVE
    return graph


def _is_slice(step: Step) -> bool:
    """A block of its input, copied out plain."""
    return step.kind == StepKind.REORDER and "offsets" in step.ints


def _may_write_native(step: Step, may_be_native: list[bool]) -> bool:
    role = STEP_KINDS[step.kind].layout
    if role == LayoutRole.CHOOSES:
        return True
    if role == LayoutRole.JOINS_INPUTS:
        return all(may_be_native[i] for i in step.inputs)
    return role in FROM_FIRST_INPUT and not _is_slice(step) and may_be_native[step.inputs[0]]


def _reads_plain(step: Step, value_id: int) -> bool:
    return step.inputs[0] == value_id and (step.kind in READ_PLAIN or _is_slice(step))


def _put_native_operand_first(graph: Graph, step: Step, may_be_native: list[bool]) -> None:
    first, second = step.inputs[:2]
    src0, src1 = graph.values[first], graph.values[second]
    if (
        BinaryAlg(step.ints["alg"][0]) in COMMUTATIVE
        and may_be_native[second]
        and not may_be_native[first]
        and (src0.dims, src0.dtype) == (src1.dims, src1.dtype)
    ):
        step.inputs[0], step.inputs[1] = second, first
