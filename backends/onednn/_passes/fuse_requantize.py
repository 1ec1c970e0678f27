# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""An int8 convolution or matmul followed by a quantize writes the quantized result itself.

Static int8 models export conv -> dequantized fp32 -> quantize for the next layer; oneDNN applies a dst
scale and zero point after the post-ops, so the fp32 tensor and the reorder that quantizes it go away.
"""

from __future__ import annotations

from ..serialization.payload import Graph, Step
from ..serialization.schema import StepKind
from ..serialization.step_kinds import REQUANTIZE_HOSTS


def fuse_requantize(graph: Graph) -> Graph:
    """An int8 convolution/matmul whose fp32 result only a quantize reads writes the int8 result itself.

    oneDNN applies the dst scale and zero point after the post-ops, as quantize(relu(conv)) does.
    """

    def absorbed(step: Step) -> bool:
        host = _requantize_host(graph, step)
        if host is None:
            return False
        host.floats["dst_scale"] = list(step.floats["dst_scale"])
        host.ints["dst_zero_point"] = list(step.ints["dst_zero_point"])
        host.outputs = list(step.outputs)
        return True

    graph.remove_absorbed(absorbed)
    return graph


def _requantize_host(graph: Graph, step: Step) -> Step | None:
    if step.kind != StepKind.REORDER or "dst_scale" not in step.floats or "src_scale" in step.floats:
        return None
    if "permutation" in step.ints or "offsets" in step.ints:
        return None
    src = step.inputs[0]
    producers, consumers = graph.producers(), graph.consumers()
    readers = consumers.get(src, [])
    if src not in producers or src in graph.outputs or len(readers) != 1 or graph.steps[readers[0]] is not step:
        return None
    host = graph.steps[producers[src]]
    if host.kind not in REQUANTIZE_HOSTS or "src_scale" not in host.floats or "dst_scale" in host.floats:
        return None
    return host
