# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Steps nothing reads and values nothing references are removed, the values renumbered densely.

The fusions leave dead steps and orphaned values (a fused eltwise's input, a folded batch norm's
statistics) behind them; the payload and the runtime's memory plan then hold only what is computed.
Runs last.
"""

from __future__ import annotations

from ..serialization.payload import Graph, Value
from ..serialization.schema import NO_VALUE


def drop_unused(graph: Graph) -> Graph:
    """Remove steps nothing reads and values nothing references, renumbering what is left."""
    steps = list(graph.steps)
    while True:
        read = {v for step in steps for v in step.inputs} | set(graph.outputs)
        kept = [step for step in steps if any(out in read for out in step.outputs)]
        if len(kept) == len(steps):
            break
        steps = kept
    referenced = sorted(
        set(graph.inputs) | set(graph.outputs) | {v for s in steps for v in s.inputs + s.outputs if v != NO_VALUE}
    )
    renumber = {old: new for new, old in enumerate(referenced)}
    renumber[NO_VALUE] = NO_VALUE
    compacted = Graph(
        values=[
            Value(graph.values[old].dtype, graph.values[old].dims, graph.values[old].constant_key) for old in referenced
        ],
        inputs=[renumber[v] for v in graph.inputs],
        outputs=[renumber[v] for v in graph.outputs],
        size_args=list(graph.size_args),
        constant_data={renumber[v]: t for v, t in graph.constant_data.items() if v in renumber},
    )
    for step in steps:
        step.inputs = [renumber[v] for v in step.inputs]
        step.outputs = [renumber[v] for v in step.outputs]
        compacted.steps.append(step)
    return compacted
