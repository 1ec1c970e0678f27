# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The payload passes: the step lists they produce, and that they do not change results."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from executorch.backends.onednn import onednn_preprocess
from executorch.backends.onednn._passes import (
    PASSES,
    drop_neutral_binaries,
    drop_unused,
    fold_batch_norm,
    fold_channel_gates,
    fold_channel_scales,
    fold_operand_scales,
    run_passes,
    simplify_layout,
)
from executorch.backends.onednn.cli.zoo import randomize_batch_norms
from executorch.backends.onednn.serialization.payload import Graph, Step
from executorch.backends.onednn.serialization.schema import NO_VALUE, BinaryAlg, DType, EltwiseAlg, PostOpKind, StepKind
from tester import execute, flatten_outputs, lower, mismatch
from torch import nn
from torch.nn import functional as F

CONV, BN, MATMUL = StepKind.CONVOLUTION, StepKind.BATCH_NORM, StepKind.MATMUL
ELTWISE, BINARY, CONCAT = StepKind.ELTWISE, StepKind.BINARY, StepKind.CONCAT
REORDER, RESHAPE = StepKind.REORDER, StepKind.RESHAPE


def eltwise_post_op(alg: EltwiseAlg) -> list[int]:
    return [PostOpKind.ELTWISE, alg]


def binary_post_op(alg: BinaryAlg) -> list[int]:
    return [PostOpKind.BINARY, alg]


class ConvBnRelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 8, 3, padding=1), randomize_batch_norms(nn.BatchNorm2d(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x)))


class ResidualBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(8, 8, 3, padding=1, bias=False), randomize_batch_norms(nn.BatchNorm2d(8))
        self.conv2, self.bn2 = nn.Conv2d(8, 8, 3, padding=1, bias=False), randomize_batch_norms(nn.BatchNorm2d(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + x)


class LinearGelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.fc(x))


def written_out_gelu(x: torch.Tensor, cubic: float = 0.044715) -> torch.Tensor:
    """GELU as Hugging Face's GPT-2 writes it (NewGELUActivation)."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + cubic * torch.pow(x, 3.0))))


class LinearWrittenOutGelu(nn.Module):
    def __init__(self, cubic: float = 0.044715) -> None:
        super().__init__()
        self.fc, self.cubic = nn.Linear(16, 32), cubic

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return written_out_gelu(self.fc(x), self.cubic)


class Conv1dGelu(nn.Module):
    """Hugging Face's Conv1D (GPT-2): a 2-D addmm, reshaped back to 3-D before the activation."""

    def __init__(self) -> None:
        super().__init__()
        self.weight, self.bias = nn.Parameter(torch.randn(16, 32) * 0.2), nn.Parameter(torch.randn(32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.addmm(self.bias, x.view(-1, x.shape[-1]), self.weight).view(*x.shape[:-1], 32)
        return F.gelu(y)


class ConvTimesSigmoid(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.conv(x)
        return c * torch.sigmoid(c)


class LinearWrittenOutHardswish(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        return y * torch.clamp(y + 3, 0, 6) / 6


class ConvOutputAlsoReturned(nn.Module):
    """The conv result is a graph output, so the relu cannot be folded into it."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        c = self.conv(x)
        return c, torch.relu(c)


class ConvFeedsBnAndAdd(nn.Module):
    """The conv result has a second reader, so the batch norm cannot be folded into it."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 8, 3), randomize_batch_norms(nn.BatchNorm2d(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.conv(x)
        return self.bn(c) + c


class StandaloneBn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bn = randomize_batch_norms(nn.BatchNorm2d(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x)


class AddRelu(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.relu(a + b)


class ScaledTwice(nn.Module):
    """RMSNorm's tail, x * r * weight: two binary steps (a binary post-op on a binary step is slow)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.rand(8) + 0.5)

    def forward(self, x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return x * r * self.weight


class Rotary(nn.Module):
    """Rotary position embeddings as Llama writes them: x * cos + rotate_half(x) * sin."""

    def __init__(self, tokens: int = 5, width: int = 16) -> None:
        super().__init__()
        angles = torch.arange(tokens)[:, None] * torch.rand(width // 2)[None, :]
        self.register_buffer("cos", torch.cat([angles, angles], -1).cos())
        self.register_buffer("sin", torch.cat([angles, angles], -1).sin())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return x * self.cos + torch.cat([-x[..., half:], x[..., :half]], -1) * self.sin


class ConcatOfUnevenPieces(nn.Module):
    """Slices that repeat a column: not a permutation, so the concat stays."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x[..., 1:], x[..., :2]], -1) * 2


class ReluUsedTwice(nn.Module):
    """sigmoid(conv) feeds two ops: it folds into the conv, the consumers stay separate steps."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = torch.sigmoid(self.conv(x))
        return torch.tanh(s) * torch.exp(s)


IMG3, IMG8 = (1, 3, 8, 8), (1, 8, 8, 8)
# (id, model, input shapes, expected [(kind, post_ops)] of the lowered payload)
PIPELINES: list[tuple[str, Callable[[], nn.Module], tuple[tuple[int, ...], ...], list[tuple[StepKind, list[int]]]]] = [
    ("conv_bn_relu_becomes_one_conv", ConvBnRelu, (IMG3,), [(CONV, eltwise_post_op(EltwiseAlg.RELU))]),
    (
        "residual_add_and_relu_fold_into_second_conv",
        ResidualBlock,
        (IMG8,),
        [
            (CONV, eltwise_post_op(EltwiseAlg.RELU)),
            (CONV, binary_post_op(BinaryAlg.ADD) + eltwise_post_op(EltwiseAlg.RELU)),
        ],
    ),
    ("linear_gelu_becomes_matmul_with_gelu", LinearGelu, ((4, 16),), [(MATMUL, eltwise_post_op(EltwiseAlg.GELU_ERF))]),
    # Recognized after the post-op fusion: a step of its own, which the runtime may compute on the host.
    ("written_out_tanh_gelu_becomes_one_step", LinearWrittenOutGelu, ((4, 16),), [(MATMUL, []), (ELTWISE, [])]),
    (
        "activation_after_a_reshape_becomes_a_matmul_post_op",
        Conv1dGelu,
        ((2, 3, 16),),
        [(RESHAPE, []), (MATMUL, eltwise_post_op(EltwiseAlg.GELU_ERF)), (RESHAPE, [])],
    ),
    ("x_times_sigmoid_x_becomes_one_step", ConvTimesSigmoid, (IMG3,), [(CONV, []), (ELTWISE, [])]),
    ("written_out_hardswish_becomes_one_step", LinearWrittenOutHardswish, ((4, 16),), [(MATMUL, []), (ELTWISE, [])]),
    ("binary_takes_an_eltwise_post_op", AddRelu, ((2, 8), (2, 8)), [(BINARY, eltwise_post_op(EltwiseAlg.RELU))]),
    (
        "rotate_half_becomes_a_matmul_taking_sin_and_cos",
        Rotary,
        ((1, 3, 5, 16),),
        [(BINARY, []), (MATMUL, binary_post_op(BinaryAlg.MUL) + binary_post_op(BinaryAlg.ADD))],
    ),
    (
        "concat_repeating_a_column_stays",
        ConcatOfUnevenPieces,
        ((2, 8),),
        [(REORDER, []), (REORDER, []), (CONCAT, []), (ELTWISE, [])],
    ),
    ("binary_takes_no_binary_post_op", ScaledTwice, ((2, 8), (2, 1)), [(BINARY, []), (BINARY, [])]),
    ("no_fusion_into_a_graph_output", ConvOutputAlsoReturned, (IMG3,), [(CONV, []), (ELTWISE, [])]),
    ("no_folding_when_conv_has_other_readers", ConvFeedsBnAndAdd, (IMG3,), [(CONV, []), (BN, []), (BINARY, [])]),
    ("standalone_batch_norm_stays", StandaloneBn, (IMG3,), [(BN, [])]),
    (
        "eltwise_with_two_readers_folds_but_readers_stay",
        ReluUsedTwice,
        (IMG3,),
        [(CONV, eltwise_post_op(EltwiseAlg.LOGISTIC)), (ELTWISE, []), (ELTWISE, []), (BINARY, [])],
    ),
]


def build(
    factory: Callable[[], nn.Module], shapes: tuple[tuple[int, ...], ...]
) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return factory().eval(), tuple(torch.randn(s) for s in shapes)


def step_summary(graph: Graph) -> list[tuple[StepKind, list[int]]]:
    return [(step.kind, step.ints.get("post_ops", [])) for step in graph.steps]


def readable(summary: list[tuple[StepKind, list[int]]]) -> list[str]:
    return [f"{kind.name}{post_ops}" if post_ops else kind.name for kind, post_ops in summary]


@pytest.mark.parametrize(("name", "factory", "shapes", "expected"), PIPELINES, ids=[p[0] for p in PIPELINES])
def test_lowered_step_list(
    name: str,
    factory: Callable[[], nn.Module],
    shapes: tuple[tuple[int, ...], ...],
    expected: list[tuple[StepKind, list[int]]],
) -> None:
    lowered = lower(*build(factory, shapes))
    payloads = lowered.payloads()
    assert len(payloads) == 1, lowered.describe()
    got = step_summary(payloads[0])
    assert got == expected, f"{name}: steps {readable(got)}, expected {readable(expected)}"


def test_residual_operand_is_passed_after_the_fixed_conv_inputs() -> None:
    graph = lower(*build(ResidualBlock, (IMG8,))).payloads()[0]
    second = graph.steps[1]
    assert len(second.inputs) == 4, f"conv inputs {second.inputs}: expected src, weights, bias, residual"
    assert second.inputs[3] == graph.inputs[0], "the residual operand should be the block's input"
    assert second.inputs[2] != NO_VALUE, "the folded batch norm should have given the conv a bias"


# --- fold_batch_norm on a hand-built graph, checked numerically against torch ----------------------
def conv_bn_graph(conv: nn.Conv2d, bn: nn.BatchNorm2d) -> Graph:
    graph = Graph()
    x = graph.add_value(DType.F32, (1, conv.in_channels, 6, 6))
    weight = graph.add_constant(conv.weight.detach(), DType.F32)
    bias = graph.add_constant(conv.bias.detach(), DType.F32) if conv.bias is not None else NO_VALUE
    y = graph.add_value(DType.F32, (1, conv.out_channels, 6, 6))
    z = graph.add_value(DType.F32, (1, conv.out_channels, 6, 6))
    stats = [graph.add_constant(t.detach(), DType.F32) for t in (bn.running_mean, bn.running_var, bn.weight, bn.bias)]
    ints = {"strides": [1, 1], "padding_l": [1, 1], "padding_r": [1, 1], "dilation": [1, 1], "groups": [1]}
    graph.add_step(Step(CONV, [x, weight, bias], [y], ints))
    graph.add_step(Step(BN, [y, *stats], [z], floats={"eps": [bn.eps]}))
    graph.inputs, graph.outputs = [x], [z]
    return graph


@pytest.mark.parametrize("conv_bias", [True, False], ids=["conv_bias", "no_conv_bias"])
def test_fold_batch_norm_rescales_weights_exactly(conv_bias: bool) -> None:
    torch.manual_seed(0)
    conv, bn = nn.Conv2d(4, 6, 3, padding=1, bias=conv_bias), randomize_batch_norms(nn.BatchNorm2d(6)).eval()
    graph = drop_unused(fold_batch_norm(conv_bn_graph(conv, bn)))
    assert [s.kind for s in graph.steps] == [CONV], readable(step_summary(graph))
    step = graph.steps[0]
    weight, bias = graph.constant_data[step.inputs[1]], graph.constant_data[step.inputs[2]]
    x = torch.randn(1, 4, 6, 6)
    with torch.no_grad():
        expected = bn(conv(x))
    error = mismatch("folded conv", [F.conv2d(x, weight, bias, padding=1)], [expected], 1e-5)
    assert error is None, error


def test_fold_batch_norm_keeps_graph_outputs_intact() -> None:
    torch.manual_seed(0)
    graph = conv_bn_graph(nn.Conv2d(4, 6, 3, padding=1), randomize_batch_norms(nn.BatchNorm2d(6)))
    conv_output = graph.steps[0].outputs[0]
    graph.outputs.append(conv_output)
    folded = fold_batch_norm(graph)
    assert [s.kind for s in folded.steps] == [CONV, BN], "a conv result that is a graph output must not be folded away"


# --- with and without the passes, through the runtime ------------------------------------------------
# The pipelines where the passes change something.
FUSED_VS_UNFUSED = [p for p in PIPELINES if any(post_ops for _, post_ops in p[3])]


@pytest.mark.parametrize(
    ("name", "factory", "shapes"), [p[:3] for p in FUSED_VS_UNFUSED], ids=[p[0] for p in FUSED_VS_UNFUSED]
)
def test_fused_and_unfused_programs_agree(
    name: str, factory: Callable[[], nn.Module], shapes: tuple[tuple[int, ...], ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    model, inputs = build(factory, shapes)
    with torch.no_grad():
        expected = flatten_outputs(model(*inputs))
    fused = lower(model, inputs)
    with monkeypatch.context() as patch:
        patch.setattr(onednn_preprocess, "run_passes", lambda graph, *_: run_passes(graph, [drop_unused]))
        unfused = lower(model, inputs)
    fused_steps, unfused_steps = (len(lowered.payloads()[0].steps) for lowered in (fused, unfused))
    assert fused_steps < unfused_steps, f"{name}: the passes did not change the step list ({fused_steps} steps)"
    fused_out, unfused_out = execute(fused.buffer, inputs), execute(unfused.buffer, inputs)
    for label, outputs in (("unfused", unfused_out), ("fused", fused_out)):
        error = mismatch(f"{name} ({label})", outputs, expected, 1e-4)
        assert error is None, error
    error = mismatch(f"{name} fused vs unfused", fused_out, unfused_out, 1e-4)
    assert error is None, error


# --- fold_channel_gates: squeeze-and-excitation gates move onto the projection's weights -------------
class SqueezeExcite(nn.Module):
    """MobileNetV3's and EfficientNet's gating: y * sigmoid(fc(mean(y))) feeding a 1x1 projection."""

    def __init__(self) -> None:
        super().__init__()
        self.expand, self.project = nn.Conv2d(3, 16, 1), nn.Conv2d(16, 8, 1)
        self.reduce, self.gate = nn.Conv2d(16, 4, 1), nn.Conv2d(4, 16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.expand(x))
        gates = torch.sigmoid(self.gate(F.relu(self.reduce(y.mean((2, 3), keepdim=True)))))
        return self.project(y * gates)


@pytest.mark.parametrize(
    ("shape", "folded"),
    [
        pytest.param((1, 3, 16, 16), True, id="256_positions_for_8_output_channels"),
        pytest.param((1, 3, 7, 7), True, id="49_positions_are_more_than_six_times_8_channels"),
        pytest.param((1, 3, 6, 6), False, id="36_positions_are_not_more_than_six_times_8_channels"),
        pytest.param((2, 3, 16, 16), False, id="a_batch_of_two_has_gates_per_image"),
    ],
)
def test_squeeze_excite_gates_scale_the_projection_weights_where_cheaper(
    shape: tuple[int, ...], folded: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, inputs = build(SqueezeExcite, (shape,))
    with torch.no_grad():
        expected = flatten_outputs(model(*inputs))
    lowered = lower(model, inputs)
    graph = lowered.payloads()[0]
    producers = graph.producers()
    projection = graph.steps[producers[graph.outputs[0]]]
    weights = projection.inputs[1]
    assert projection.kind == CONV and graph.values[projection.inputs[0]].dims == (shape[0], 16, *shape[2:])
    gated = weights in producers and graph.steps[producers[weights]].kind == BINARY
    assert gated == folded, readable(step_summary(graph))
    assert (graph.values[weights].constant_key is None) == folded
    error = mismatch("squeeze-excite", execute(lowered.buffer, inputs), expected, 1e-5)
    assert error is None, error
    with monkeypatch.context() as patch:  # the same program without the fold computes the same
        patch.setattr(
            onednn_preprocess,
            "run_passes",
            lambda g, *_: run_passes(g, [p for p in PASSES if p is not fold_channel_gates]),
        )
        unfolded = lower(model, inputs)
    error = mismatch(
        "squeeze-excite folded vs not", execute(lowered.buffer, inputs), execute(unfolded.buffer, inputs), 1e-5
    )
    assert error is None, error


# --- recognize_activations: what stays arithmetic ----------------------------------------------------
def computes_eltwise(graph: Graph, alg: EltwiseAlg) -> bool:
    """Whether a step, or a post-op of one, computes eltwise `alg`."""
    for step in graph.steps:
        if step.kind == ELTWISE and step.ints["alg"] == [alg]:
            return True
        post_ops = step.ints.get("post_ops", [])
        if any(post_ops[i : i + 2] == [PostOpKind.ELTWISE, alg] for i in range(0, len(post_ops), 2)):
            return True
    return False


class WrittenOutGelu(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return written_out_gelu(x)


class WrittenOutSwish(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x)


class WrittenOutHardswish(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.clamp(x + 3, 0, 6) / 6


@pytest.mark.parametrize("factory", [WrittenOutGelu, WrittenOutSwish, WrittenOutHardswish])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_written_out_activation_matches_eager_at_every_value(
    factory: Callable[[], nn.Module], dtype: torch.dtype
) -> None:
    """The one step (tanh GELU on the host on AVX2, oneDNN's elsewhere) gives what the written-out steps
    give eagerly, non-finite values included (GELU's -inf gives NaN there)."""
    special = torch.tensor([float("inf"), -float("inf"), float("nan"), 1e20, -1e20, 30.0, -30.0, 0.0])
    x = torch.cat([torch.linspace(-12.0, 12.0, 997), special]).reshape(1, -1).to(dtype)
    model = factory()
    lowered = lower(model, (x,))
    assert [step.kind for step in lowered.payloads()[0].steps] == [ELTWISE], lowered.describe()
    (got,) = execute(lowered.buffer, (x,))
    with torch.no_grad():
        expected = model(x)
    assert torch.equal(got.isnan(), expected.isnan()), "NaN where eager has none, or the reverse"
    tolerance = 1e-5 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(got.float().nan_to_num(), expected.float().nan_to_num(), atol=tolerance, rtol=tolerance)


class GeluAndItsTanh(nn.Module):
    """The GELU's inner tanh is an output as well: the chain cannot go."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        inner = torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0)))
        return 0.5 * x * (1.0 + inner), inner


@pytest.mark.parametrize(
    ("name", "factory"),
    [
        ("a_constant_off_by_1e-5", lambda: LinearWrittenOutGelu(cubic=0.0447)),
        ("an_inner_value_read_elsewhere", GeluAndItsTanh),
    ],
)
def test_a_near_gelu_stays_arithmetic(name: str, factory: Callable[[], nn.Module]) -> None:
    model, inputs = build(factory, ((4, 16),))
    lowered = lower(model, inputs)
    assert not computes_eltwise(lowered.payloads()[0], EltwiseAlg.GELU_TANH), f"{name}: became a GELU"
    with torch.no_grad():
        expected = flatten_outputs(model(*inputs))
    error = mismatch(name, execute(lowered.buffer, inputs), expected, 1e-5)
    assert error is None, error


# --- simplify_layout, drop_neutral_binaries, fold_operand_scales --------------------------------------
class AttentionBlock(nn.Module):
    """Attention as Hugging Face models export it: an additive mask built from an all-visible padding mask
    (a constant of zeros), identity views around the heads, and a residual add after the output projection."""

    def __init__(self, dim: int = 32, heads: int = 4, seq: int = 6) -> None:
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
        self.register_buffer("mask", torch.zeros(1, 1, seq, seq))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = (p(x).view(b, s, self.heads, -1).transpose(1, 2) for p in (self.q, self.k, self.v))
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask, scale=0.3)
        merged = attended.transpose(1, 2).reshape(b, s, d).view(b, s, d)
        return self.o(merged) + x


def layout_graph(dims: tuple[int, ...], *steps: tuple[StepKind, tuple[int, ...], list[int] | None]) -> Graph:
    """A chain x -> step -> step ... of (kind, output dims, permutation or None) on f32 values."""
    graph = Graph()
    current = graph.add_value(DType.F32, dims)
    graph.inputs = [current]
    for kind, out_dims, permutation in steps:
        out = graph.add_value(DType.F32, out_dims)
        graph.add_step(Step(kind, [current], [out], {"permutation": permutation} if permutation else {}))
        current = out
    graph.add_step(Step(ELTWISE, [current], [graph.add_value(DType.F32, out_dims)], {"alg": [EltwiseAlg.RELU]}))
    graph.outputs = [graph.steps[-1].outputs[0]]
    return graph


def test_simplify_layout_composes_permutes_like_torch() -> None:
    first, second = [1, 2, 0], [0, 2, 1]
    graph = simplify_layout(layout_graph((2, 3, 4), (REORDER, (3, 4, 2), first), (REORDER, (3, 2, 4), second)))
    assert [s.kind for s in graph.steps] == [REORDER, ELTWISE], readable(step_summary(graph))
    assert graph.steps[0].inputs == graph.inputs
    x = torch.randn(2, 3, 4)
    composed = graph.steps[0].ints["permutation"]
    assert torch.equal(x.permute(composed), x.permute(first).permute(second)), composed


def test_simplify_layout_drops_identities_and_merges_reshapes() -> None:
    graph = layout_graph(
        (2, 3, 4),
        (RESHAPE, (2, 3, 4), None),
        (REORDER, (3, 2, 4), [1, 0, 2]),
        (REORDER, (2, 3, 4), [1, 0, 2]),
        (RESHAPE, (6, 4), None),
        (RESHAPE, (24,), None),
    )
    simplified = simplify_layout(graph)
    assert [s.kind for s in simplified.steps] == [RESHAPE, ELTWISE], readable(step_summary(simplified))
    assert simplified.steps[0].inputs == simplified.inputs
    assert simplified.values[simplified.steps[0].outputs[0]].dims == (24,)


def test_simplify_layout_keeps_graph_outputs_and_casts() -> None:
    graph = layout_graph((2, 3), (RESHAPE, (2, 3), None))
    graph.outputs.append(graph.steps[0].outputs[0])
    assert [s.kind for s in simplify_layout(graph).steps] == [RESHAPE, ELTWISE], "an identity reshape that is an output"
    cast = layout_graph((2, 3), (REORDER, (2, 3), None))
    cast.values[cast.steps[0].outputs[0]].dtype = DType.BF16
    assert [s.kind for s in simplify_layout(cast).steps] == [REORDER, ELTWISE], "a cast is not layout-only"


def binary_graph(alg: BinaryAlg, constant: torch.Tensor, constant_first: bool = False) -> Graph:
    graph = Graph()
    x = graph.add_value(DType.F32, (2, 4))
    c = graph.add_constant(constant, DType.F32)
    out = graph.add_value(DType.F32, (2, 4))
    graph.add_step(Step(BINARY, [c, x] if constant_first else [x, c], [out], {"alg": [alg]}))
    graph.add_step(Step(ELTWISE, [out], [graph.add_value(DType.F32, (2, 4))], {"alg": [EltwiseAlg.RELU]}))
    graph.inputs, graph.outputs = [x], [graph.steps[-1].outputs[0]]
    return graph


@pytest.mark.parametrize(
    ("alg", "constant", "constant_first", "dropped"),
    [
        (BinaryAlg.ADD, torch.zeros(1, 4), True, True),
        (BinaryAlg.SUB, torch.zeros(2, 4), False, True),
        (BinaryAlg.MUL, torch.ones(4), False, True),
        (BinaryAlg.DIV, torch.ones(1), False, True),
        (BinaryAlg.ADD, torch.tensor([0.0, 0.0, 0.0, 1e-30]), False, False),
        (BinaryAlg.SUB, torch.zeros(2, 4), True, False),  # 0 - x
        (BinaryAlg.DIV, torch.ones(2, 4), True, False),  # 1 / x
        (BinaryAlg.MAX, torch.zeros(2, 4), False, False),
    ],
    ids=["x+0", "x-0", "x*1", "x/1", "x+tiny", "0-x", "1/x", "max(x,0)"],
)
def test_drop_neutral_binaries(alg: BinaryAlg, constant: torch.Tensor, constant_first: bool, dropped: bool) -> None:
    graph = drop_neutral_binaries(binary_graph(alg, constant, constant_first))
    assert [s.kind for s in graph.steps] == ([ELTWISE] if dropped else [BINARY, ELTWISE])
    if dropped:
        assert graph.steps[0].inputs == graph.inputs


def test_neutral_binary_that_broadcasts_its_other_operand_stays() -> None:
    graph = binary_graph(BinaryAlg.ADD, torch.zeros(2, 4))
    graph.values[graph.inputs[0]].dims = (1, 4)  # x + zeros(2, 4) is x broadcast: not a pass-through
    assert [s.kind for s in drop_neutral_binaries(graph).steps] == [BINARY, ELTWISE]


def scaled_matmul_graph(alpha: float, beta: float = 0.0, bias: bool = False) -> Graph:
    """matmul(reshape(a * alpha), b), optionally with a bias."""
    graph = Graph()
    a, b = graph.add_value(DType.F32, (2, 3, 4)), graph.add_value(DType.F32, (4, 5))
    scaled, flat, out = (graph.add_value(DType.F32, dims) for dims in ((2, 3, 4), (6, 4), (6, 5)))
    bias_value = graph.add_constant(torch.ones(5), DType.F32) if bias else NO_VALUE
    graph.add_step(Step(ELTWISE, [a], [scaled], {"alg": [EltwiseAlg.LINEAR]}, {"alpha": [alpha], "beta": [beta]}))
    graph.add_step(Step(RESHAPE, [scaled], [flat]))
    graph.add_step(Step(MATMUL, [flat, b, bias_value], [out], {"transpose_b": [0]}))
    graph.inputs, graph.outputs = [a, b], [out]
    return graph


def test_fold_operand_scales_moves_the_scale_to_a_post_op() -> None:
    graph = fold_operand_scales(scaled_matmul_graph(0.25))
    assert [s.kind for s in graph.steps] == [RESHAPE, MATMUL], readable(step_summary(graph))
    assert graph.steps[0].inputs == [graph.inputs[0]]
    matmul = graph.steps[1]
    assert matmul.ints["post_ops"] == eltwise_post_op(EltwiseAlg.LINEAR)
    assert matmul.floats["post_op_params"] == [0.25, 0.0]


@pytest.mark.parametrize(("beta", "bias"), [(1.0, False), (0.0, True)], ids=["shifted_operand", "matmul_with_bias"])
def test_fold_operand_scales_leaves_what_does_not_factor_out(beta: float, bias: bool) -> None:
    graph = fold_operand_scales(scaled_matmul_graph(0.25, beta, bias))
    assert [s.kind for s in graph.steps] == [ELTWISE, RESHAPE, MATMUL], readable(step_summary(graph))


def channel_scaled_graph(factors: torch.Tensor, bias: bool = False, also_read: bool = False) -> Graph:
    """compressed_matmul(x [3, 8], S8 weights [4, 8] in one group a row) * factors."""
    graph = Graph()
    x = graph.add_value(DType.F32, (3, 8))
    weights = graph.add_constant(torch.ones(4, 8, dtype=torch.int8), DType.S8)
    scales = graph.add_constant(torch.full((4, 1), 0.5), DType.F32)
    bias_value = graph.add_constant(torch.ones(4), DType.F32) if bias else NO_VALUE
    product, out = graph.add_value(DType.F32, (3, 4)), graph.add_value(DType.F32, (3, 4))
    ints = {"group_size": [8], "quantize_rows": [0]}
    graph.add_step(Step(StepKind.COMPRESSED_MATMUL, [x, weights, scales, bias_value], [product], ints))
    graph.add_step(Step(BINARY, [product, graph.add_constant(factors, DType.F32)], [out], {"alg": [BinaryAlg.MUL]}))
    graph.inputs, graph.outputs = [x], [out, product] if also_read else [out]
    return graph


def test_fold_channel_scales_multiplies_the_weights_scales() -> None:
    graph = fold_channel_scales(channel_scaled_graph(torch.tensor([[1.0, 2.0, 4.0, 8.0]])))
    (matmul,) = graph.steps
    assert matmul.kind == StepKind.COMPRESSED_MATMUL and matmul.outputs == graph.outputs
    assert torch.equal(graph.constant_data[matmul.inputs[2]], torch.tensor([[0.5], [1.0], [2.0], [4.0]]))


@pytest.mark.parametrize(
    ("factors", "bias", "also_read"),
    [(torch.ones(3, 4), False, False), (torch.ones(4), True, False), (torch.ones(4), False, True)],
    ids=["per_element", "with_bias", "product_read_elsewhere"],
)
def test_fold_channel_scales_leaves_what_is_not_per_column(factors: torch.Tensor, bias: bool, also_read: bool) -> None:
    graph = fold_channel_scales(channel_scaled_graph(factors, bias, also_read))
    assert [s.kind for s in graph.steps] == [StepKind.COMPRESSED_MATMUL, BINARY]


def test_exported_attention_loses_its_zero_mask_scales_and_views() -> None:
    model, inputs = build(AttentionBlock, ((1, 6, 32),))
    graph = lower(model, inputs).payloads()[0]
    kinds = [s.kind for s in graph.steps]
    assert BINARY not in kinds and ELTWISE not in kinds, readable(step_summary(graph))
    (attention,) = [s for s in graph.steps if s.kind == StepKind.ATTENTION]  # the scale folded into it
    assert attention.floats["scale"][0] == pytest.approx(0.3)
    output_projection = graph.steps[-1]
    assert output_projection.ints["post_ops"] == binary_post_op(BinaryAlg.ADD), readable(step_summary(graph))
    identity_reshapes = [
        s
        for s in graph.steps
        if s.kind == RESHAPE and graph.values[s.inputs[0]].dims == graph.values[s.outputs[0]].dims
    ]
    assert not identity_reshapes, readable(step_summary(graph))


def test_attention_with_and_without_the_passes_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    test_fused_and_unfused_programs_agree("attention_block", AttentionBlock, ((1, 6, 32),), monkeypatch)
