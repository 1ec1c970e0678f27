# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Squeeze-and-excitation on the host: what MobileNetV3 and EfficientNet compute on one pixel per channel.

- A global average pooling of a channels-last f32 activation (`adaptive_avg_pool2d(x, 1)`, a window
  covering the image, a mean over H and W) runs as pixel chunks summed per channel and added in a
  fixed order (HostLoops.h), not as oneDNN's pooling primitive.
- A 1x1 convolution of a 1x1 image (the gate's two linear layers) runs as one row times a matrix
  (VectorMatrix.h), not as oneDNN's convolution.
- The sigmoid family on at most 4096 f32 values (the gate's activations, fused or standalone) runs on
  the host (RowKernels.h), not as oneDNN's eltwise primitive.

oneDNN's verbose trace shows which path ran; every result must match eager PyTorch within f32
round-off, NaN and the infinities included.
"""

from __future__ import annotations

import pytest
import torch
from executorch.backends.onednn import OneDnnPartitioner, effective_isa
from support import Record, describe, execute_traced, host_row_kernels_run
from tester import lower
from torch import nn
from torch.nn import functional as F

# Sums of up to 112 * 112 values in another order than PyTorch's.
TOLERANCE = 1e-5


class ConvThenPool(nn.Module):
    def __init__(self, channels_in: int, channels: int, pool: str, groups: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels_in, channels, 1, groups=groups)
        self.pool = pool

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        if self.pool == "adaptive":
            return F.adaptive_avg_pool2d(y, 1)
        if self.pool == "window":
            return F.avg_pool2d(y, tuple(y.shape[2:]))
        return y.mean((2, 3), keepdim=True)


def pooling_primitives(trace: list[Record]) -> list[Record]:
    return [record for record in trace if record.primitive == "pooling"]


def primitives(trace: list[Record], kind: str) -> list[Record]:
    return [record for record in trace if record.primitive == kind]


def on_one_pixel(record: Record) -> bool:
    return "ih1oh1" in record.problem and "iw1ow1" in record.problem


def _run(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, list[Record]]:
    lowered = lower(model.eval(), (x,))
    assert lowered.delegate_calls == 1 and not lowered.undelegated_compute, lowered.describe()
    outputs, trace = execute_traced(lowered.buffer, (x,))
    return outputs[0], trace


@pytest.mark.parametrize(
    ("model", "shape"),
    [
        pytest.param(ConvThenPool(8, 32, "adaptive"), (1, 8, 112, 112), id="adaptive_32_channels_112x112"),
        pytest.param(ConvThenPool(16, 1152, "adaptive"), (1, 16, 7, 7), id="adaptive_1152_channels_7x7"),
        pytest.param(ConvThenPool(16, 48, "window"), (1, 16, 13, 9), id="window_13x9"),
        pytest.param(ConvThenPool(16, 24, "mean"), (1, 16, 14, 14), id="mean_over_h_and_w"),
        pytest.param(ConvThenPool(8, 40, "adaptive"), (3, 8, 10, 11), id="batch_3"),
        pytest.param(ConvThenPool(16, 16, "adaptive"), (1, 16, 1, 3), id="three_pixels"),
    ],
)
def test_global_average_pool_runs_on_the_host_and_matches_eager(model: nn.Module, shape: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    x = torch.randn(shape)
    output, trace = _run(model, x)
    if host_row_kernels_run():  # below AVX2 oneDNN's convolutions write blocked layouts
        assert not pooling_primitives(trace), describe(trace)
    reference = model(x)
    assert output.shape == reference.shape
    error = (output - reference).abs().max().item()
    assert error <= TOLERANCE * reference.abs().max().item(), f"max error {error}\n{describe(trace)}"


def test_a_nan_or_an_infinity_reaches_only_its_channel() -> None:
    torch.manual_seed(0)
    model = ConvThenPool(16, 16, "adaptive", groups=16).eval()
    with torch.no_grad():
        model.conv.weight.abs_()  # an infinity keeps its sign through the 1x1 depthwise convolution
    x = torch.randn(1, 16, 14, 14)
    x[0, 3, 5, 6] = float("nan")
    x[0, 5, 0, 13] = float("inf")
    x[0, 9, 13, 0] = float("-inf")
    output, trace = _run(model, x)
    if host_row_kernels_run():
        assert not pooling_primitives(trace), describe(trace)
    reference = model(x)
    assert reference[0, 3].isnan().all() and reference[0, 5].isposinf().all() and reference[0, 9].isneginf().all()
    torch.testing.assert_close(output, reference, rtol=TOLERANCE, atol=TOLERANCE, equal_nan=True)


def test_a_pool_over_part_of_the_image_stays_with_onednn() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(16, 32, 1), nn.AvgPool2d(7, 7)).eval()
    x = torch.randn(1, 16, 14, 14)
    output, trace = _run(model, x)
    assert pooling_primitives(trace), describe(trace)
    torch.testing.assert_close(output, model(x), rtol=1e-4, atol=1e-5)


class SqueezeExcitation(nn.Module):
    """conv, then the activation times its gate: pool, 1x1 layer + act, 1x1 layer + gate."""

    def __init__(self, channels: int, act: nn.Module, gate: nn.Module) -> None:
        super().__init__()
        self.conv = nn.Conv2d(8, channels, 3, padding=1)
        self.reduce = nn.Conv2d(channels, channels // 4, 1)
        self.expand = nn.Conv2d(channels // 4, channels, 1)
        self.act, self.gate = act, gate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        scale = self.gate(self.expand(self.act(self.reduce(F.adaptive_avg_pool2d(y, 1)))))
        return y * scale


@pytest.mark.parametrize(
    ("act", "gate"),
    [
        pytest.param(nn.ReLU(), nn.Hardsigmoid(), id="mobilenet_v3"),
        pytest.param(nn.SiLU(), nn.Sigmoid(), id="efficientnet"),
        pytest.param(nn.Hardswish(), nn.Sigmoid(), id="hardswish"),
    ],
)
def test_a_squeeze_excitation_gate_runs_on_the_host(act: nn.Module, gate: nn.Module) -> None:
    torch.manual_seed(0)
    model = SqueezeExcitation(64, act, gate).eval()
    x = torch.randn(1, 8, 14, 14)
    output, trace = _run(model, x)
    if host_row_kernels_run():
        assert not pooling_primitives(trace), describe(trace)
        assert not [r for r in primitives(trace, "convolution") if on_one_pixel(r)], describe(trace)
        assert not primitives(trace, "eltwise"), describe(trace)
    reference = model(x)
    error = (output - reference).abs().max().item()
    assert error <= TOLERANCE * reference.abs().max().item(), f"max error {error}\n{describe(trace)}"


def test_a_gate_lowered_in_bf16_matches_fp32_eager() -> None:
    """precision="bf16": the gate's 1x1 layers take bf16 rows and weights on the host (f32 sums)."""
    if not effective_isa().startswith(("avx512_core_bf16", "avx512_core_amx", "avx2_vnni_2", "avx10")):
        pytest.skip(f"bf16 compute needs AVX512-BF16, AVX2-VNNI-2 or AMX; oneDNN runs {effective_isa()} here")
    torch.manual_seed(0)
    model = SqueezeExcitation(64, nn.SiLU(), nn.Sigmoid()).eval()
    x = torch.randn(1, 8, 14, 14)
    lowered = lower(model, (x,), OneDnnPartitioner(precision="bf16"))
    (output,), trace = execute_traced(lowered.buffer, (x,))
    assert not [r for r in primitives(trace, "convolution") if on_one_pixel(r)], describe(trace)
    reference = model(x)
    error = (output.float() - reference).abs().max().item()
    assert error <= 2e-2 * reference.abs().max().item(), f"max error {error}\n{describe(trace)}"


def test_a_batch_of_pixels_stays_with_onednn() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(32, 8, 1), nn.Sigmoid()).eval()
    x = torch.randn(2, 32, 1, 1)
    output, trace = _run(model, x)
    assert [r for r in primitives(trace, "convolution") if on_one_pixel(r)], describe(trace)
    torch.testing.assert_close(output, model(x), rtol=1e-5, atol=1e-6)


SPECIALS = [float("nan"), float("inf"), float("-inf"), -200.0, 200.0, 0.0, -88.8, 3.0]


@pytest.mark.parametrize(
    "activation",
    [nn.Sigmoid(), nn.SiLU(), nn.Hardsigmoid(), nn.Hardswish()],
    ids=["sigmoid", "silu", "hardsigmoid", "hardswish"],
)
def test_host_activations_match_eager_at_nan_and_the_infinities(activation: nn.Module) -> None:
    """A linear layer of zero weights hands its bias through, NaN and infinities included."""
    if not host_row_kernels_run():
        pytest.skip(f"the host activation kernels need AVX2; oneDNN runs {effective_isa()} here")
    linear = nn.Linear(8, len(SPECIALS))
    with torch.no_grad():
        linear.weight.zero_()
        linear.bias.copy_(torch.tensor(SPECIALS))
    model = nn.Sequential(linear, activation).eval()
    x = torch.randn(1, 8)
    output, trace = _run(model, x)
    assert not primitives(trace, "eltwise"), describe(trace)
    torch.testing.assert_close(output, model(x), rtol=1e-6, atol=1e-6, equal_nan=True)


def test_a_large_activation_stays_with_onednn() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.Sigmoid(), nn.Conv2d(16, 16, 3, padding=1)).eval()
    x = torch.randn(1, 8, 32, 32)
    output, trace = _run(model, x)
    assert any("logistic" in op for r in trace for op in r.post_ops) or primitives(trace, "eltwise"), describe(trace)
    torch.testing.assert_close(output, model(x), rtol=1e-4, atol=1e-5)
