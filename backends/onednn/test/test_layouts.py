# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Fusion and layout decisions, checked for correctness: fused vs unfused programs vs eager PyTorch.

Each case is lowered once. Its payload must show the expected fusion decisions (steps with their
post-ops); the program runs with oneDNN's verbose trace on, so the test also sees the layouts the
runtime chose (blocked aBcd16b, NHWC acdb, plain abcd) and the post-ops it actually executed. The same
partition is then serialized again with the passes switched off (and with batch norm folding only), and
every variant must match eager PyTorch and the fused program within 1e-4 of the output's magnitude.
Residual operands come from everywhere a layout can differ from the convolution's output: graph
inputs, constants, other convolutions, permutes, slices, pooling, resampling, concatenation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import TypeVar

import pytest
import torch
from executorch.backends.onednn import effective_isa
from executorch.backends.onednn._passes import GraphPass, drop_unused, fold_batch_norm, run_passes
from executorch.backends.onednn.cli.zoo import randomize_batch_norms
from executorch.backends.onednn.serialization.payload import Graph, Step
from executorch.backends.onednn.serialization.schema import BinaryAlg, DType, EltwiseAlg, PostOpKind, StepKind
from support import (
    Fn,
    Record,
    Variant,
    avx2_is_the_widest,
    describe,
    execute_traced,
    host_row_kernels_run,
    preprocessed_with,
)
from tester import DEFAULT_TOLERANCE, DELEGATE_CALL, Lowered, Outcome, flatten_outputs, lower, mismatch
from torch import nn
from torch.nn import functional as F


def is_plain(tag: str) -> bool:
    return tag == "abcdef"[: len(tag)]


# --- the same partition serialized with fewer passes -------------------------------------------------
UNFUSED: list[GraphPass] = [drop_unused]
FOLD_ONLY: list[GraphPass] = [fold_batch_norm, drop_unused]


@dataclass
class DelegateIO:
    """How the program's inputs and outputs map onto its one delegate's."""

    inputs: list[int]  # delegate input i is program input inputs[i]
    outputs: list[int]  # program output j is delegate output outputs[j]


def delegate_io(lowered: Lowered) -> DelegateIO:
    program = lowered.edge.exported_program()
    user_inputs = list(program.graph_signature.user_inputs)
    (call,) = [n for n in program.graph.nodes if n.op == "call_function" and n.target is DELEGATE_CALL]
    inputs = [user_inputs.index(arg.name) for arg in call.args[1:]]
    outputs = []
    for out in program.graph.output_node().args[0]:
        assert out.args[0] is call, f"program output {out} is not one of the delegate's outputs"
        outputs.append(out.args[1])
    return DelegateIO(inputs, outputs)


def with_passes(lowered: Lowered, passes: list[GraphPass]) -> Variant:
    """The program of `lowered` with its one delegate preprocessed by `passes` only."""
    return preprocessed_with(lowered, "run_passes", lambda graph, *_: run_passes(graph, passes))


# --- the payload's fusion decisions as text ----------------------------------------------------------
ALG_NAMES: dict[StepKind, type[IntEnum]] = {StepKind.BINARY: BinaryAlg, StepKind.ELTWISE: EltwiseAlg}


def post_op_names(step: Step) -> list[str]:
    enums = {PostOpKind.ELTWISE: EltwiseAlg, PostOpKind.BINARY: BinaryAlg}
    return [enums[op.kind](op.alg).name.lower() for op in step.post_ops()]


def step_list(graph: Graph) -> list[str]:
    """'convolution[add,relu]', 'binary:sub' per step: the kind (and alg), then its post-ops in order."""
    steps = []
    for step in graph.steps:
        name = step.kind.name.lower()
        if step.kind in ALG_NAMES:
            name += ":" + ALG_NAMES[step.kind](step.ints["alg"][0]).name.lower()
        post_ops = post_op_names(step)
        steps.append(name + (f"[{','.join(post_ops)}]" if post_ops else ""))
    return steps


def post_op_count(graph: Graph) -> int:
    return sum(len(step.ints.get("post_ops", [])) // 2 for step in graph.steps)


def host_post_op_count(graph: Graph) -> int:
    """Post-ops not fused into oneDNN's kernel: those of an f32 1x1 convolution of one image's single
    pixel, which runs as one row times a matrix where AVX2 is available (test_squeeze_excitation.py),
    and, where AVX2 is the widest, those of a matmul with a GELU post-op, which run after the product
    (test_linear_on_avx2.py)."""
    if not host_row_kernels_run():
        return 0
    gelus = (EltwiseAlg.GELU_ERF, EltwiseAlg.GELU_TANH)
    count = 0
    for step in graph.steps:
        src, dst = (graph.values[step.inputs[0]], graph.values[step.outputs[0]])
        one_pixel = src.dims[0] == 1 and all(d == 1 for d in src.dims[2:]) and all(d == 1 for d in dst.dims[2:])
        if step.kind == StepKind.CONVOLUTION and one_pixel and src.dtype == DType.F32:
            count += len(step.post_ops())
        has_gelu = any(op.kind == PostOpKind.ELTWISE and op.alg in gelus for op in step.post_ops())
        if step.kind == StepKind.MATMUL and has_gelu and avx2_is_the_widest():
            count += len(step.post_ops())
    return count


# --- cases -------------------------------------------------------------------------------------------
class Residual(Enum):
    """Where the residual operand of the fused binary was produced, as far as its layout goes."""

    ANY = "any"  # a primitive's choice (another conv, pooling, ...): layout depends on the CPU
    # Written in plain layout (graph input, constant, permute, slice, mixed cat, reshape): a convolution
    # host reads it in its own non-plain layout, so the runtime must convert it.
    PLAIN = "plain"


class Constant(nn.Module):
    def __init__(self, value: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("value", value)

    def forward(self) -> torch.Tensor:
        return self.value


def conv(cin: int, cout: int, k: int = 3, stride: int = 1, groups: int = 1, bias: float | None = None) -> nn.Conv2d:
    layer = nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, groups=groups)
    if bias is not None:
        with torch.no_grad():
            layer.bias.fill_(bias)
    return layer


def bn(channels: int) -> nn.BatchNorm2d:
    return randomize_batch_norms(nn.BatchNorm2d(channels))


@dataclass(frozen=True)
class LayoutCase:
    id: str
    fn: Callable[..., object]
    parts: Callable[[], dict[str, nn.Module]]
    shapes: tuple[tuple[int, ...], ...]
    # The payload after the passes; pins down every fusion decision of the case.
    steps: tuple[str, ...]
    residual: Residual = Residual.ANY
    positive: bool = False  # inputs in [0.5, 1.5] (for divisions)

    def build(self) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        torch.manual_seed(0)
        model = Fn(self.fn, **self.parts()).eval()  # type: ignore[arg-type]
        generator = torch.Generator().manual_seed(1)
        if self.positive:
            return model, tuple(torch.rand(s, generator=generator) + 0.5 for s in self.shapes)
        return model, tuple(torch.randn(s, generator=generator) for s in self.shapes)


def case(
    id: str,
    fn: Callable[..., object],
    shapes: tuple[tuple[int, ...], ...],
    steps: tuple[str, ...],
    residual: Residual = Residual.ANY,
    positive: bool = False,
    **parts: Callable[[], nn.Module],
) -> LayoutCase:
    return LayoutCase(id, fn, lambda: {name: make() for name, make in parts.items()}, shapes, steps, residual, positive)


V = TypeVar("V")
PLAIN = Residual.PLAIN
CONV, MATMUL = "convolution", "matmul"
X8, X16 = (1, 8, 16, 16), (1, 16, 16, 16)


def then(value: V, fn: Callable[[V], object]) -> object:
    """fn(value): computes `value` first, so its steps come before the ones fn adds."""
    return fn(value)


# 1. conv -> binary, the residual coming from everywhere.
CONV_RESIDUALS = [
    case(
        "residual_is_a_graph_input",
        lambda m, x, r: (m.parts.c1(x) + x, m.parts.c2(x) + r),
        (X16, X16),
        ("convolution[add]", "convolution[add]"),
        PLAIN,
        c1=lambda: conv(16, 16),
        c2=lambda: conv(16, 16),
    ),
    case(
        "residual_is_the_previous_convs_output",
        lambda m, x: then(m.parts.c1(x), lambda y: m.parts.c2(y) + y),
        ((1, 3, 16, 16),),
        (CONV, "convolution[add]"),
        c1=lambda: conv(3, 16),
        c2=lambda: conv(16, 16),
    ),
    case(
        "residual_is_a_sibling_convs_output",
        lambda m, x: then(m.parts.c1(x), lambda a: m.parts.c2(x) + a),
        (X8,),
        (CONV, "convolution[add]"),
        c1=lambda: conv(8, 16, 1),
        c2=lambda: conv(8, 16),
    ),
    case(
        "residual_is_a_permuted_conv_output",
        lambda m, x: then(m.parts.c1(x), lambda y: then(y.transpose(2, 3), lambda p: m.parts.c2(y) + p)),
        (X8,),
        (CONV, "reorder", "convolution[add]"),
        PLAIN,
        c1=lambda: conv(8, 16),
        c2=lambda: conv(16, 16),
    ),
    # The permute is traced after the second conv: an operand produced after the host is not fused.
    case(
        "residual_produced_after_the_conv_stays_a_binary_step",
        lambda m, x: then(m.parts.c1(x), lambda y: m.parts.c2(y) + y.transpose(2, 3)),
        (X8,),
        (CONV, CONV, "reorder", "binary:add"),
        c1=lambda: conv(8, 16),
        c2=lambda: conv(16, 16),
    ),
    case(
        "residual_is_pooled",
        lambda m, x: then(
            m.parts.c1(x),
            lambda y: then(
                (F.max_pool2d(y, 3, 2, 1), F.avg_pool2d(x, 2)),
                lambda p: (m.parts.c2(y) + p[0], m.parts.c3(x) + p[1]),
            ),
        ),
        (X8,),
        (CONV, "pooling", "pooling", "convolution[add]", "convolution[add]"),
        c1=lambda: conv(8, 16),
        c2=lambda: conv(16, 16, stride=2),
        c3=lambda: conv(8, 8, stride=2),
    ),
    case(
        "residual_is_upsampled",
        lambda m, x, s: then(
            (F.interpolate(m.parts.c1(x), scale_factor=2), F.interpolate(s, scale_factor=2, mode="bilinear")),
            lambda u: (m.parts.c2(x) + u[0], m.parts.c3(x) + u[1]),
        ),
        (X8, (1, 16, 8, 8)),
        (CONV, "resampling", "resampling", "convolution[add]", "convolution[add]"),
        c1=lambda: conv(8, 16, stride=2),
        c2=lambda: conv(8, 16),
        c3=lambda: conv(8, 16),
    ),
    # Blocked inputs concatenate in their layouts; mixed with a plain one, in plain layout.
    case(
        "residual_is_concatenated",
        lambda m, x: then(
            (torch.cat([m.parts.c1(x), m.parts.c2(x)], 1), torch.cat([m.parts.c3(x), x], 1)),
            lambda k: (m.parts.c4(x) + k[0], m.parts.c5(x) + k[1]),
        ),
        (X8,),
        (CONV, CONV, "concat", CONV, "concat", "convolution[add]", "convolution[add]"),
        PLAIN,
        c1=lambda: conv(8, 8),
        c2=lambda: conv(8, 8, 1),
        c3=lambda: conv(8, 8),
        c4=lambda: conv(8, 16),
        c5=lambda: conv(8, 16),
    ),
    case(
        "residual_is_a_channel_slice_of_a_conv_output",
        lambda m, x: then(m.parts.c1(x)[:, 8:24], lambda s: m.parts.c2(x) + s),
        (X8,),
        (CONV, "reorder", "convolution[add]"),
        PLAIN,
        c1=lambda: conv(8, 32),
        c2=lambda: conv(8, 16),
    ),
    # Full size, broadcast over the batch, over the channels (a spatial map), over batch and space.
    case(
        "residuals_are_constants_full_size_or_broadcast",
        lambda m, x: (
            m.parts.c1(x) + m.parts.full(),
            m.parts.c2(x) + m.parts.per_image(),
            m.parts.c3(x) + m.parts.spatial(),
            m.parts.c4(x) * m.parts.per_channel(),
        ),
        ((2, 8, 12, 12),),
        ("convolution[add]", "convolution[add]", "convolution[add]", "convolution[mul]"),
        PLAIN,
        c1=lambda: conv(8, 16),
        c2=lambda: conv(8, 16),
        c3=lambda: conv(8, 16),
        c4=lambda: conv(8, 16),
        full=lambda: Constant(torch.randn(2, 16, 12, 12)),
        per_image=lambda: Constant(torch.randn(1, 16, 12, 12)),
        spatial=lambda: Constant(torch.randn(12, 12)),
        per_channel=lambda: Constant(torch.randn(16, 1, 1)),
    ),
    case(
        "expanded_per_channel_operand",
        lambda m, x, s: m.parts.c(x) + s.expand(1, 16, 16, 16),
        (X8, (1, 16, 1, 1)),
        ("convolution[add]",),
        c=lambda: conv(8, 16),
    ),
    # A squeeze-excite scale computed from the input fuses; one computed from the conv's own output
    # cannot be a post-op of that conv.
    case(
        "squeeze_excite_scales",
        lambda m, x: (
            then(torch.sigmoid(m.parts.se1(x.mean((2, 3), keepdim=True))), lambda s: m.parts.c1(x) * s),
            then(m.parts.c2(x), lambda y: y * torch.sigmoid(m.parts.se2(y.mean((2, 3), keepdim=True)))),
        ),
        (X16,),
        (
            *("pooling", "convolution[logistic]", "convolution[mul]"),
            *(CONV, "pooling", "convolution[logistic]", "binary:mul"),
        ),
        c1=lambda: conv(16, 16),
        se1=lambda: conv(16, 16, 1),
        c2=lambda: conv(16, 16),
        se2=lambda: conv(16, 16, 1),
    ),
    case(
        "relu_add_relu_chain_becomes_one_conv",
        lambda m, x: torch.relu(torch.relu(m.parts.c(x)) + x),
        (X16,),
        ("convolution[relu,add,relu]",),
        PLAIN,
        c=lambda: conv(16, 16),
    ),
    case(
        "two_binary_post_ops_with_activations_between",
        lambda m, x, a, b: torch.tanh(F.hardtanh(m.parts.c(x)) + a) * b,
        (X8, X16, X16),
        ("convolution[clip,add,tanh,mul]",),
        PLAIN,
        c=lambda: conv(8, 16),
    ),
    # leaky_relu and clamp carry alpha/beta into their post-ops; `* r + 0.5` ends in a linear post-op.
    case(
        "parameterized_activations_around_residuals",
        lambda m, x, r: (
            F.leaky_relu(m.parts.c1(x), 0.2) + r,
            F.elu(m.parts.c2(x) + r, alpha=0.7),
            torch.clamp(m.parts.c3(x), -0.3, 0.6) * r,
            F.hardswish(m.parts.c4(x)) - r,
            F.gelu(m.parts.c5(x), approximate="tanh") + r,
            torch.sigmoid(m.parts.c6(x)) * r + 0.5,
        ),
        ((1, 8, 12, 12), (1, 20, 12, 12)),
        (
            "convolution[relu,add]",
            "convolution[add,elu]",
            "convolution[clip,mul]",
            "convolution[hardswish,sub]",
            "convolution[gelu_tanh,add]",
            "convolution[logistic,mul,linear]",
        ),
        PLAIN,
        **{f"c{i}": (lambda: conv(8, 20)) for i in range(1, 7)},
    ),
    # (c2(a) + a) + c3(a): the second add finds its first operand's host already done and fuses into c3.
    case(
        "value_is_residual_of_one_conv_and_input_of_another",
        lambda m, x: then(torch.relu(m.parts.c1(x)), lambda a: (m.parts.c2(a) + a) + m.parts.c3(a)),
        (X8,),
        ("convolution[relu]", "convolution[add]", "convolution[add]"),
        c1=lambda: conv(8, 16),
        c2=lambda: conv(16, 16),
        c3=lambda: conv(16, 16, 1),
    ),
    # The converted input stays live across three other convolutions.
    case(
        "input_is_the_residual_of_every_block",
        lambda m, x: then(
            m.parts.c1(x) + x,
            lambda a: then(m.parts.c3(torch.relu(m.parts.c2(a))) + x, lambda b: m.parts.c4(b) + x),
        ),
        ((1, 20, 10, 10),),
        ("convolution[add]", "convolution[relu]", "convolution[add]", "convolution[add]"),
        PLAIN,
        **{f"c{i}": (lambda: conv(20, 20)) for i in range(1, 5)},
    ),
    case(
        "strided_block_with_a_1x1_downsample_residual",
        lambda m, x: then(m.parts.down(x), lambda d: torch.relu(m.parts.c2(torch.relu(m.parts.c1(x))) + d)),
        (X8,),
        (CONV, "convolution[relu]", "convolution[add,relu]"),
        c1=lambda: conv(8, 16, stride=2),
        c2=lambda: conv(16, 16),
        down=lambda: conv(8, 16, 1, stride=2),
    ),
    case(
        "unet_skip_connection",
        lambda m, x: then(
            m.parts.enc(x),
            lambda s: then(
                F.interpolate(m.parts.d2(torch.relu(m.parts.d1(s))), scale_factor=2),
                lambda u: m.parts.out(torch.cat([u, s], 1)) + s,
            ),
        ),
        ((1, 3, 16, 16),),
        (CONV, "convolution[relu]", CONV, "resampling", "concat", "convolution[add]"),
        enc=lambda: conv(3, 20),
        d1=lambda: conv(20, 24, stride=2),
        d2=lambda: conv(24, 20),
        out=lambda: conv(40, 20),
    ),
    # Commutative ops fuse with the conv output on either side; sub only as conv(x) - r. maximum runs
    # on the host after the convolution (oneDNN's max drops a NaN).
    case(
        "binary_algorithms_with_the_conv_output_on_either_side",
        lambda m, x, r: (
            r + m.parts.c1(x),
            m.parts.c2(x) - r,
            r - m.parts.c3(x),
            m.parts.c4(x) * r,
            r * m.parts.c5(x),
            torch.maximum(m.parts.c6(x), r),
            m.parts.c7(x) / r,
        ),
        (X8, X16),
        (
            "convolution[add]",
            "convolution[sub]",
            CONV,
            "binary:sub",
            "convolution[mul]",
            "convolution[mul]",
            CONV,
            "host_elementwise",
            "convolution[div]",
        ),
        PLAIN,
        positive=True,
        **{f"c{i}": (lambda: conv(8, 16)) for i in range(1, 8)},
    ),
    case(
        "conv_output_added_to_itself_stays_a_binary_step",
        lambda m, x: then(m.parts.c(x), lambda y: y + y),
        (X8,),
        (CONV, "binary:add"),
        c=lambda: conv(8, 16),
    ),
    case(
        "transposed_conv1d_and_conv3d_residuals",
        lambda m, x, r, w, v: (m.parts.ct(x) + r, torch.relu(m.parts.c1d(w) + w), m.parts.c3d(v) + v),
        ((1, 16, 8, 8), (1, 8, 16, 16), (1, 16, 32), (1, 16, 4, 8, 8)),
        ("deconvolution[add]", "convolution[add,relu]", "convolution[add]"),
        PLAIN,
        ct=lambda: nn.ConvTranspose2d(16, 8, 2, stride=2),
        c1d=lambda: nn.Conv1d(16, 16, 3, padding=1),
        c3d=lambda: nn.Conv3d(16, 16, 3, padding=1),
    ),
]

# 2. linear / matmul with bias, activation and a residual.
T = (2, 6, 32)
MATMUL_RESIDUALS = [
    case(
        "linear_gelu_plus_graph_input",
        lambda m, x: F.gelu(m.parts.fc(x)) + x,
        (T,),
        ("matmul[gelu_erf,add]",),
        fc=lambda: nn.Linear(32, 32),
    ),
    case(
        "linear_plus_reshaped_and_permuted_inputs",
        lambda m, x, r, q: then(
            (r.reshape(2, 6, 32), q.permute(0, 2, 1)),
            lambda t: (torch.relu(m.parts.fc1(x)) + t[0], m.parts.fc2(x) + t[1]),
        ),
        (T, (2, 192), (2, 32, 6)),
        ("reshape", "reorder", "matmul[relu,add]", "matmul[add]"),
        fc1=lambda: nn.Linear(32, 32),
        fc2=lambda: nn.Linear(32, 32),
    ),
    case(
        "linear_plus_conv_features_as_tokens",
        lambda m, x, t: then(m.parts.c(x).flatten(2).transpose(1, 2), lambda r: F.silu(m.parts.fc(t)) + r),
        ((1, 8, 4, 6), (1, 24, 16)),
        (CONV, "reshape", "reorder", "matmul[swish,add]"),
        c=lambda: conv(8, 16),
        fc=lambda: nn.Linear(16, 16),
    ),
    case(
        "linear_plus_another_linear",
        lambda m, x: then(m.parts.fc1(x), lambda a: torch.tanh(m.parts.fc2(x)) + a),
        (T,),
        (MATMUL, "matmul[tanh,add]"),
        fc1=lambda: nn.Linear(32, 24),
        fc2=lambda: nn.Linear(32, 24),
    ),
    case(
        "matmul_with_per_row_and_batched_residuals",
        lambda m, x, r, a, b, s: (m.parts.fc(x) * r, torch.bmm(a, b) + s),
        ((6, 32), (6, 1), (3, 5, 16), (3, 16, 7), (3, 5, 7)),
        ("matmul[mul]", "matmul[add]"),
        fc=lambda: nn.Linear(32, 24),
    ),
    case(
        "transformer_mlp_block",
        lambda m, x: x + m.parts.fc2(F.gelu(m.parts.fc1(m.parts.ln(x)))),
        (T,),
        ("layer_norm", "matmul[gelu_erf]", "matmul[add]"),
        ln=lambda: nn.LayerNorm(32),
        fc1=lambda: nn.Linear(32, 64),
        fc2=lambda: nn.Linear(64, 32),
    ),
]

# 3. batch norm (non-trivial statistics) folded into a conv that also takes a residual.
BATCH_NORM = [
    case(
        "folded_bn_conv_plus_blocked_residual",
        lambda m, x: then(torch.relu(m.parts.bn1(m.parts.c1(x))), lambda y: torch.relu(m.parts.bn2(m.parts.c2(y)) + y)),
        ((1, 3, 16, 16),),
        ("convolution[relu]", "convolution[add,relu]"),
        c1=lambda: conv(3, 16),
        bn1=lambda: bn(16),
        c2=lambda: conv(16, 16),
        bn2=lambda: bn(16),
    ),
    case(
        "folded_bn_conv_plus_bn_downsample_residual",
        lambda m, x: then(m.parts.bnd(m.parts.down(x)), lambda d: torch.relu(m.parts.bn1(m.parts.c1(x)) + d)),
        (X8,),
        (CONV, "convolution[add,relu]"),
        c1=lambda: conv(8, 20, stride=2),
        bn1=lambda: bn(20),
        down=lambda: conv(8, 20, 1, stride=2),
        bnd=lambda: bn(20),
    ),
    # bn(conv + residual): the add fuses into the conv, the batch norm runs on its output's layout.
    case(
        "bn_after_the_residual_add_is_not_folded",
        lambda m, x: m.parts.bn(m.parts.c(x) + x),
        (X16,),
        ("convolution[add]", "batch_norm"),
        PLAIN,
        c=lambda: conv(16, 16),
        bn=lambda: bn(16),
    ),
    case(
        "mobilenet_v2_inverted_residual",
        lambda m, x: x + m.parts.bn3(m.parts.c3(F.relu6(m.parts.bn2(m.parts.dw(F.relu6(m.parts.bn1(m.parts.c1(x)))))))),
        ((1, 24, 14, 14),),
        ("convolution[clip]", "convolution[clip]", "convolution[add]"),
        PLAIN,
        c1=lambda: conv(24, 48, 1),
        bn1=lambda: bn(48),
        dw=lambda: conv(48, 48, groups=48),
        bn2=lambda: bn(48),
        c3=lambda: conv(48, 24, 1),
        bn3=lambda: bn(24),
    ),
]

# 4. graph outputs that are also read by fused steps, outputs in different layouts.
OUTPUTS = [
    case(
        "outputs_that_are_also_residuals",
        lambda m, x: then(
            (m.parts.c1(x), torch.relu(m.parts.c3(x))),
            lambda y: (y[0], m.parts.c2(y[0]) + y[0], y[1], torch.relu(m.parts.c4(y[1]) + y[1])),
        ),
        (X8,),
        (CONV, "convolution[relu]", "convolution[add]", "convolution[add,relu]"),
        c1=lambda: conv(8, 16),
        c2=lambda: conv(16, 16),
        c3=lambda: conv(8, 16),
        c4=lambda: conv(16, 16),
    ),
    # The conv result is returned, so its relu stays a separate step.
    case(
        "output_feeding_an_activation_and_a_residual",
        lambda m, x: then(m.parts.c1(x), lambda y: (y, m.parts.c2(torch.relu(y)) + y)),
        (X8,),
        (CONV, "eltwise:relu", "convolution[add]"),
        c1=lambda: conv(8, 16),
        c2=lambda: conv(16, 16),
    ),
    case(
        "outputs_in_blocked_plain_and_permuted_layouts",
        lambda m, x: then(m.parts.c1(x), lambda y: (m.parts.c2(y) + y, y.permute(0, 2, 3, 1), torch.softmax(y, 1))),
        (X8,),
        (CONV, "convolution[add]", "reorder", "softmax"),
        c1=lambda: conv(8, 16),
        c2=lambda: conv(16, 16),
    ),
    case(
        "output_and_its_flattened_view",
        lambda m, x: then(m.parts.c(x) + x, lambda z: (z.flatten(1), z)),
        (X16,),
        ("convolution[add]", "reshape"),
        PLAIN,
        c=lambda: conv(16, 16),
    ),
]


# 5. channel counts that are not multiples of 16: blocked layouts pad the channel dim. Convs reading
# 3 channels pick a blocked layout (aBcd16b/aBcd8b) for their padded output.
def padded_channels_case(c: int) -> LayoutCase:
    return case(
        f"channels_{c}",
        lambda m, x, x3, s: then(
            m.parts.c1(x3),
            lambda y: (
                torch.relu(m.parts.c0(x) + x),  # residual: the plain graph input
                m.parts.c2(y) + y,  # residual: a padded blocked conv output
                then(torch.cat([y, m.parts.c3(x3)], 1), lambda k: m.parts.c4(x3) + k),  # cat of padded blocks
                m.parts.c5(x) * s,  # per-channel scale
                y.amax(1, keepdim=True),  # channel reductions must not see the padding (y < 0)
                torch.sigmoid(y).sum(1, keepdim=True),
            ),
        ),
        ((1, c, 12, 12), (1, 3, 12, 12), (1, c, 1, 1)),
        (
            CONV,
            "convolution[add,relu]",
            "convolution[add]",
            CONV,
            "concat",
            "convolution[add]",
            "convolution[mul]",
            "reduction",
            "eltwise:logistic",
            "reduction",
        ),
        PLAIN,
        c0=lambda: conv(c, c),
        c1=lambda: conv(3, c, bias=-4.0),
        c2=lambda: conv(c, c),
        c3=lambda: conv(3, c),
        c4=lambda: conv(3, 2 * c),
        c5=lambda: conv(c, c),
    )


PADDED_CHANNELS = [padded_channels_case(c) for c in (3, 6, 20, 24)]

CASES = CONV_RESIDUALS + MATMUL_RESIDUALS + BATCH_NORM + OUTPUTS + PADDED_CHANNELS


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fused_program_matches_eager_and_unfused_program(case: LayoutCase) -> None:
    model, inputs = case.build()
    with torch.no_grad():
        expected = [t.detach().clone() for t in flatten_outputs(model(*inputs))]
    lowered = lower(model, inputs)
    outputs, trace = execute_traced(lowered.buffer, inputs)
    fused = Outcome(case.id, lowered, outputs, expected, mismatch(case.id, outputs, expected, DEFAULT_TOLERANCE))
    fused.assert_delegated(exactly_one=True, allow_layout=False)
    assert fused.mismatch is None, f"{fused.mismatch}\n{describe(trace)}"

    (graph,) = lowered.payloads()
    io = delegate_io(lowered)
    seen = {lowered.lowered_modules[0].processed_bytes}
    for label, passes in (("unfused", UNFUSED), ("batch norm folded only", FOLD_ONLY)):
        variant = with_passes(lowered, passes)
        if variant.processed_bytes in seen:
            continue
        seen.add(variant.processed_bytes)
        delegate_outputs, variant_trace = execute_traced(variant.buffer, tuple(inputs[i] for i in io.inputs))
        variant_outputs = [delegate_outputs[k] for k in io.outputs]
        for against, reference in (("eager", expected), ("the fused program", outputs)):
            error = mismatch(f"{case.id} ({label}, against {against})", variant_outputs, reference, DEFAULT_TOLERANCE)
            assert error is None, f"{error}\n  {label} steps {step_list(variant.graph)}\n{describe(variant_trace)}"
    fuses = any("[" in step for step in case.steps)
    assert (len(seen) > 1) == fuses, f"{case.id}: the passes {'did not change' if fuses else 'changed'} the payload"

    steps = step_list(graph)
    assert steps == list(case.steps), f"{case.id}: fused steps {steps}, expected {list(case.steps)}"
    assert trace, "oneDNN printed no verbose trace (built with ONEDNN_VERBOSE=OFF?): the layout checks need it"
    executed = [op for record in trace for op in record.post_ops]
    assert len(executed) + host_post_op_count(graph) == post_op_count(graph), (
        f"{case.id}: the payload has {post_op_count(graph)} post-ops, oneDNN executed {executed}\n{describe(trace)}"
    )
    if case.residual is Residual.PLAIN:
        hosts = [r for r in trace if r.primitive in ("convolution", "deconvolution")]
        tags = [op.split(":")[3] for r in hosts for op in r.post_ops if op.startswith("binary_") and op.count(":") >= 3]
        assert tags and not all(is_plain(tag) for tag in tags), (
            f"{case.id}: a residual written in plain layout should reach its convolution in the convolution's "
            f"own layout; the full-size binary post-op operands came in {tags}\n{describe(trace)}"
        )


# 6. an image's few channels, downsampled: on AVX-512 the stem reads the graph input in place (plain abcd)
# instead of a channels-last copy of it (runtime/ConvolutionSteps.cpp, reads_image_in_place).
class ImageStem(nn.Module):
    def __init__(self, channels: int, width: int, kernel: int, stride: int) -> None:
        super().__init__()
        self.stem = nn.Conv2d(channels, width, kernel, stride, padding=kernel // 2)
        self.next = nn.Conv2d(width, width, 3, padding=1, groups=width)  # reads the stem's result, as a net's does

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.hardswish(self.stem(x))
        return self.next(F.max_pool2d(y, 3, 2, 1)) + 1.0


STEMS = {  # id: (input channels, width, kernel, stride)
    "mobilenet_v3_3x3_s2": (3, 16, 3, 2),
    "resnet_7x7_s2": (3, 64, 7, 2),
    "four_channels_s2": (4, 24, 3, 2),
    "unet_3x3_s1": (3, 32, 3, 1),  # stride 1: read channels-last, as before
}


def _stem_run(name: str) -> tuple[list[torch.Tensor], list[torch.Tensor], list[Record]]:
    channels, width, kernel, stride = STEMS[name]
    torch.manual_seed(0)
    model = ImageStem(channels, width, kernel, stride).eval()
    x = torch.randn(1, channels, 40, 40)
    with torch.no_grad():
        expected = [model(x)]
    lowered = lower(model, (x,))
    assert lowered.delegate_calls == 1, lowered.describe()
    outputs, trace = execute_traced(lowered.buffer, (x,))
    return outputs, expected, trace


@pytest.mark.parametrize("name", STEMS)
def test_image_stems_match_eager(name: str) -> None:
    outputs, expected, trace = _stem_run(name)
    problem = mismatch(name, outputs, expected, DEFAULT_TOLERANCE)
    assert problem is None, f"{problem}\n{describe(trace)}"


@pytest.mark.parametrize("name", STEMS)
def test_downsampling_image_stems_read_the_input_in_place_on_avx512(name: str) -> None:
    if not effective_isa().startswith(("avx512", "amx")):
        pytest.skip(f"the in-place stem is taken on AVX-512 only; oneDNN runs {effective_isa()} here")
    channels, _, _, stride = STEMS[name]
    _, _, trace = _stem_run(name)
    stem = next(r for r in trace if r.primitive == "convolution" and r.problem.startswith(f"mb1_ic{channels}oc"))
    src = dict(stem.layouts)["src"]
    copies_of_input = [r for r in trace if r.primitive == "reorder" and r.problem.startswith(f"1x{channels}x40x40")]
    if stride >= 2:
        assert is_plain(src) and stem.implementation.startswith("jit"), describe(trace)
        assert not copies_of_input, describe(trace)
    else:
        assert not is_plain(src), describe(trace)


# 6b. a value whose blocked layout places every element where channels-last does (aBcd16b of exactly 16
# channels: MobileNetV3's stem on AVX-512) is read by a channels-last layer as it is, with no copy
# (GraphBuilder::as_layout, same_element_offsets in runtime/Dims.h).
class SixteenChannelStem(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, 2, padding=1)
        self.depthwise = nn.Conv2d(16, 16, 3, padding=1, groups=16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.depthwise(F.hardswish(self.stem(x))) + 1.0


def test_sixteen_blocked_channels_are_read_channels_last_without_a_copy() -> None:
    torch.manual_seed(0)
    model = SixteenChannelStem().eval()
    x = torch.randn(1, 3, 40, 40)
    with torch.no_grad():
        expected = [model(x)]
    lowered = lower(model, (x,))
    outputs, trace = execute_traced(lowered.buffer, (x,))
    problem = mismatch("16-channel stem", outputs, expected, DEFAULT_TOLERANCE)
    assert problem is None, f"{problem}\n{describe(trace)}"
    copies_of_stem = [r for r in trace if r.primitive == "reorder" and dict(r.layouts)["src"] == "aBcd16b"]
    assert not copies_of_stem, describe(trace)  # (the result's conversion to plain for the caller remains)
    stem, depthwise = [r for r in trace if r.primitive == "convolution"]
    if effective_isa().startswith(("avx512", "amx")):  # where the stem reads the image in place
        assert dict(stem.layouts)["dst"] == "aBcd16b", describe(trace)
        assert dict(depthwise.layouts)["src"] == "acdb", describe(trace)


# 7. a broadcast over a dim between two kept ones (a rotary table [1, S, 1, D] times a query [1, S, H, D]):
# oneDNN has only its reference binary loop for it, so the table is copied to full size first
# (ops/rules.py, broadcasts_between_kept_dims).
class RotaryProduct(nn.Module):
    def forward(self, query: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        return query * table - query.flip(-1) * (table + 1.0)


def test_broadcast_between_kept_dims_runs_no_reference_binary_kernel() -> None:
    torch.manual_seed(0)
    # 32768 values: past the 16384 up to which a same-shaped f32 binary runs on the host, not in oneDNN.
    inputs = (torch.randn(1, 128, 8, 32), torch.randn(1, 128, 1, 32))
    model = RotaryProduct().eval()
    with torch.no_grad():
        expected = [model(*inputs)]
    lowered = lower(model, inputs)
    assert lowered.delegate_calls == 1, lowered.describe()
    outputs, trace = execute_traced(lowered.buffer, inputs)
    assert mismatch("rotary", outputs, expected, DEFAULT_TOLERANCE) is None
    binaries = [r for r in trace if r.primitive == "binary"]
    assert binaries and not any(r.implementation.startswith("ref") for r in binaries), describe(trace)
