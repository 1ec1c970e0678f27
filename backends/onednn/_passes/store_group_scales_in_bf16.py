# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""group_scales="bf16": the group scales of 4-bit linear layers (COMPRESSED_MATMUL with S4 weights) are
stored in bf16, as XNNPACK stores them.

A decode step streams every weight once a token. At group 32 the f32 scales are a fifth of those bytes
(4 bytes per 32 weights of half a byte), bf16 ones a ninth: the step reads a tenth less. Each scale is
rounded to bf16 (to nearest even), a relative change of at most 2^-9, against the 4-bit weights' own
quantization step of 1 in 16 of the group's range. The runtime widens them back to f32 exactly.
int8 weights keep f32 scales: their layers are not bound by bytes the way 4-bit ones are."""

from __future__ import annotations

import torch

from ..serialization.payload import Graph
from ..serialization.schema import DType, StepKind


def store_group_scales_in_bf16(graph: Graph) -> Graph:
    readers = graph.consumers()

    def reads_as_int4_scales(index: int, value_id: int) -> bool:
        step = graph.steps[index]
        return (
            step.kind == StepKind.COMPRESSED_MATMUL
            and step.inputs[2] == value_id
            and graph.values[step.inputs[1]].dtype == DType.S4
        )

    for step in graph.steps:
        if step.kind != StepKind.COMPRESSED_MATMUL:
            continue
        scales = step.inputs[2]
        value = graph.values[scales]
        if value.dtype != DType.F32 or scales not in graph.constant_data:
            continue
        if all(reads_as_int4_scales(index, scales) for index in readers[scales]):
            value.dtype = DType.BF16
            graph.constant_data[scales] = graph.constant_data[scales].to(torch.bfloat16)
    return graph
