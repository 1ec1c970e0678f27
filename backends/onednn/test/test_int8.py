# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Static int8 through PT2E: OneDnnQuantizer annotations, the int8 steps they lower to, and numbers.

Tolerances. The reference for the delegate is the converted PT2E model run eagerly (the same
quantize/dequantize arithmetic in fp32). oneDNN accumulates the int8 products exactly in s32 and
rounds once per requantization, where the reference rounds the fp32 sum of dequantized products: an
intermediate value may land one quantization step away, and that step propagates. Outputs are held
to QUANT_STEPS steps of the output's quantization scale. Against the fp32 model the error is the
quantization error itself: held to FP32_TOLERANCE of the output's largest magnitude.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from executorch.backends.onednn import OneDnnPartitioner, effective_isa, int8_products_exact
from executorch.backends.onednn.ops import context
from executorch.backends.onednn.quantizer import OneDnnQuantizer
from executorch.backends.onednn.quantizer.onednn_quantizer import ACTIVATION
from executorch.backends.onednn.serialization.schema import BinaryAlg, DType, EltwiseAlg, PostOpKind, StepKind
from support import QUANT_STEPS, Exported, describe, execute_traced, output_scale, quantize
from tester import Lowered, execute, flatten_outputs, lower
from torch import nn
from torchao.quantization.pt2e import MinMaxObserver
from torchao.quantization.pt2e.quantizer import QuantizationSpec

qd = torch.ops.quantized_decomposed
FP32_TOLERANCE = 0.05


def assert_matches_converted(
    lowered: Lowered, converted: torch.fx.GraphModule, example: tuple[torch.Tensor, ...]
) -> None:
    """The delegate's output is within QUANT_STEPS output quantization steps of the converted model's."""
    (got,) = execute(lowered.buffer, example)
    with torch.no_grad():
        (reference,) = flatten_outputs(converted(*example))
    step = output_scale(converted)
    error = (got - reference).abs().max().item()
    assert error <= QUANT_STEPS * step, f"max error {error:.4g} exceeds {QUANT_STEPS} steps of {step:.4g}"


def ops(graph: torch.fx.Graph, target: object) -> list[torch.fx.Node]:
    return [n for n in graph.nodes if n.op == "call_function" and n.target == target]


# --- models ---------------------------------------------------------------------------------------
class ConvReluConv(nn.Module):
    def __init__(self, groups: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(4, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, groups=groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2(torch.relu(self.conv1(x)))


class Conv1d(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(6, 12, 5, stride=2, padding=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


class Depthwise(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


class Mlp(nn.Module):
    def __init__(self, activation: Callable[[torch.Tensor], torch.Tensor] = torch.relu) -> None:
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 10)
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.activation(self.fc1(x)))


class SmallCnn(nn.Module):
    """conv/relu pairs, a residual add and pooling left in fp32, a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.block = nn.Conv2d(16, 16, 3, padding=1)
        self.head = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.stem(x))
        y = torch.relu(self.block(y)) + y
        return self.head(y.mean((2, 3)))


class Bottleneck(nn.Module):
    """relu(conv(relu(conv(x))) + x) and a projection shortcut: residual adds after convolutions."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(8, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1)
        self.project, self.conv3 = nn.Conv2d(8, 16, 1, stride=2), nn.Conv2d(8, 16, 3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv2(torch.relu(self.conv1(x))) + x)
        return torch.relu(self.conv3(y) + self.project(y))


class InvertedResidual(nn.Module):
    """MobileNetV2's block: 1x1 expand + ReLU6, depthwise 3x3 + ReLU6, 1x1 project, residual add."""

    def __init__(self) -> None:
        super().__init__()
        self.expand, self.depthwise = nn.Conv2d(8, 24, 1), nn.Conv2d(24, 24, 3, padding=1, groups=24)
        self.project = nn.Conv2d(24, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = nn.functional.relu6(self.depthwise(nn.functional.relu6(self.expand(x))))
        return self.project(y) + x


class AddmmLayers(nn.Module):
    """Hugging Face's Conv1D (GPT-2): addmm with a [K, N] weight, then a plain mm with a stored weight."""

    def __init__(self) -> None:
        super().__init__()
        self.w1, self.b1 = nn.Parameter(torch.randn(24, 40) * 0.2), nn.Parameter(torch.randn(40) * 0.1)
        self.w2 = nn.Parameter(torch.randn(40, 12) * 0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.addmm(self.b1, x, self.w1)) @ self.w2


class ScoresOfTwoActivations(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q, self.k = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mm(self.q(x), self.k(x).t())


@dataclass(frozen=True)
class Case:
    id: str
    model: nn.Module
    inputs: tuple[torch.Tensor, ...]
    int8_steps: int  # CONVOLUTION/MATMUL steps expected to compute in int8
    per_channel: bool = True  # OneDnnQuantizer(per_channel=...)


def cases() -> list[Case]:
    torch.manual_seed(0)
    return [
        Case("conv_relu_conv", ConvReluConv(), (torch.randn(2, 4, 10, 10),), 2),
        Case("grouped_conv", ConvReluConv(groups=2), (torch.randn(1, 4, 9, 9),), 2),
        Case("depthwise_conv", Depthwise(), (torch.randn(1, 8, 7, 7),), 1),
        Case("conv1d_relu", Conv1d(), (torch.randn(2, 6, 20),), 1),
        Case("linear_relu_linear", Mlp(), (torch.randn(4, 32),), 2),
        Case("linear_3d_input", nn.Linear(32, 16), (torch.randn(2, 5, 32),), 1),
        Case("linear_gelu_linear", Mlp(nn.functional.gelu), (torch.randn(4, 32),), 2),
        Case("linear_silu_linear", Mlp(nn.functional.silu), (torch.randn(4, 32),), 2),
        Case("linear_hardswish_linear", Mlp(nn.functional.hardswish), (torch.randn(4, 32),), 2),
        Case("small_cnn", SmallCnn(), (torch.randn(2, 3, 16, 16),), 3),
        Case("residual_adds_after_convolutions", Bottleneck(), (torch.randn(1, 8, 12, 12),), 4),
        Case("inverted_residual_relu6", InvertedResidual(), (torch.randn(1, 8, 10, 10),), 3),
        Case("addmm_and_mm_with_column_weights", AddmmLayers(), (torch.randn(6, 24),), 2),
        # More output channels (scales) than a payload attribute held before: an LM head's vocabulary.
        Case("linear_with_5000_output_channels", nn.Linear(16, 5000, bias=False), (torch.randn(2, 16),), 1),
        # A 7x7 output in NHWC: oneDNN 3.2's layout-changing reorder dropped the dequantize's zero point.
        Case("conv_7x7_64_channels", nn.Conv2d(64, 64, 3, padding=1), (torch.randn(1, 64, 7, 7),), 1),
        # One weight scale per tensor (the conformance suite's static per-tensor flow).
        Case("conv_relu_conv_weights_per_tensor", ConvReluConv(), (torch.randn(2, 4, 10, 10),), 2, False),
        Case("linear_relu_linear_weights_per_tensor", Mlp(), (torch.randn(4, 32),), 2, False),
        Case("addmm_and_mm_weights_per_tensor", AddmmLayers(), (torch.randn(6, 24),), 2, False),
    ]


CASES = cases()


# --- quantizer ------------------------------------------------------------------------------------
def test_quantizer_puts_quantize_dequantize_around_conv_and_linear() -> None:
    converted = quantize(SmallCnn(), (torch.randn(1, 3, 16, 16),))
    graph = converted.graph
    matrix_ops = ops(graph, torch.ops.aten.conv2d.default) + ops(graph, torch.ops.aten.linear.default)
    assert len(matrix_ops) == 3
    for node in matrix_ops:
        x, w = node.args[:2]
        assert x.target == qd.dequantize_per_tensor.default, f"{node.name} reads {x.target}"
        assert x.args[-1] == torch.uint8, f"{node.name}: activation dtype {x.args[-1]}"
        assert w.target == qd.dequantize_per_channel.default, f"{node.name} weights from {w.target}"
        assert w.args[3:7] == (0, -127, 127, torch.int8), f"{node.name}: weight qparams {w.args[3:7]}"
    # conv+relu is one pattern: the relu's output is quantized, the conv's is not.
    for relu in ops(graph, torch.ops.aten.relu.default):
        assert relu.args[0].target == torch.ops.aten.conv2d.default
        assert next(u.target for u in relu.users) == qd.quantize_per_tensor.default
        assert all(u.target != qd.quantize_per_tensor.default for u in relu.args[0].users)


def test_quantizer_takes_addmm_weights_per_column_and_leaves_activation_products() -> None:
    graph = quantize(AddmmLayers(), (torch.randn(6, 24),)).graph
    products = ops(graph, torch.ops.aten.addmm.default) + ops(graph, torch.ops.aten.matmul.default)
    assert len(products) == 2, graph
    for node in products:
        w = node.args[2] if node.target == torch.ops.aten.addmm.default else node.args[1]
        assert w.target == qd.dequantize_per_channel.default, f"{node.name} weights from {w.target}"
        assert w.args[3] == 1, f"{node.name}: weights quantized along axis {w.args[3]}, expected 1 (columns)"
    graph = quantize(ScoresOfTwoActivations(), (torch.randn(5, 8),)).graph
    (scores,) = ops(graph, torch.ops.aten.mm.default)
    assert all(arg.target != qd.dequantize_per_channel.default for arg in scores.args), scores.args


def test_residual_add_and_relu_become_post_ops_of_the_int8_convolution() -> None:
    example = (torch.randn(1, 8, 12, 12),)
    lowered = lower(Exported(quantize(Bottleneck(), example)), example)
    (graph,) = lowered.payloads()
    convs = [step for step in graph.steps if step.kind == StepKind.CONVOLUTION]
    conv2 = convs[1]
    assert conv2.ints["post_ops"] == [PostOpKind.BINARY, BinaryAlg.ADD, PostOpKind.ELTWISE, EltwiseAlg.RELU]
    assert "dst_scale" in conv2.floats, "the relu's quantize should be conv2's requantization"
    assert graph.values[conv2.outputs[0]].dtype == DType.U8
    # The shortcut is the block input's dequantized value: one REORDER u8 -> f32 feeding the post-op.
    shortcut = conv2.inputs[3]
    assert graph.values[shortcut].dtype == DType.F32
    binaries = [step for step in graph.steps if step.kind == StepKind.BINARY]
    assert len(binaries) <= 1, "only the add of two convolution results may stay a separate step"


@pytest.mark.parametrize(
    ("activation", "alg"),
    [(nn.functional.gelu, EltwiseAlg.GELU_ERF), (nn.functional.silu, EltwiseAlg.SWISH)],
    ids=["gelu", "silu"],
)
def test_activation_is_a_post_op_of_the_int8_linear(
    activation: Callable[[torch.Tensor], torch.Tensor], alg: EltwiseAlg
) -> None:
    example = (torch.randn(4, 32),)
    (graph,) = lower(Exported(quantize(Mlp(activation), example)), example).payloads()
    fc1 = next(step for step in graph.steps if step.kind == StepKind.MATMUL)
    assert fc1.ints["post_ops"] == [PostOpKind.ELTWISE, alg], fc1.ints
    assert graph.values[fc1.outputs[0]].dtype == DType.U8, "fc2's u8 input should come from fc1 directly"


def test_weights_too_large_to_fold_are_read_as_int8(monkeypatch: pytest.MonkeyPatch) -> None:
    """An LM head's dequantized f32 weights (154 MB for GPT-2) exceed what is folded ahead of time: the
    dequantize is still taken, since the int8 matmul reads its s8 data."""
    monkeypatch.setattr(context, "MAX_FOLDED_BYTES", 2048)  # both weights are larger (8 and 2.5 KiB)
    example = (torch.randn(4, 32),)
    converted = quantize(Mlp(), example)
    lowered = lower(Exported(converted), example)
    assert lowered.delegate_calls == 1 and not lowered.undelegated_compute, lowered.describe()
    (graph,) = lowered.payloads()
    int8 = [step for step in graph.steps if step.kind == StepKind.MATMUL and "src_scale" in step.floats]
    assert len(int8) == 2, [step.kind for step in graph.steps]
    (got,) = execute(lowered.buffer, example)
    with torch.no_grad():
        (reference,) = flatten_outputs(converted(*example))
    assert (got - reference).abs().max().item() <= QUANT_STEPS * output_scale(converted) * (1 + 1e-5)


def test_relu6_is_a_post_op_of_the_int8_convolution() -> None:
    example = (torch.randn(1, 8, 10, 10),)
    (graph,) = lower(Exported(quantize(InvertedResidual(), example)), example).payloads()
    kinds = [step.kind for step in graph.steps]
    assert StepKind.ELTWISE not in kinds, kinds
    expand, depthwise, project = (step for step in graph.steps if step.kind == StepKind.CONVOLUTION)
    for conv in (expand, depthwise):
        assert conv.ints["post_ops"] == [PostOpKind.ELTWISE, EltwiseAlg.CLIP], conv.ints
        assert graph.values[conv.outputs[0]].dtype == DType.U8
    assert project.ints["post_ops"] == [PostOpKind.BINARY, BinaryAlg.ADD], project.ints


# --- lowering -------------------------------------------------------------------------------------
def test_conv_relu_requantization_fuses_into_one_int8_convolution() -> None:
    example = (torch.randn(2, 4, 10, 10),)
    lowered = lower(Exported(quantize(ConvReluConv(), example)), example)
    assert lowered.delegate_calls == 1 and not lowered.undelegated_compute, lowered.describe()
    (graph,) = lowered.payloads()
    kinds = [step.kind for step in graph.steps]
    assert kinds == [StepKind.REORDER, StepKind.CONVOLUTION, StepKind.CONVOLUTION, StepKind.REORDER], kinds
    quantize_input, conv1, conv2, dequantize_output = graph.steps
    assert graph.values[quantize_input.outputs[0]].dtype == DType.U8 and "dst_scale" in quantize_input.floats
    # conv1: u8 in, s8 weights, relu post-op, requantized to u8 by its dst scale and zero point.
    assert graph.values[conv1.inputs[0]].dtype == DType.U8
    assert graph.values[conv1.inputs[1]].dtype == DType.S8
    assert graph.values[conv1.inputs[2]].dtype == DType.F32
    assert len(conv1.floats["weight_scales"]) == 8
    assert "post_ops" in conv1.ints and "dst_scale" in conv1.floats and "dst_zero_point" in conv1.ints
    assert graph.values[conv1.outputs[0]].dtype == DType.U8
    # conv2 reads conv1's u8 result directly and requantizes its output for the final dequantize.
    assert conv2.inputs[0] == conv1.outputs[0]
    assert graph.values[conv2.outputs[0]].dtype == DType.U8
    assert "src_scale" in dequantize_output.floats and graph.values[dequantize_output.outputs[0]].dtype == DType.F32


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_int8_matches_quantized_reference_and_fp32(case: Case) -> None:
    converted = quantize(case.model, case.inputs, OneDnnQuantizer(per_channel=case.per_channel))
    lowered = lower(Exported(converted), case.inputs)
    assert lowered.delegate_calls == 1 and not lowered.undelegated_compute, f"{case.id}: {lowered.describe()}"
    steps = [s for g in lowered.payloads() for s in g.steps]
    int8 = [s for s in steps if s.kind in (StepKind.CONVOLUTION, StepKind.MATMUL) and "src_scale" in s.floats]
    assert len(int8) == case.int8_steps, f"{case.id}: {len(int8)} int8 steps, expected {case.int8_steps}"

    (got,) = execute(lowered.buffer, case.inputs)
    with torch.no_grad():
        (reference,) = flatten_outputs(converted(*case.inputs))
        (fp32,) = flatten_outputs(case.model(*case.inputs))
    step = output_scale(converted)
    error = (got - reference).abs().max().item()
    assert error <= QUANT_STEPS * step * (1 + 1e-5), (
        f"{case.id}: max error {error:.4g} against the quantized reference exceeds {QUANT_STEPS} steps of {step:.4g}"
    )
    fp32_error = (got - fp32).abs().max().item()
    bound = FP32_TOLERANCE * fp32.abs().max().item()
    assert fp32_error <= bound, f"{case.id}: max error {fp32_error:.4g} against fp32 exceeds {bound:.4g}"


# --- what is not int8 ----------------------------------------------------------------------------
class AsymmetricWeights(OneDnnQuantizer):
    """Weights quantized to u8 with a zero point: a pattern the int8 lowering refuses."""

    def annotate(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
        from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY

        super().annotate(model)
        weight = QuantizationSpec(
            dtype=torch.uint8,
            quant_min=0,
            quant_max=255,
            qscheme=torch.per_tensor_affine,
            observer_or_fake_quant_ctr=MinMaxObserver,
        )
        for node in model.graph.nodes:
            annotation = node.meta.get(Q_ANNOTATION_KEY)
            if annotation is not None and node.target == torch.ops.aten.conv2d.default:
                annotation.input_qspec_map[node.args[1]] = weight
                annotation.input_qspec_map[node.args[0]] = ACTIVATION
        return model


def test_unsupported_int8_pattern_runs_in_fp32_inside_the_delegate() -> None:
    example = (torch.randn(2, 4, 10, 10),)
    converted = quantize(ConvReluConv(), example, AsymmetricWeights())
    dequantized = ops(converted.graph, qd.dequantize_per_tensor.default)
    weight_zero_points = [n.args[2] for n in dequantized if n.args[0].op == "get_attr"]
    assert weight_zero_points and any(weight_zero_points), weight_zero_points
    lowered = lower(Exported(converted), example)
    assert lowered.delegate_calls == 1 and not lowered.undelegated_compute, lowered.describe()
    convs = [s for g in lowered.payloads() for s in g.steps if s.kind == StepKind.CONVOLUTION]
    assert len(convs) == 2 and not any("src_scale" in s.floats for s in convs), [s.floats.keys() for s in convs]
    # The same fp32 arithmetic as the reference, between the same int8 roundings.
    assert_matches_converted(lowered, converted, example)


class ConvCumsumConv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2(torch.cumsum(torch.relu(self.conv1(x)), dim=3))


def test_op_without_rule_between_int8_convolutions_splits_the_delegate() -> None:
    example = (torch.randn(1, 3, 8, 8),)
    converted = quantize(ConvCumsumConv(), example)
    lowered = lower(Exported(converted), example)
    assert lowered.delegate_calls == 2, lowered.describe()
    assert lowered.undelegated_compute == ["aten::cumsum"], lowered.describe()
    # No int8 tensor crosses a delegate border: each side dequantizes/quantizes inside.
    for graph in lowered.payloads():
        for value_id in graph.inputs + graph.outputs:
            assert graph.values[value_id].dtype == DType.F32
    assert_matches_converted(lowered, converted, example)


def test_bf16_precision_leaves_int8_steps_alone() -> None:
    example = (torch.randn(2, 4, 10, 10),)
    converted = quantize(ConvReluConv(), example)
    lowered = lower(Exported(converted), example, OneDnnPartitioner(precision="bf16"))
    assert lowered.delegate_calls == 1 and not lowered.undelegated_compute, lowered.describe()
    (graph,) = lowered.payloads()
    int8 = [s for s in graph.steps if s.kind == StepKind.CONVOLUTION]
    assert all("src_scale" in s.floats and "compute_bf16" not in s.ints for s in int8)
    assert_matches_converted(lowered, converted, example)


class ConvPoolConv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(3, 16, 3, padding=1), nn.Conv2d(16, 16, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2(nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2))


def test_int8_pooling_between_convolutions_runs_an_optimized_kernel() -> None:
    """Where int8 steps compute in f32 (no VNNI) their int8 results are written channels-last, as
    oneDNN's int8 kernels write theirs: on plain int8 data its pooling is a reference loop
    ("simple_nchw": 7.2 ms against 0.2 for ResNet-18's max pool on AVX2)."""
    example = (torch.randn(1, 3, 32, 32),)
    converted = quantize(ConvPoolConv(), example)
    lowered = lower(Exported(converted), example)
    _, trace = execute_traced(lowered.buffer, example)
    poolings = [record for record in trace if record.primitive == "pooling"]
    assert poolings and not any(r.implementation.startswith(("ref", "simple")) for r in poolings), describe(trace)
    assert_matches_converted(lowered, converted, example)


class ReluLinear(nn.Module):
    """Weights at +-127 after quantization in pairs of input channels of one sign, inputs quantized to
    255 and near it after the ReLU (zero point 0): each pair of u8 x s8 products adds to about
    +-2 * 255 * 127, twice what 16 bits hold."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(64, 24)
        with torch.no_grad():
            signs = torch.tensor([1.0, 1.0, -1.0, -1.0]).repeat(16)
            self.linear.weight.copy_(signs * torch.linspace(0.5, 1.0, 24)[:, None])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(torch.relu(x))


@pytest.mark.skipif(
    int8_products_exact(),
    reason=f"VNNI/AMX int8 kernels run int8 products on this CPU ({effective_isa()}, not capped at AVX2)",
)
def test_int8_linear_products_beyond_16_bits_without_vnni_add_up_exactly_on_the_host() -> None:
    """Without VNNI an int8 linear layer runs on the host (runtime/ExactInt8Matmul.h): operands widened
    to 16 bits, pairs of products added in 32. The AVX2-capped leg of run_tests.sh runs this on CPUs
    with VNNI."""
    example = (torch.full((3, 64), 4.0) + torch.rand(3, 64) * 0.1,)
    converted = quantize(ReluLinear(), example)
    lowered = lower(Exported(converted), example)
    outputs, trace = execute_traced(lowered.buffer, example)
    assert not [record for record in trace if record.primitive == "matmul"], describe(trace)
    with torch.no_grad():
        (reference,) = flatten_outputs(converted(*example))
    step = output_scale(converted)
    error = (outputs[0] - reference).abs().max().item()
    assert error <= QUANT_STEPS * step, f"max error {error:.4g} exceeds {QUANT_STEPS} steps of {step:.4g}"


@pytest.mark.skipif(
    int8_products_exact(),
    reason=f"VNNI/AMX int8 kernels run int8 convolutions on this CPU ({effective_isa()}, not capped at AVX2)",
)
@pytest.mark.parametrize(
    "model, channels",
    [(InvertedResidual, 8), (Bottleneck, 8), (ConvPoolConv, 3)],
    ids=["inverted-residual", "bottleneck", "pool-between"],
)
def test_int8_values_between_emulated_convolutions_stay_in_f32(model: Callable[[], nn.Module], channels: int) -> None:
    """Without VNNI int8 convolutions compute in f32, and an int8 value between them is held in f32 as
    the numbers it dequantizes to (runtime/GraphBuilder.cpp, int8_values_held_dequantized()): each
    producer rounds its result to the int8 grid, in its post-ops or one host pass (a quantize after a
    pooling or a residual add), so no reorder converts to or from int8 while the program runs, where
    each such value cost two (40% of MobileNetV2's int8 call on a Zen 3). The numbers stay those of
    the converted model."""
    torch.manual_seed(0)
    example = (torch.randn(1, channels, 16, 16),)
    converted = quantize(model(), example)
    lowered = lower(Exported(converted), example)
    _, trace = execute_traced(lowered.buffer, example)
    assert [record for record in trace if record.primitive == "convolution"], describe(trace)
    int8_reorders = [
        record
        for record in trace
        if record.primitive == "reorder" and any(kind in ("u8", "s8") for kind in record.data_types)
    ]
    assert not int8_reorders, describe(trace)
    assert_matches_converted(lowered, converted, example)


class Int8Stem(nn.Module):
    def __init__(self, kernel: int) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, kernel, 2, padding=kernel // 2)
        self.next = nn.Conv2d(16, 16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.next(torch.relu(self.stem(x)))


@pytest.mark.parametrize("kernel", [3, 7])
def test_int8_image_stem_takes_the_direct_vnni_kernel_over_amx(kernel: int) -> None:
    """oneDNN 3.13.1 gives an int8 3x3 convolution of an image's 3 channels its AMX brgemm kernel,
    1.3-2.7x slower there than its AVX512-VNNI direct one (runtime/ConvolutionSteps.cpp,
    prefers_direct_int8_kernel); a 7x7 stem has no direct kernel and keeps AMX."""
    if "amx" not in effective_isa():
        pytest.skip(f"the choice is made against AMX kernels only; oneDNN runs {effective_isa()} here")
    example = (torch.randn(1, 3, 64, 64),)
    converted = quantize(Int8Stem(kernel), example)
    lowered = lower(Exported(converted), example)
    _, trace = execute_traced(lowered.buffer, example)
    (stem,) = [r for r in trace if r.primitive == "convolution" and r.problem.startswith("mb1_ic3oc16")]
    if kernel == 3:
        assert stem.implementation.startswith("jit_int8"), describe(trace)
    else:
        assert "amx" in stem.implementation, describe(trace)
    assert_matches_converted(lowered, converted, example)


class ScaleBytes(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(torch.float32) * 0.5


def test_uint8_model_input_is_not_a_delegate_input() -> None:
    example = (torch.randint(0, 255, (2, 8), dtype=torch.uint8),)
    lowered = lower(ScaleBytes(), example)
    for graph in lowered.payloads():
        for value_id in graph.inputs:
            assert graph.values[value_id].dtype in (DType.F32, DType.BF16), lowered.describe()
    (got,) = execute(lowered.buffer, example)
    assert torch.equal(got, example[0].float() * 0.5)
