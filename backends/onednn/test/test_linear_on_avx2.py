# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Linear layers where AVX2 is the widest instruction set (runtime/ConvolutionSteps.cpp, build_matmul):
f32 weights are packed in blocks 16 columns wide, which oneDNN 3.13.1's AVX2 matmul runs faster than
the 64 it picks, and a GELU (either approximation) fused after the product runs after it, where
oneDNN's fused AVX2 GELU cost several times as much. Each case matches eager
PyTorch, NaN and infinities included. On a wider CPU these tests run in the AVX2-capped leg of
scripts/run_tests.sh."""

from __future__ import annotations

import pytest
import torch
from executorch.backends.onednn.serialization.schema import StepKind
from support import Record, describe, execute_traced, skip_unless_avx2_is_the_widest
from tester import DEFAULT_TOLERANCE, lower, mismatch, non_finite_mismatch
from torch import nn
from torch.nn import functional as F


class LinearGelu(nn.Module):
    """A linear layer, a GELU, then optionally a residual add, all fused into the matmul ahead of time."""

    def __init__(self, features: int, approximate: str, residual: bool) -> None:
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.approximate = approximate
        self.residual = residual

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.gelu(self.linear(x), approximate=self.approximate)
        return y + x if self.residual else y


def _matmuls(trace: list[Record]) -> list[Record]:
    return [record for record in trace if record.primitive == "matmul"]


@pytest.mark.parametrize("shape", [(8, 96), (32, 256), (2, 40, 256)], ids=["8-rows", "32-rows", "batched"])
def test_f32_weights_are_packed_16_columns_wide(shape: tuple[int, ...]) -> None:
    skip_unless_avx2_is_the_widest()
    torch.manual_seed(0)
    model, x = nn.Sequential(nn.Linear(shape[-1], 3 * shape[-1]), nn.ReLU()).eval(), torch.randn(shape)
    lowered = lower(model, (x,))
    outputs, trace = execute_traced(lowered.buffer, (x,))
    with torch.no_grad():
        problem = mismatch("linear-relu", outputs, [model(x)], DEFAULT_TOLERANCE)
    assert problem is None, f"{problem}\n{describe(trace)}"
    weights = [dict(record.layouts).get("wei") for record in _matmuls(trace)]
    assert weights and all(tag in ("BA16a16b", "aCB16b16c") for tag in weights), describe(trace)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("residual", [False, True], ids=["alone", "then-residual"])
@pytest.mark.parametrize("rows", [16, 512])
def test_a_fused_gelu_runs_after_the_product(approximate: str, residual: bool, rows: int) -> None:
    """The product runs without the GELU; then the tanh GELU on the host, the erf one on the host up to
    16384 values (a oneDNN primitive's call costs more) and as oneDNN's eltwise primitive above."""
    skip_unless_avx2_is_the_widest()
    torch.manual_seed(0)
    model, x = LinearGelu(64, approximate, residual).eval(), torch.randn(3, rows, 64) * 4
    x[0, 1, 5], x[1, 2, 7], x[2, 3, 9] = float("nan"), float("inf"), float("-inf")
    lowered = lower(model, (x,))
    kinds = [step.kind for graph in lowered.payloads() for step in graph.steps]
    assert StepKind.MATMUL in kinds and StepKind.ELTWISE not in kinds, kinds  # fused ahead of time
    outputs, trace = execute_traced(lowered.buffer, (x,))
    with torch.no_grad():
        expected = model(x)
    assert _matmuls(trace) and not [record for record in trace if any("gelu" in op for op in record.post_ops)]
    eltwise = [record for record in trace if record.primitive == "eltwise"]
    assert len(eltwise) == (1 if approximate == "none" and x.numel() > 16384 else 0), describe(trace)
    assert torch.isnan(expected).any() and torch.isfinite(expected).any()
    problem = non_finite_mismatch(outputs[0], expected, DEFAULT_TOLERANCE)
    assert problem is None, f"{problem}\n{describe(trace)}"
