"""fold_batch_norm and fuse_post_ops: the step lists they produce, and that they do not change results."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from executorch.backends.onednn import onednn_preprocess
from executorch.backends.onednn._passes import drop_unused, fold_batch_norm, run_passes
from executorch.backends.onednn.serialization.payload import Graph, Step
from executorch.backends.onednn.serialization.schema import NO_VALUE, BinaryAlg, DType, EltwiseAlg, PostOpKind, StepKind
from tester import execute, flatten_outputs, lower, mismatch
from torch import nn
from torch.nn import functional as F

from examples.onednn.models import randomize_batch_norms

CONV, BN, MATMUL = StepKind.CONVOLUTION, StepKind.BATCH_NORM, StepKind.MATMUL
ELTWISE, BINARY = StepKind.ELTWISE, StepKind.BINARY


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
    ("binary_takes_an_eltwise_post_op", AddRelu, ((2, 8), (2, 8)), [(BINARY, eltwise_post_op(EltwiseAlg.RELU))]),
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
        patch.setattr(onednn_preprocess, "run_passes", lambda graph: run_passes(graph, [drop_unused]))
        unfused = lower(model, inputs)
    fused_steps, unfused_steps = (len(lowered.payloads()[0].steps) for lowered in (fused, unfused))
    assert fused_steps < unfused_steps, f"{name}: the passes did not change the step list ({fused_steps} steps)"
    fused_out, unfused_out = execute(fused.buffer, inputs), execute(unfused.buffer, inputs)
    for label, outputs in (("unfused", unfused_out), ("fused", fused_out)):
        error = mismatch(f"{name} ({label})", outputs, expected, 1e-4)
        assert error is None, error
    error = mismatch(f"{name} fused vs unfused", fused_out, unfused_out, 1e-4)
    assert error is None, error
