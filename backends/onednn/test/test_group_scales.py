# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""group_scales="bf16": 4-bit linear layers keep their group scales in bf16 (as XNNPACK does; export-llm's
default), which the runtime widens back to f32 exactly. So a program with bf16 scales must compute, bit
for bit, what the same program computes with f32 scales that hold the same (bf16-representable)
values, on every path a COMPRESSED_MATMUL takes: one row or several, 8da4w or 4w, "exact" or "fast"
products, each vector width the CPU has."""

from __future__ import annotations

import pytest
import torch
from executorch.backends.onednn import OneDnnPartitioner
from executorch.backends.onednn._passes import store_group_scales_in_bf16
from executorch.backends.onednn.serialization.payload import Graph, Step
from executorch.backends.onednn.serialization.schema import DType, StepKind
from support import execute_with_int4_products
from test_affine_quantization import quantized_linear, relative_error
from tester import lower

ROWS = [(1, 128), (1, 2048), (5, 128), (40, 2048), (2, 3, 96)]
# Each mode and group on each row shape its group divides.
CASES = [
    (mode, group, rows)
    for mode, group in [("8da4w", 32), ("8da4w", 128), ("4w", 32)]
    for rows in ROWS
    if rows[-1] % group == 0
]


def with_bf16_valued_scales(model: torch.nn.Module) -> torch.nn.Module:
    """The model with each group scale rounded to bf16 (still stored in f32)."""
    scale = model[0].weight.scale
    with torch.no_grad():
        scale.copy_(scale.to(torch.bfloat16).float())
    return model


@pytest.mark.parametrize("products", ["exact", "fast"])
@pytest.mark.parametrize(
    ("mode", "group", "rows"), CASES, ids=[f"{m}-g{g}-{'x'.join(map(str, r))}" for m, g, r in CASES]
)
def test_bf16_scales_compute_exactly_what_their_f32_values_compute(
    mode: str, group: int, rows: tuple[int, ...], products: str
) -> None:
    model = with_bf16_valued_scales(quantized_linear(mode, group, in_features=rows[-1]))
    x = torch.randn(rows) * 3 + 0.25
    as_f32 = lower(model, (x,))
    as_bf16 = lower(model, (x,), OneDnnPartitioner(group_scales="bf16"))
    ((f32_graph,), (bf16_graph,)) = as_f32.payloads(), as_bf16.payloads()
    ((f32_step,), (bf16_step,)) = as_f32.steps(), as_bf16.steps()
    assert f32_graph.values[f32_step.inputs[2]].dtype == DType.F32
    assert bf16_graph.values[bf16_step.inputs[2]].dtype == DType.BF16
    assert len(as_bf16.buffer) < len(as_f32.buffer)
    (expected,) = execute_with_int4_products(as_f32.buffer, [x], products)
    (actual,) = execute_with_int4_products(as_bf16.buffer, [x], products)
    assert torch.equal(actual, expected)
    if products == "exact":  # and both are the eager module's result, to f32 rounding
        with torch.no_grad():
            assert relative_error(actual, model(x)) < 1e-5


def test_bf16_scales_stay_within_their_rounding_of_the_f32_programs_result() -> None:
    # Unrounded scales: each differs from its bf16 by at most 2^-9 of it, and so does each product.
    model = quantized_linear("8da4w", 32, in_features=2048)
    x = torch.randn(3, 2048)
    with torch.no_grad():
        weights = model[0].weight.dequantize()
    (expected,) = execute_with_int4_products(lower(model, (x,)).buffer, [x], "exact")
    lowered = lower(model, (x,), OneDnnPartitioner(group_scales="bf16"))
    (actual,) = execute_with_int4_products(lowered.buffer, [x], "exact")
    bound = 2**-9 * (x.abs() * 1.01 @ weights.abs().T) + 1e-5 * expected.abs().max()
    assert bool(((actual - expected).abs() <= bound).all())
    assert not torch.equal(actual, expected)  # the scales were rounded


def test_int8_weights_keep_f32_scales() -> None:
    model = quantized_linear("8da8w", 32)
    x = torch.randn(2, 128)
    lowered = lower(model, (x,), OneDnnPartitioner(group_scales="bf16"))
    ((graph,), (step,)) = lowered.payloads(), lowered.steps()
    assert graph.values[step.inputs[1]].dtype == DType.S8
    assert graph.values[step.inputs[2]].dtype == DType.F32


def test_the_pass_leaves_scales_that_another_step_reads_in_f32() -> None:
    # A scales constant read as anything but a 4-bit matmul's scales keeps f32 for that reader.
    graph = Graph()
    x = graph.add_value(DType.F32, (1, 64))
    weights = graph.add_constant(torch.zeros(8, 32, dtype=torch.uint8), DType.S4)
    graph.values[weights].dims = (8, 64)
    scales = graph.add_constant(torch.full((8, 2), 0.3), DType.F32)
    shared = graph.add_constant(torch.full((8, 2), 0.7), DType.F32)
    outputs = [graph.add_value(DType.F32, (1, 8)) for _ in range(2)]
    ints = {"group_size": [32], "quantize_rows": [1]}
    graph.add_step(Step(StepKind.COMPRESSED_MATMUL, [x, weights, scales], [outputs[0]], dict(ints)))
    graph.add_step(Step(StepKind.COMPRESSED_MATMUL, [x, weights, shared], [outputs[1]], dict(ints)))
    graph.add_step(Step(StepKind.BINARY, [outputs[1], shared], [graph.add_value(DType.F32, (8, 2))]))
    store_group_scales_in_bf16(graph)
    assert graph.values[scales].dtype == DType.BF16
    assert graph.constant_data[scales].dtype == torch.bfloat16
    assert graph.constant_data[scales][0, 0] == torch.tensor(0.3).to(torch.bfloat16)
    assert graph.values[shared].dtype == DType.F32 and graph.constant_data[shared].dtype == torch.float32


def test_the_partitioner_refuses_an_unknown_scale_type() -> None:
    with pytest.raises(ValueError, match="group_scales='f16'"):
        OneDnnPartitioner(group_scales="f16")
