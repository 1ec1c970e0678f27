# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Step.sources across the passes: the debug handles of the FX nodes each step computes, which preprocess
maps each step's profiling event to. A step a pass removes hands its sources to the steps that now
produce its outputs (a fusion's host), else to the steps the pass created (an attention step replacing
its matmuls and softmax); a view the pass drops has no event, and its sources go with it."""

from __future__ import annotations

from collections.abc import Callable

from ..serialization.payload import Graph, Step


def keeping_sources(graph_pass: Callable[[Graph], Graph], graph: Graph) -> Graph:
    before = list(graph.steps)
    outputs_before = {id(step): list(step.outputs) for step in before}
    result = graph_pass(graph)
    after = {id(step) for step in result.steps}
    producers: dict[int, Step] = {value: step for step in result.steps for value in step.outputs}
    known = {id(step) for step in before}
    created = [step for step in result.steps if id(step) not in known]
    for step in before:
        if id(step) in after or not step.sources:
            continue
        heirs = [producers[value] for value in outputs_before[id(step)] if value in producers] or created
        for heir in heirs:
            heir.sources = heir.sources | step.sources
    return result
