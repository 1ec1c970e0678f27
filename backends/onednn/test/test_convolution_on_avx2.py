# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Convolutions where AVX2 is the widest instruction set (runtime/ConvolutionSteps.cpp,
build_convolution_like): a SiLU fused into a convolution ahead of time runs after it on the host, at
any size, where oneDNN 3.13.1's AVX2 convolutions computed the fused swish at twice the host's cost
(EfficientNet-B0's 49 SiLUs). Each case matches eager PyTorch, NaN and infinities included. On a wider
CPU these tests run in the AVX2-capped leg of scripts/run_tests.sh."""

from __future__ import annotations

import pytest
import torch
from executorch.backends.onednn.serialization.schema import StepKind
from support import Record, describe, execute_traced, skip_unless_avx2_is_the_widest
from tester import DEFAULT_TOLERANCE, lower, non_finite_mismatch
from torch import nn


class ConvSilu(nn.Module):
    """A convolution and a SiLU, then optionally a residual add of the input."""

    def __init__(self, channels: int, kernel: int, stride: int, groups: int, residual: bool) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel, stride, kernel // 2, groups=groups)
        self.residual = residual

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = nn.functional.silu(self.conv(x))
        return y + x if self.residual else y


def _convolutions(trace: list[Record]) -> list[Record]:
    return [record for record in trace if record.primitive == "convolution"]


def _swish_post_ops(trace: list[Record]) -> list[str]:
    return [op for record in trace for op in record.post_ops if "swish" in op]


def _lower_and_run(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, list[Record]]:
    lowered = lower(model, (x,))
    kinds = [step.kind for graph in lowered.payloads() for step in graph.steps]
    assert StepKind.CONVOLUTION in kinds and StepKind.ELTWISE not in kinds, kinds  # fused ahead of time
    outputs, trace = execute_traced(lowered.buffer, (x,))
    with torch.no_grad():
        expected = model(x)
    return outputs[0], expected, trace


def _assert_matches_eager(got: torch.Tensor, expected: torch.Tensor, trace: list[Record]) -> None:
    assert torch.isfinite(expected).any()
    problem = non_finite_mismatch(got, expected, DEFAULT_TOLERANCE)
    assert problem is None, f"{problem}\n{describe(trace)}"


@pytest.mark.parametrize(
    "kernel, stride, groups",
    [(1, 1, 1), (3, 1, 32), (3, 2, 32), (3, 1, 1)],
    ids=["pointwise", "depthwise", "depthwise-stride-2", "dense-3x3"],
)
@pytest.mark.parametrize("size", [6, 40], ids=["small", "large"])
def test_a_fused_silu_runs_after_the_convolution(kernel: int, stride: int, groups: int, size: int) -> None:
    """No swish post-op in any convolution and no eltwise primitive: the host's swish over the result,
    below and above the 16384 values where other activations move to oneDNN's primitive. The input's
    NaN and infinities land where eager PyTorch puts them (a non-finite input takes the guarded
    kernel)."""
    skip_unless_avx2_is_the_widest()
    torch.manual_seed(0)
    model, x = ConvSilu(32, kernel, stride, groups, residual=False).eval(), torch.randn(1, 32, size, size) * 4
    got, expected, trace = _lower_and_run(model, x)
    assert _convolutions(trace) and not _swish_post_ops(trace), describe(trace)
    assert not [record for record in trace if record.primitive == "eltwise"], describe(trace)
    _assert_matches_eager(got, expected, trace)

    x[0, 1, 2, 3], x[0, 4, 5, 1], x[0, 7, 3, 5] = float("nan"), float("inf"), float("-inf")
    got, expected, trace = _lower_and_run(model, x)
    assert torch.isnan(expected).any()
    _assert_matches_eager(got, expected, trace)


def test_a_silu_before_a_residual_add_stays_fused() -> None:
    """A chain with a binary operand stays in the kernel: the add would otherwise run as its own pass."""
    skip_unless_avx2_is_the_widest()
    torch.manual_seed(0)
    model, x = ConvSilu(32, 1, 1, 1, residual=True).eval(), torch.randn(1, 32, 20, 20)
    got, expected, trace = _lower_and_run(model, x)
    assert _swish_post_ops(trace), describe(trace)
    _assert_matches_eager(got, expected, trace)
