# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Winograd F(4x4, 3x3) for fp32 3x3 convolutions of stride 1 (runtime/Winograd.h).

Each program runs in the test worker with the backend option "winograd" at "always", so the path runs on
every CPU with AVX2, AVX-512 and AMX ones included (by default AVX-512 CPUs take it only for layers of
24 channels or more). oneDNN's verbose trace shows which path ran: Winograd is a batched matmul of 36 ("36xT..."), the
direct path a convolution primitive. Every case must match eager PyTorch within f32 round-off, for each
post-op chain the fusion passes leave on a convolution, each padding, odd sizes and batches (each case
with the 16 output tiles of 4x4 the runtime asks for at least); the direct kernel must run where
Winograd does not apply and where an input holds a NaN or an infinity. Static int8 convolutions take it
too where they compute in f32 (CPUs without VNNI, and the AVX2-capped int8 leg of run_tests.sh).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from executorch.backends.onednn import int8_products_exact, set_winograd
from executorch.backends.onednn._runtime import INSTRUCTION_SETS, effective_isa
from support import QUANT_STEPS, Exported, Record, describe, execute_traced, output_scale, quantize
from tester import flatten_outputs, lower
from torch import nn


def _cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


pytestmark = pytest.mark.skipif(
    not {"avx2", "fma"} <= _cpu_flags(), reason="Winograd kernels need AVX2 and FMA; this CPU lacks them"
)

# Winograd rounds differently from a direct convolution: about ten f32 ulps of the output's magnitude.
TOLERANCE = 2e-5


def winograd_products(trace: list[Record]) -> list[Record]:
    return [record for record in trace if record.primitive == "matmul" and record.problem.startswith("36x")]


def direct_convolutions(trace: list[Record]) -> list[Record]:
    return [record for record in trace if record.primitive == "convolution"]


class Residual(nn.Module):
    """x + conv(x), then ReLU: the post-op chain (add, relu) the output transform folds in."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.conv(x))


class BasicBlock(nn.Module):
    """ResNet's basic block: conv-bn-relu, conv-bn, + x, relu (batch norm folded into the weights)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(channels, channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
            nn.Conv2d(channels, channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(channels),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + x)


class AddThenScale(nn.Module):
    """conv(x) + y, then a sigmoid: a residual add followed by a post-op the transform does not fold."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(16, 16, 3, padding=1)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.conv(x) + y)


def conv(cin: int, cout: int, *after: nn.Module, bias: bool = True, padding: int | tuple[int, int] = 1) -> nn.Module:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=padding, bias=bias), *after)


# model, input shapes, how many of its convolutions take Winograd
CASES = [
    pytest.param(conv(16, 32), [(1, 16, 16, 16)], 1, id="bias"),
    pytest.param(conv(16, 16, nn.ReLU(), bias=False), [(1, 16, 16, 16)], 1, id="no_bias_relu"),
    pytest.param(conv(8, 24, nn.ReLU6()), [(1, 8, 18, 18)], 1, id="relu6_clamp_in_place"),
    pytest.param(conv(16, 16, nn.Hardswish()), [(1, 16, 16, 16)], 1, id="hardswish"),
    pytest.param(conv(32, 32, nn.ReLU()), [(1, 32, 17, 17)], 1, id="odd_square"),
    pytest.param(conv(16, 8), [(1, 16, 13, 19)], 1, id="odd_rectangle"),
    pytest.param(conv(16, 16, padding=0), [(1, 16, 19, 19)], 1, id="no_padding"),
    pytest.param(conv(16, 16, padding=2), [(1, 16, 14, 14)], 1, id="padding_2"),
    pytest.param(conv(16, 16, padding=(1, 0)), [(1, 16, 14, 19)], 1, id="padding_rows_only"),
    pytest.param(conv(16, 16, nn.ReLU()), [(3, 16, 9, 10)], 1, id="batch_3"),
    pytest.param(Residual(16), [(1, 16, 14, 14)], 1, id="residual_relu"),
    pytest.param(BasicBlock(32), [(2, 32, 9, 9)], 2, id="basic_block"),
    pytest.param(AddThenScale(), [(1, 16, 16, 16), (1, 16, 16, 16)], 1, id="residual_then_sigmoid"),
]


def _run(model: nn.Module, inputs: tuple[torch.Tensor, ...], winograd: str) -> tuple[torch.Tensor, list[Record]]:
    lowered = lower(model, inputs)
    assert lowered.delegate_calls == 1 and not lowered.undelegated_compute, lowered.describe()
    outputs, trace = execute_traced(lowered.buffer, inputs, winograd)
    return outputs[0], trace


@pytest.mark.parametrize(("model", "shapes", "expected"), CASES)
def test_winograd_matches_eager(model: nn.Module, shapes: list[tuple[int, ...]], expected: int) -> None:
    torch.manual_seed(0)
    model.eval()
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2.0)
    inputs = tuple(torch.randn(shape) for shape in shapes)
    output, trace = _run(model, inputs, "always")
    assert len(winograd_products(trace)) == expected, describe(trace)
    assert not direct_convolutions(trace), describe(trace)
    reference = model(*inputs)
    error = (output - reference).abs().max().item()
    assert error <= TOLERANCE * reference.abs().max().item(), f"max error {error}\n{describe(trace)}"


@pytest.mark.parametrize(
    ("model", "shape"),
    [
        pytest.param(conv(12, 16), (1, 12, 16, 16), id="input_channels_not_a_multiple_of_8"),
        pytest.param(conv(16, 20), (1, 16, 16, 16), id="output_channels_not_a_multiple_of_8"),
        pytest.param(nn.Conv2d(16, 16, 3, stride=2, padding=1), (1, 16, 32, 32), id="stride_2"),
        pytest.param(nn.Conv2d(16, 16, 3, padding=2, dilation=2), (1, 16, 16, 16), id="dilation_2"),
        pytest.param(nn.Conv2d(16, 16, 3, padding=1, groups=2), (1, 16, 16, 16), id="grouped"),
        pytest.param(nn.Conv2d(16, 16, 5, padding=2), (1, 16, 16, 16), id="kernel_5"),
        pytest.param(conv(32, 32), (1, 32, 7, 7), id="fewer_than_16_output_tiles"),
    ],
)
def test_the_direct_kernel_runs_where_winograd_does_not_apply(model: nn.Module, shape: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    x = torch.randn(shape)
    output, trace = _run(model.eval(), (x,), "always")
    assert not winograd_products(trace), describe(trace)
    assert direct_convolutions(trace), describe(trace)
    torch.testing.assert_close(output, model(x), rtol=1e-4, atol=1e-5)


def test_an_input_holding_nan_or_infinity_runs_the_direct_kernel() -> None:
    torch.manual_seed(0)
    model = conv(16, 16, nn.ReLU()).eval()
    x = torch.randn(1, 16, 16, 16)
    _, finite_trace = _run(model, (x,), "always")
    assert winograd_products(finite_trace), describe(finite_trace)  # the same program, finite input
    x[0, 3, 4, 4] = float("inf")
    x[0, 5, 7, 2] = float("nan")
    x[0, 9, 0, 9] = float("-inf")
    output, trace = _run(model, (x,), "always")
    assert direct_convolutions(trace) and not winograd_products(trace), describe(trace)
    reference = model(x)
    assert reference.isnan().any() and reference.isinf().any()  # the case checks both
    torch.testing.assert_close(output, reference, rtol=1e-4, atol=1e-5, equal_nan=True)


def test_the_backend_option_turns_winograd_off() -> None:
    torch.manual_seed(0)
    model = conv(16, 16, nn.ReLU()).eval()
    x = torch.randn(1, 16, 16, 16)
    output, trace = _run(model, (x,), "never")
    assert direct_convolutions(trace) and not winograd_products(trace), describe(trace)
    torch.testing.assert_close(output, model(x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("channels", [16, 32])
def test_the_default_takes_winograd_where_it_was_measured_faster(channels: int) -> None:
    """On AVX2 every layer Winograd can compute; on AVX-512 (and AMX) only those with at least 24
    channels each side, since with 16 the direct kernel was the faster (ConvolutionSteps.cpp)."""
    torch.manual_seed(0)
    model = conv(channels, channels, nn.ReLU()).eval()
    x = torch.randn(1, channels, 28, 28)
    output, trace = _run(model, (x,), "default")
    avx512 = INSTRUCTION_SETS.index(effective_isa()) >= INSTRUCTION_SETS.index("avx512_core")
    expected = channels >= 24 or not avx512
    assert bool(winograd_products(trace)) == expected, f"{effective_isa()}: {describe(trace)}"
    assert bool(direct_convolutions(trace)) != expected, describe(trace)
    torch.testing.assert_close(output, model(x), rtol=1e-4, atol=1e-5)


def test_set_winograd_refuses_an_unknown_setting() -> None:
    with pytest.raises(ValueError, match="set_winograd expects one of"):
        set_winograd("sometimes")


INT8_CASES = [
    pytest.param(conv(16, 32, nn.ReLU()), (1, 16, 16, 16), id="conv_relu"),
    pytest.param(Residual(16), (1, 16, 14, 14), id="residual_relu"),
    pytest.param(BasicBlock(32), (1, 32, 17, 17), id="basic_block"),
]


@pytest.mark.skipif(
    int8_products_exact(),
    reason="int8 convolutions run oneDNN's VNNI/AMX int8 kernels on this CPU, not f32 (the AVX2-capped leg runs this)",
)
@pytest.mark.parametrize(("model", "shape"), INT8_CASES)
def test_emulated_int8_convolutions_compute_by_winograd(model: nn.Module, shape: tuple[int, ...]) -> None:
    """Without VNNI an int8 convolution computes in f32 on its dequantized src and weights: Winograd takes
    it like an fp32 one, and the result lands within the int8 tolerance of the converted model and of
    the direct kernel's (the two round the f32 sum differently before it is quantized)."""
    torch.manual_seed(0)
    example = (torch.randn(shape),)
    converted = quantize(model, example)
    lowered = lower(Exported(converted), example)
    (winograd,), trace = execute_traced(lowered.buffer, example, "always")
    (direct,), direct_trace = execute_traced(lowered.buffer, example, "never")
    convolutions = sum(isinstance(module, nn.Conv2d) for module in model.modules())
    assert len(winograd_products(trace)) == convolutions and not direct_convolutions(trace), describe(trace)
    assert not winograd_products(direct_trace), describe(direct_trace)
    with torch.no_grad():
        (reference,) = flatten_outputs(converted(*example))
    step = output_scale(converted)
    for got in (winograd, direct):
        error = (got - reference).abs().max().item()
        assert error <= QUANT_STEPS * step, f"max error {error:.4g} exceeds {QUANT_STEPS} steps of {step:.4g}"
    assert (winograd - direct).abs().max().item() <= QUANT_STEPS * step
