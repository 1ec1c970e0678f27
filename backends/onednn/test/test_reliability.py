# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Damaged programs, weight checksums, determinism, and NaN/Inf propagated as eager PyTorch does."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import mutation_campaign
import pytest
import torch
from executorch.backends.onednn import OneDnnPartitioner
from executorch.backends.onednn.serialization.payload import deserialize
from executorch.backends.onednn.serialization.schema import EltwiseAlg, PostOpKind, StepKind
from executorch.exir import to_edge_transform_and_lower
from tester import execute, execute_each, in_worker, lower
from torch import nn

FUZZ_SEEDS = sorted((Path(__file__).parent / "fuzz" / "seeds").glob("*.odnn"))


def test_a_mutation_campaign_finds_no_crash_and_refuses_every_damaged_graph(tmp_path: Path) -> None:
    result = mutation_campaign.campaign(["mlp", "attention"], 160, seed=7, workers=2, timeout=120, folder=tmp_path)
    assert result["violations"] == [], result["failures"]
    counted = {(row["region"], row["outcome"]): 0 for row in result["rows"]}
    for row in result["rows"]:
        counted[row["region"], row["outcome"]] += row["mutants"]
    assert sum(counted.values()) == 160
    assert counted.get(("payload", mutation_campaign.REFUSED_AT_INIT), 0) > 0  # the checksum at work
    assert counted.get(("weights", mutation_campaign.RAN_DIFFERENT), 0) > 0  # checksums off: damage runs


@pytest.mark.parametrize("seed", FUZZ_SEEDS, ids=lambda path: path.stem)
def test_the_fuzzer_seeds_are_payloads_of_the_current_format(seed: Path) -> None:
    """The seeds are what make_seeds.py exported: after a format change they must be written again, or
    the fuzzer would start from payloads init() refuses at the first check."""
    graph = deserialize(seed.read_bytes())
    assert graph.steps and graph.outputs


def _program(weight_checksums: bool) -> tuple[bytes, list[tuple[int, int]], tuple[torch.Tensor]]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).eval()
    inputs = (torch.randn(3, 16),)
    exported = torch.export.export(model, inputs)
    edge = to_edge_transform_and_lower(exported, partitioner=[OneDnnPartitioner(weight_checksums=weight_checksums)])
    pte = edge.to_executorch().buffer
    return pte, mutation_campaign.regions(pte)["weights"], inputs


@pytest.mark.parametrize("weight_checksums", [False, True])
def test_a_damaged_weight_is_refused_only_when_the_program_carries_weight_checksums(weight_checksums: bool) -> None:
    pte, weights, inputs = _program(weight_checksums)
    intact = execute(pte, inputs)[0]
    start, _ = max(weights, key=lambda span: span[1] - span[0])  # the first layer's weight matrix
    damaged = bytearray(pte)
    damaged[start + 5] ^= 0x40  # an exponent bit of the second weight
    outcome = in_worker(mutation_campaign.outcome_of, bytes(damaged), list(inputs), [intact])
    expected = mutation_campaign.REFUSED_AT_INIT if weight_checksums else mutation_campaign.RAN_DIFFERENT
    assert outcome == expected


def test_weight_checksums_change_nothing_else() -> None:
    plain, _, inputs = _program(False)
    checked, _, _ = _program(True)
    assert torch.equal(execute(plain, inputs)[0], execute(checked, inputs)[0])


def test_the_same_inputs_give_the_same_outputs_run_after_run() -> None:
    """oneDNN's primitives are deterministic for a fixed thread count on one CPU (its documentation:
    run-to-run reproducibility), and so are our host kernels; threads split work, never reductions."""
    torch.manual_seed(0)
    model = nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0, batch_first=True).eval()
    inputs = [torch.randn(2, 37, 64)]
    buffer = lower(model, tuple(inputs)).buffer
    runs = execute_each(buffer, [inputs] * 20)
    assert all(not isinstance(run, str) for run in runs), runs
    assert all(torch.equal(run[0], runs[0][0]) for run in runs[1:])  # type: ignore[index]
    assert torch.equal(execute(buffer, inputs)[0], runs[0][0])  # type: ignore[index]  # a fresh load too


def _special_values(shape: tuple[int, ...], seed: int = 3) -> torch.Tensor:
    """Random values with NaN, +Inf and -Inf in some rows (not all), so rows without them are checked too."""
    x = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    flat = x.view(-1, shape[-1])
    flat[seed % 2, 1] = float("nan")
    flat[1, 2 + seed % 2] = float("inf")
    flat[2, 0] = float("-inf")
    flat[3, 3] = float("inf")
    flat[3, 4] = float("-inf")
    return x


class Binary(nn.Module):
    def __init__(self, function: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.function = function

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.function(x, y)


class Elementwise(nn.Module):
    def __init__(self, function: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.function = function

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.function(x)


class ConvThenReluAndAdd(nn.Module):
    """A standalone relu of a convolution's blocked output (two users: no post-op fusion)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 16, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return torch.relu(y) + y


class ConvAddRelu(nn.Module):
    """The residual add and the relu both fused into the convolution: a NaN may come from either input."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 16, 3, padding=1)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x) + residual)


class ConvChain(nn.Module):
    """A clamp inside a fused chain: clip, add, tanh and a scale all post-ops of the convolution."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 16, 3, padding=1)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return torch.tanh(nn.functional.hardtanh(self.conv(x)) + residual) * 2.0


class ConvThenMaxPool(nn.Module):
    """Max pooling of a blocked convolution output, with padding and stride."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 16, 3, padding=1)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(self.conv(x))


CASES: dict[str, tuple[nn.Module, tuple[int, ...]]] = {
    "relu": (nn.ReLU(), (6, 8)),
    "gelu": (nn.GELU(), (6, 8)),
    "silu": (nn.SiLU(), (6, 8)),
    "sigmoid": (nn.Sigmoid(), (6, 8)),
    "tanh": (nn.Tanh(), (6, 8)),
    "elu": (nn.ELU(), (6, 8)),
    "leaky_relu": (nn.LeakyReLU(0.1), (6, 8)),
    "hardtanh": (nn.Hardtanh(), (6, 8)),
    "hardswish": (nn.Hardswish(), (6, 8)),
    "clamp": (Elementwise(lambda x: torch.clamp(x, -0.5, 0.5)), (6, 8)),
    "clamp_min": (Elementwise(lambda x: torch.clamp(x, min=-0.5)), (6, 8)),
    "relu6_wide_rows": (nn.ReLU6(), (4, 70)),  # AVX-512 blocks and a tail
    "hardsigmoid": (nn.Hardsigmoid(), (6, 8)),
    "linear_relu": (nn.Sequential(nn.Linear(8, 5), nn.ReLU()), (6, 8)),  # relu fused as a post-op
    "linear_relu6": (nn.Sequential(nn.Linear(8, 5), nn.ReLU6()), (6, 8)),  # clip fused as a post-op
    "linear_clamp_above_zero": (nn.Sequential(nn.Linear(8, 5), Elementwise(lambda x: x.clamp(min=0.5))), (6, 8)),
    "linear_exp": (nn.Sequential(nn.Linear(8, 5), Elementwise(torch.exp)), (6, 8)),
    "conv2d_add_relu": (ConvAddRelu(), (1, 2, 6, 8)),
    "conv2d_clip_add_tanh_scale": (ConvChain(), (1, 2, 6, 8)),
    "conv2d_relu": (nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.ReLU()), (1, 2, 6, 8)),
    "conv2d_then_relu_and_add": (ConvThenReluAndAdd(), (1, 2, 6, 8)),
    "abs": (Elementwise(torch.abs), (6, 8)),
    "exp": (Elementwise(torch.exp), (6, 8)),
    "log": (Elementwise(lambda x: torch.log(x.abs())), (6, 8)),
    "sqrt": (Elementwise(lambda x: torch.sqrt(x.abs())), (6, 8)),
    "add_mul": (Binary(lambda x, y: x * 2.0 + y), (6, 8)),
    "maximum": (Binary(torch.maximum), (6, 8)),
    "minimum": (Binary(torch.minimum), (6, 8)),
    "maximum_broadcast": (Binary(lambda x, y: torch.maximum(x, y[:1])), (6, 8)),
    "softmax": (nn.Softmax(dim=-1), (6, 8)),
    "log_softmax": (nn.LogSoftmax(dim=-1), (6, 8)),
    "log_softmax_wide_rows": (nn.LogSoftmax(dim=-1), (6, 37)),  # AVX-512 blocks and a tail
    "layer_norm": (nn.LayerNorm(8), (6, 8)),
    "linear": (nn.Linear(8, 5), (6, 8)),
    "mean": (Elementwise(lambda x: x.mean(-1)), (6, 8)),
    "sum": (Elementwise(lambda x: x.sum(-1)), (6, 8)),
    "amax": (Elementwise(lambda x: x.amax(-1)), (6, 8)),
    "conv2d": (nn.Conv2d(2, 3, 3, padding=1), (1, 2, 6, 8)),
    # An image stem of stride 2: read in place (plain) by oneDNN's direct kernel on AVX-512.
    "conv2d_image_stem": (nn.Conv2d(3, 16, 3, stride=2, padding=1), (1, 3, 12, 12)),
    "conv2d_image_stem_7x7": (nn.Conv2d(3, 8, 7, stride=2, padding=3), (1, 3, 16, 16)),
    "amin": (Elementwise(lambda x: x.amin(0)), (6, 8)),
    "max_pool2d": (nn.MaxPool2d(2), (1, 2, 6, 8)),
    "max_pool2d_of_conv": (ConvThenMaxPool(), (1, 2, 9, 9)),
    "max_pool2d_dilated": (nn.MaxPool2d(3, stride=1, padding=1, dilation=2, ceil_mode=True), (1, 2, 8, 8)),
    "max_pool1d": (nn.MaxPool1d(3, stride=2, padding=1), (2, 3, 9)),
    "avg_pool2d": (nn.AvgPool2d(2), (1, 2, 6, 8)),
    "adaptive_avg_pool2d": (nn.AdaptiveAvgPool2d(1), (1, 2, 6, 8)),
}


def _inputs_of(module: nn.Module, shape: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
    if isinstance(module, ConvAddRelu):  # the NaN and infinities in the residual only
        return (torch.randn(shape), _special_values((1, 16, *shape[2:])))
    if isinstance(module, ConvChain):
        return (_special_values(shape), _special_values((1, 16, *shape[2:]), 4))
    arity = 2 if isinstance(module, Binary) else 1
    return tuple(_special_values(shape, seed) for seed in range(3, 3 + arity))


# oneDNN 3.2 loses a NaN in max pooling, max/min reduction, exp, hardsigmoid and relu or clamp fused
# as a post-op: those steps are guarded (runtime/NanKernels.h). Standalone relu and clamp, maximum and
# minimum run on the host.
@pytest.mark.parametrize("name", sorted(CASES))
def test_nan_and_inf_propagate_as_in_eager(name: str) -> None:
    torch.manual_seed(0)
    module, shape = CASES[name]
    model = module.eval()
    inputs = _inputs_of(module, shape)
    with torch.no_grad():
        want = model(*inputs)
    lowered = lower(model, inputs)
    assert lowered.delegate_calls >= 1 and not lowered.undelegated_compute, lowered.describe()
    got = execute(lowered.buffer, inputs)[0]
    for kind in (torch.isnan, torch.isposinf, torch.isneginf):
        assert torch.equal(kind(got), kind(want)), f"{kind.__name__}: got\n{got}\neager\n{want}"
    finite = torch.isfinite(want)
    torch.testing.assert_close(got[finite], want[finite], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["relu", "clamp", "clamp_min", "relu6_wide_rows", "hardtanh", "maximum_broadcast"])
def test_host_kernels_keep_nan_and_inf_in_bf16(name: str) -> None:
    module, shape = CASES[name]
    inputs = tuple(x.bfloat16() for x in _inputs_of(module, shape))
    lowered = lower(module.eval(), inputs)
    assert lowered.delegate_calls == 1 and not lowered.undelegated_compute, lowered.describe()
    got = execute(lowered.buffer, inputs)[0]
    want = module(*inputs)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got, want, equal_nan=True, rtol=0, atol=0)


GUARDED = [
    "conv2d_relu",
    "conv2d_add_relu",
    "conv2d_clip_add_tanh_scale",
    "linear_relu6",
    "max_pool2d_of_conv",
    "amax",
    "exp",
]


@pytest.mark.parametrize("name", GUARDED)
def test_guarded_steps_keep_nan_and_inf_in_bf16(name: str) -> None:
    module, shape = CASES[name]
    inputs = tuple(x.bfloat16() for x in _inputs_of(module, shape))
    lowered = lower(module.eval().bfloat16(), inputs)
    assert lowered.delegate_calls == 1 and not lowered.undelegated_compute, lowered.describe()
    got = execute(lowered.buffer, inputs)[0]
    with torch.no_grad():
        want = module(*inputs)
    for kind in (torch.isnan, torch.isposinf, torch.isneginf):
        assert torch.equal(kind(got), kind(want)), f"{kind.__name__}: got\n{got}\neager\n{want}"


# oneDNN's bf16 kernels for few input channels (AMX's, and AVX512-BF16's for odd counts) multiply inputs
# outside an output's window by zero weights: an infinity there would become a NaN. Such convolutions
# are guarded; the reference is the fp32 convolution of the same bf16 values (exact products).
@pytest.mark.parametrize(
    ("channels", "kernel", "stride"), [(1, 3, 1), (2, 3, 1), (3, 7, 2), (3, 5, 2), (5, 3, 1), (1, 1, 1)]
)
def test_bf16_convolutions_of_few_input_channels_keep_nan_and_inf(channels: int, kernel: int, stride: int) -> None:
    torch.manual_seed(channels)
    module = nn.Conv2d(channels, 8, kernel, stride=stride, padding=kernel // 2).eval()
    x = _special_values((1, channels, 12, 12), seed=channels).bfloat16()
    lowered = lower(module.bfloat16(), (x,))
    assert lowered.delegate_calls == 1 and not lowered.undelegated_compute, lowered.describe()
    got = execute(lowered.buffer, (x,))[0]
    with torch.no_grad():
        want = module.float()(x.float())
    for kind in (torch.isnan, torch.isposinf, torch.isneginf):
        assert torch.equal(kind(got), kind(want)), f"{kind.__name__}: got\n{got}\nfp32\n{want}"
    finite = torch.isfinite(want)
    torch.testing.assert_close(got.float()[finite], want[finite], rtol=2e-2, atol=2e-2)


def test_a_nan_in_the_weights_reaches_the_output_through_a_fused_relu() -> None:
    model = nn.Sequential(nn.Linear(8, 5), nn.ReLU()).eval()
    with torch.no_grad():
        model[0].weight[2, 3] = float("nan")
    x = torch.randn(4, 8)
    lowered = lower(model, (x,))
    assert lowered.steps(StepKind.ELTWISE) == [], "the relu should be a post-op of the matmul"
    got = execute(lowered.buffer, (x,))[0]
    with torch.no_grad():
        want = model(x)
    assert torch.isnan(got[:, 2]).all() and not torch.isnan(got[:, [0, 1, 3, 4]]).any()
    torch.testing.assert_close(got, want, equal_nan=True)


def test_post_ops_that_would_lose_a_nan_are_not_fused() -> None:
    """exp and hardsigmoid stay standalone, and so does a clamp excluding 0; relu and the chain after it fuse."""
    x = torch.randn(4, 8)
    clamp_above_zero = Elementwise(lambda t: t.clamp(min=0.5))
    for tail in (Elementwise(torch.exp), nn.Hardsigmoid(), clamp_above_zero):
        lowered = lower(nn.Sequential(nn.Linear(8, 5), tail).eval(), (x,))
        (matmul,) = lowered.steps(StepKind.MATMUL)
        assert len(lowered.steps(StepKind.ELTWISE)) == 1 and "post_ops" not in matmul.ints, lowered.steps()
    lowered = lower(nn.Sequential(nn.Linear(8, 5), nn.ReLU(), nn.GELU()).eval(), (x,))
    (matmul,) = lowered.steps(StepKind.MATMUL)
    assert lowered.steps(StepKind.ELTWISE) == []
    assert matmul.ints["post_ops"] == [PostOpKind.ELTWISE, EltwiseAlg.RELU, PostOpKind.ELTWISE, EltwiseAlg.GELU_ERF]
