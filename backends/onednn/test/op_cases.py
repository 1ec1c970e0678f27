# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The op cases: one or more small models per rule of OP_RULES, run by test_ops.py in fp32 and by
test_bf16.py in bf16."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from executorch.backends.onednn.cli.zoo import randomize_batch_norms
from executorch.exir import EdgeCompileConfig
from support import Fn
from tester import DEFAULT_TOLERANCE
from torch import nn
from torch.nn import functional as F


class PerChannelPReLU(nn.PReLU):
    """PReLU with distinct weights per channel, of both signs (the default init makes them equal)."""

    def __init__(self, channels: int) -> None:
        super().__init__(channels)
        with torch.no_grad():
            self.weight.copy_(torch.linspace(-0.5, 1.5, channels))


@dataclass(frozen=True)
class OpCase:
    id: str
    model: Callable[[], nn.Module]
    shapes: tuple[tuple[int, ...], ...]
    # Ops ('aten::convolution') that must end up inside the delegate.
    ops: tuple[str, ...]
    tolerance: float = DEFAULT_TOLERANCE
    # Inputs drawn from this range instead of a normal distribution (log, sqrt need positives).
    positive: bool = False
    # The op is not core ATen: lowered with the IR check off, as the backend test suite does.
    non_core_aten: bool = False
    # Lowered without dim orders, as export_llm's edge manager does (casts stay aten::_to_copy).
    skip_dim_order: bool = False
    # Inputs rounded to values bf16 holds: a discontinuous op (floor) would otherwise jump wherever
    # precision="bf16" rounds an input across an integer.
    bf16_exact_inputs: bool = False
    # Why test_bf16 cannot run the case on a model converted to bf16 (None: it can).
    not_in_bf16_models: str | None = None
    # Why test_bf16 cannot run the case in bf16 at all (None: it can).
    not_in_bf16: str | None = None
    # Inputs of other dtypes than float (indices, masks), made from the seeded generator.
    make_inputs: Callable[[torch.Generator], tuple[torch.Tensor, ...]] | None = None

    def compile_config(self) -> EdgeCompileConfig | None:
        if not (self.non_core_aten or self.skip_dim_order):
            return None
        return EdgeCompileConfig(_check_ir_validity=not self.non_core_aten, _skip_dim_order=self.skip_dim_order)

    def inputs(self) -> tuple[torch.Tensor, ...]:
        generator = torch.Generator().manual_seed(0)
        if self.make_inputs is not None:
            return self.make_inputs(generator)
        if self.positive:
            inputs = tuple(torch.rand(s, generator=generator) * 4 + 0.1 for s in self.shapes)
        else:
            inputs = tuple(torch.randn(s, generator=generator) for s in self.shapes)
        if self.bf16_exact_inputs:
            inputs = tuple(x.to(torch.bfloat16).float() for x in inputs)
        return inputs


def fn(f: Callable[..., torch.Tensor], **modules: nn.Module) -> Callable[[], nn.Module]:
    return lambda: Fn(f, **modules)


def written(x: torch.Tensor, where: tuple[object, ...], values: torch.Tensor) -> torch.Tensor:
    """x with x[where] = values: index_put, with None for each `:` before the index tensors."""
    y = x.clone()
    y[where] = values
    return y


def module(factory: Callable[[], nn.Module]) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        torch.manual_seed(0)
        return randomize_batch_norms(factory())

    return build


def seq(*layers: Callable[[], nn.Module]) -> Callable[[], nn.Module]:
    return module(lambda: nn.Sequential(*(layer() for layer in layers)))


CONV = "aten::convolution"
VOL = (2, 3, 4, 6, 8)
IMG = (2, 4, 9, 9)

CONVOLUTION = [
    OpCase("conv1d", module(lambda: nn.Conv1d(4, 6, 3)), ((2, 4, 16),), (CONV,)),
    OpCase(
        "conv1d_stride_pad_dilation",
        module(lambda: nn.Conv1d(4, 6, 3, stride=2, padding=2, dilation=2)),
        ((2, 4, 17),),
        (CONV,),
    ),
    OpCase("conv1d_groups_no_bias", module(lambda: nn.Conv1d(4, 8, 3, groups=2, bias=False)), ((2, 4, 16),), (CONV,)),
    OpCase("conv2d", module(lambda: nn.Conv2d(4, 8, 3)), (IMG,), (CONV,)),
    OpCase("conv2d_stride2_pad1", module(lambda: nn.Conv2d(4, 8, 3, stride=2, padding=1)), (IMG,), (CONV,)),
    OpCase(
        "conv2d_asymmetric", module(lambda: nn.Conv2d(4, 8, (3, 1), stride=(2, 1), padding=(1, 0))), (IMG,), (CONV,)
    ),
    OpCase("conv2d_dilation2", module(lambda: nn.Conv2d(4, 8, 3, padding=2, dilation=2)), (IMG,), (CONV,)),
    OpCase("conv2d_groups2", module(lambda: nn.Conv2d(4, 8, 3, padding=1, groups=2)), (IMG,), (CONV,)),
    OpCase("conv2d_depthwise", module(lambda: nn.Conv2d(4, 4, 3, padding=1, groups=4)), (IMG,), (CONV,)),
    OpCase("conv2d_depthwise_multiplier2_stride2", module(lambda: nn.Conv2d(4, 8, 3, 2, 1, groups=4)), (IMG,), (CONV,)),
    OpCase("conv2d_1x1_no_bias", module(lambda: nn.Conv2d(4, 16, 1, bias=False)), (IMG,), (CONV,)),
    OpCase("conv_transpose2d", module(lambda: nn.ConvTranspose2d(4, 6, 3)), (IMG,), (CONV,)),
    OpCase("conv_transpose2d_stride2", module(lambda: nn.ConvTranspose2d(4, 6, 2, stride=2)), (IMG,), (CONV,)),
    OpCase(
        "conv_transpose2d_stride2_pad1_output_padding1",
        module(lambda: nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1)),
        (IMG,),
        (CONV,),
    ),
    OpCase(
        "conv_transpose1d_output_padding_beyond_padding",
        module(lambda: nn.ConvTranspose1d(4, 6, 3, stride=3, output_padding=2)),
        ((2, 4, 7),),
        (CONV,),
    ),
    OpCase(
        "conv_transpose2d_groups2", module(lambda: nn.ConvTranspose2d(4, 8, 3, stride=2, groups=2)), (IMG,), (CONV,)
    ),
    OpCase(
        "conv_transpose2d_dilation2",
        module(lambda: nn.ConvTranspose2d(4, 6, 3, dilation=2, bias=False)),
        (IMG,),
        (CONV,),
    ),
]

MATMUL = [
    OpCase("linear", module(lambda: nn.Linear(16, 24)), ((5, 16),), ("aten::linear",)),
    OpCase("linear_no_bias", module(lambda: nn.Linear(16, 24, bias=False)), ((5, 16),), ("aten::linear",)),
    OpCase("linear_3d_input", module(lambda: nn.Linear(16, 24)), ((2, 5, 16),), ("aten::linear",)),
    OpCase(
        "addmm",
        fn(lambda m, x: torch.addmm(m.parts.b.bias, x, m.parts.b.weight.t()), b=nn.Linear(16, 8)),
        ((5, 16),),
        ("aten::addmm",),
    ),
    OpCase("mm", fn(lambda m, a, b: torch.mm(a, b)), ((5, 16), (16, 7)), ("aten::mm",)),
    OpCase("bmm", fn(lambda m, a, b: torch.bmm(a, b)), ((3, 5, 16), (3, 16, 7)), ("aten::bmm",)),
    OpCase("matmul_3d_by_2d", fn(lambda m, a, b: torch.matmul(a, b)), ((3, 5, 16), (16, 7)), ()),
    OpCase("matmul_4d_batched", fn(lambda m, a, b: a @ b), ((2, 3, 5, 16), (2, 3, 16, 7)), ("aten::bmm",)),
]

BN = "aten::_native_batch_norm_legit_no_training"
NORMALIZATION = [
    OpCase("batch_norm2d_standalone", module(lambda: nn.BatchNorm2d(4)), (IMG,), (BN,)),
    OpCase("batch_norm1d_standalone", module(lambda: nn.BatchNorm1d(4)), ((3, 4, 10),), (BN,)),
    OpCase(
        "batch_norm_folded_into_conv", seq(lambda: nn.Conv2d(4, 8, 3), lambda: nn.BatchNorm2d(8)), (IMG,), (BN, CONV)
    ),
    OpCase(
        "batch_norm_folded_conv_no_bias_relu",
        seq(lambda: nn.Conv2d(4, 8, 3, bias=False), lambda: nn.BatchNorm2d(8), nn.ReLU),
        (IMG,),
        (BN, CONV, "aten::relu"),
    ),
    OpCase("layer_norm", module(lambda: nn.LayerNorm(16)), ((3, 5, 16),), ("aten::native_layer_norm",)),
    OpCase(
        "layer_norm_no_affine",
        module(lambda: nn.LayerNorm(16, elementwise_affine=False)),
        ((4, 16),),
        ("aten::native_layer_norm",),
    ),
    OpCase("softmax_last_dim", fn(lambda m, x: torch.softmax(x, -1)), ((3, 5, 16),), ("aten::_softmax",)),
    OpCase("softmax_dim1", fn(lambda m, x: torch.softmax(x, 1)), ((3, 5, 16),), ("aten::_softmax",)),
    OpCase("log_softmax", fn(lambda m, x: torch.log_softmax(x, -1)), ((3, 5, 16),), ("aten::_log_softmax",)),
    OpCase("log_softmax_dim0", fn(lambda m, x: torch.log_softmax(x, 0)), ((3, 5, 16),), ("aten::_log_softmax",)),
]

T2 = ((3, 4, 5),)
ELTWISE = [
    OpCase("relu", fn(lambda m, x: torch.relu(x)), T2, ("aten::relu",)),
    OpCase("relu6", fn(lambda m, x: F.relu6(x * 4)), T2, ("aten::hardtanh",)),
    OpCase("hardtanh", fn(lambda m, x: F.hardtanh(x, -0.5, 0.7)), T2, ("aten::hardtanh",)),
    OpCase("clamp_min_max", fn(lambda m, x: torch.clamp(x, -0.3, 0.6)), T2, ("aten::clamp",)),
    OpCase("clamp_min_only", fn(lambda m, x: torch.clamp(x, min=0.1)), T2, ("aten::clamp",)),
    OpCase("clamp_max_only", fn(lambda m, x: torch.clamp(x, max=0.1)), T2, ("aten::clamp",)),
    OpCase("gelu_erf", fn(lambda m, x: F.gelu(x)), T2, ("aten::gelu",)),
    OpCase("gelu_tanh", fn(lambda m, x: F.gelu(x, approximate="tanh")), T2, ("aten::gelu",)),
    OpCase("silu", fn(lambda m, x: F.silu(x)), T2, ("aten::silu",)),
    OpCase("sigmoid", fn(lambda m, x: torch.sigmoid(x)), T2, ("aten::sigmoid",)),
    OpCase("tanh", fn(lambda m, x: torch.tanh(x)), T2, ("aten::tanh",)),
    OpCase("hardswish", fn(lambda m, x: F.hardswish(x * 4)), T2, ("aten::hardswish",)),
    OpCase("hardsigmoid", fn(lambda m, x: F.hardsigmoid(x * 4)), T2, ("aten::hardsigmoid",)),
    OpCase("leaky_relu", fn(lambda m, x: F.leaky_relu(x, 0.2)), T2, ("aten::leaky_relu",)),
    OpCase("leaky_relu_default_slope", fn(lambda m, x: F.leaky_relu(x)), T2, ("aten::leaky_relu",)),
    OpCase("elu", fn(lambda m, x: F.elu(x, alpha=0.7)), T2, ("aten::elu",)),
    OpCase("exp", fn(lambda m, x: torch.exp(x)), T2, ("aten::exp",)),
    OpCase("log", fn(lambda m, x: torch.log(x)), T2, ("aten::log",), positive=True),
    OpCase("sqrt", fn(lambda m, x: torch.sqrt(x)), T2, ("aten::sqrt",), positive=True),
    OpCase("rsqrt", fn(lambda m, x: torch.rsqrt(x)), T2, ("aten::rsqrt",), positive=True),
    OpCase("reciprocal", fn(lambda m, x: torch.reciprocal(x)), T2, ("aten::reciprocal",), positive=True),
    OpCase("abs", fn(lambda m, x: torch.abs(x)), T2, ("aten::abs",)),
    OpCase("neg", fn(lambda m, x: -x), T2, ("aten::neg",)),
    OpCase("pow_scalar_exponent", fn(lambda m, x: torch.pow(x, 3)), T2, ("aten::pow",)),
    OpCase("pow_square", fn(lambda m, x: x**2), T2, ("aten::pow",)),
    OpCase("pow_fractional_exponent", fn(lambda m, x: x**1.5), T2, ("aten::pow",), positive=True),
    OpCase("log2", fn(lambda m, x: torch.log2(x)), T2, ("aten::log2",), positive=True),
    OpCase("log10", fn(lambda m, x: torch.log10(x)), T2, ("aten::log10",), positive=True),
    OpCase("log1p", fn(lambda m, x: torch.log1p(x)), T2, ("aten::log1p",), positive=True),
    OpCase("round", fn(lambda m, x: torch.round(x * 4)), T2, ("aten::round",), bf16_exact_inputs=True),
    # round.decimals is not core ATen.
    OpCase(
        "round_2_decimals",
        fn(lambda m, x: torch.round(x * 4, decimals=2)),
        T2,
        ("aten::round",),
        non_core_aten=True,
        bf16_exact_inputs=True,
    ),
    OpCase(
        "round_to_tens",
        fn(lambda m, x: torch.round(x * 40, decimals=-1)),
        T2,
        ("aten::round",),
        non_core_aten=True,
        bf16_exact_inputs=True,
    ),
    OpCase("floor", fn(lambda m, x: torch.floor(x * 4)), T2, ("aten::floor",), bf16_exact_inputs=True),
    OpCase("ceil", fn(lambda m, x: torch.ceil(x * 4)), T2, ("aten::ceil",), bf16_exact_inputs=True),
    OpCase("trunc", fn(lambda m, x: torch.trunc(x * 4)), T2, ("aten::trunc",), bf16_exact_inputs=True),
    # A host step between convolutions: it reads and writes plain f32, the convolutions their own layouts.
    OpCase(
        "conv_floor_conv",
        fn(
            lambda m, x: m.parts.b(torch.floor(m.parts.a(x) * 4)),
            a=nn.Conv2d(3, 16, 3, padding=1),
            b=nn.Conv2d(16, 8, 3, padding=1),
        ),
        ((1, 3, 12, 12),),
        ("aten::floor", "aten::convolution"),
        not_in_bf16="floor of a bf16 convolution's result moves by 1 wherever bf16 rounds across an integer",
    ),
    OpCase("prelu_shared", module(lambda: nn.PReLU()), ((2, 3, 4, 5),), ("aten::prelu",)),
    OpCase("prelu_1d_input", module(lambda: nn.PReLU(init=0.1)), ((20,),), ("aten::prelu",)),
    OpCase("prelu_per_channel", module(lambda: PerChannelPReLU(3)), ((2, 3, 4, 5),), ("aten::prelu",)),
]

BINARY = [
    OpCase("add_same_shape", fn(lambda m, a, b: a + b), ((3, 4, 5), (3, 4, 5)), ("aten::add",)),
    OpCase("add_broadcast_right", fn(lambda m, a, b: a + b), ((3, 4, 5), (4, 1)), ("aten::add",)),
    OpCase("add_alpha", fn(lambda m, a, b: torch.add(a, b, alpha=2)), ((3, 4, 5), (4, 1)), ("aten::add",)),
    OpCase("sub_alpha_first_broadcast", fn(lambda m, a, b: torch.sub(a, b, alpha=0.5)), ((5,), (3, 5)), ("aten::sub",)),
    # oneDNN broadcasts only its second operand: the first is copied to the output's shape first.
    OpCase("add_both_broadcast", fn(lambda m, a, b: a + b), ((5, 1), (1, 5)), ("aten::add",)),
    OpCase("div_first_operand_broadcast", fn(lambda m, a, b: a / b), ((5,), (3, 5)), ("aten::div",), positive=True),
    OpCase(
        "div_first_operand_broadcast_by_more_than_64",
        fn(lambda m, a, b: a / b),
        ((4, 1), (3, 4, 100)),
        ("aten::div",),
        positive=True,
    ),
    OpCase("mul_into_higher_rank", fn(lambda m, a, b: a * b), ((4, 5), (1, 1, 4, 5)), ("aten::mul",)),
    # A second operand of fewer dims and as many values (a [C] vector added to [1, 1, C]): the host
    # loop's case, viewed at the result's rank.
    OpCase("add_lower_rank_as_many_values", fn(lambda m, a, b: a + b), ((1, 1, 160), (160,)), ("aten::add",)),
    OpCase("sub_lower_rank_as_many_values", fn(lambda m, a, b: a - b), ((1, 4, 5), (4, 5)), ("aten::sub",)),
    OpCase("add_broadcast_left", fn(lambda m, a, b: a + b), ((4, 1), (3, 4, 5)), ("aten::add",)),
    OpCase("add_scalar", fn(lambda m, x: x + 2.5), T2, ("aten::add",)),
    OpCase("add_scalar_left", fn(lambda m, x: 2.5 + x), T2, ("aten::add",)),
    OpCase("add_scalar_overload", fn(lambda m, x: torch.ops.aten.add.Scalar(x, 1.5)), T2, ("aten::add",)),
    OpCase("sub_same_shape", fn(lambda m, a, b: a - b), ((3, 4, 5), (3, 4, 5)), ("aten::sub",)),
    OpCase("sub_broadcast_right", fn(lambda m, a, b: a - b), ((3, 4, 5), (5,)), ("aten::sub",)),
    OpCase("sub_broadcast_left", fn(lambda m, a, b: a - b), ((5,), (3, 4, 5)), ("aten::sub",)),
    OpCase("sub_scalar", fn(lambda m, x: x - 0.5), T2, ("aten::sub",)),
    OpCase("sub_from_scalar", fn(lambda m, x: 0.5 - x), T2, ("aten::sub",)),
    OpCase("mul_same_shape", fn(lambda m, a, b: a * b), ((3, 4, 5), (3, 4, 5)), ("aten::mul",)),
    OpCase("mul_broadcast_right", fn(lambda m, a, b: a * b), ((3, 4, 5), (3, 1, 5)), ("aten::mul",)),
    OpCase("mul_broadcast_left", fn(lambda m, a, b: a * b), ((1, 4, 1), (3, 4, 5)), ("aten::mul",)),
    OpCase("mul_scalar", fn(lambda m, x: x * 3.0), T2, ("aten::mul",)),
    OpCase("mul_scalar_overload", fn(lambda m, x: torch.ops.aten.mul.Scalar(x, -2.0)), T2, ("aten::mul",)),
    OpCase("div_same_shape", fn(lambda m, a, b: a / b), ((3, 4, 5), (3, 4, 5)), ("aten::div",), positive=True),
    OpCase("div_broadcast_right", fn(lambda m, a, b: a / b), ((3, 4, 5), (4, 1)), ("aten::div",), positive=True),
    OpCase("div_scalar", fn(lambda m, x: x / 4.0), T2, ("aten::div",)),
    OpCase("div_scalar_overload", fn(lambda m, x: torch.ops.aten.div.Scalar(x, 3.0)), T2, ("aten::div",)),
    # Export rewrites c / x as reciprocal(x) * c.
    OpCase("scalar_div_by_tensor", fn(lambda m, x: 2.0 / x), T2, ("aten::reciprocal", "aten::mul"), positive=True),
    OpCase("sub_scalar_overload", fn(lambda m, x: torch.ops.aten.sub.Scalar(x, 0.25)), T2, ("aten::sub",)),
    OpCase("maximum", fn(lambda m, a, b: torch.maximum(a, b)), ((3, 4, 5), (3, 4, 5)), ("aten::maximum",)),
    OpCase("minimum_broadcast", fn(lambda m, a, b: torch.minimum(a, b)), ((3, 4, 5), (1, 5)), ("aten::minimum",)),
    OpCase(
        "add_constant_buffer",
        fn(lambda m, x: x + m.parts.b.weight, b=nn.Linear(5, 4)),
        T2,
        ("aten::add",),
    ),
    OpCase(
        "expand_feeding_add",
        fn(lambda m, a, b: a.expand(3, 4, 5) + b),
        ((1, 4, 5), (3, 4, 5)),
        ("aten::expand_copy", "aten::add"),
    ),
    OpCase(
        "expand_feeding_mul_on_right",
        fn(lambda m, a, b: b * a.expand(3, 4, 5)),
        ((4, 1), (3, 4, 5)),
        ("aten::expand_copy", "aten::mul"),
    ),
    # Copies, one expanded dim after another (a new leading dim counts as one).
    OpCase(
        "expand_of_two_dims_and_a_new_one_feeding_sigmoid",
        fn(lambda m, x: torch.sigmoid(torch.relu(x).expand(2, 3, 4, 5))),
        ((1, 4, 1),),
        ("aten::expand_copy", "aten::sigmoid"),
    ),
    # More copies than a concat takes: a gather of row 0.
    OpCase(
        "expand_by_more_than_64_feeding_sigmoid",
        fn(lambda m, x: torch.sigmoid(torch.relu(x).expand(3, 100, 5))),
        ((3, 1, 5),),
        ("aten::expand_copy", "aten::sigmoid"),
    ),
]

POOLING = [
    OpCase("max_pool2d_2x2", fn(lambda m, x: F.max_pool2d(x, 2)), ((2, 4, 8, 8),), ("aten::max_pool2d_with_indices",)),
    # Floor mode on an odd size: the last input row and column are never read.
    OpCase(
        "max_pool2d_floor_odd_input", fn(lambda m, x: F.max_pool2d(x, 2)), (IMG,), ("aten::max_pool2d_with_indices",)
    ),
    OpCase(
        "max_pool2d_3x3_stride2_pad1",
        fn(lambda m, x: F.max_pool2d(x, 3, 2, 1)),
        (IMG,),
        ("aten::max_pool2d_with_indices",),
    ),
    OpCase(
        "max_pool2d_ceil_mode",
        fn(lambda m, x: F.max_pool2d(x, 2, ceil_mode=True)),
        (IMG,),
        ("aten::max_pool2d_with_indices",),
    ),
    OpCase(
        "max_pool2d_ceil_mode_pad1_stride2",
        fn(lambda m, x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True)),
        ((2, 4, 10, 10),),
        ("aten::max_pool2d_with_indices",),
    ),
    OpCase(
        "max_pool2d_dilation2",
        fn(lambda m, x: F.max_pool2d(x, 2, 1, dilation=2)),
        (IMG,),
        ("aten::max_pool2d_with_indices",),
    ),
    OpCase("avg_pool2d", fn(lambda m, x: F.avg_pool2d(x, 3)), (IMG,), ("aten::avg_pool2d",)),
    OpCase(
        "avg_pool2d_pad_count_include_pad",
        fn(lambda m, x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=True)),
        (IMG,),
        ("aten::avg_pool2d",),
    ),
    OpCase(
        "avg_pool2d_pad_exclude_pad",
        fn(lambda m, x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)),
        (IMG,),
        ("aten::avg_pool2d",),
    ),
    OpCase(
        "avg_pool2d_ceil_mode_exclude_pad",
        fn(lambda m, x: F.avg_pool2d(x, 2, ceil_mode=True, count_include_pad=False)),
        (IMG,),
        ("aten::avg_pool2d",),
    ),
    # PyTorch counts the padding, not ceil_mode's extension past it: a pad step, then pooling.
    OpCase(
        "avg_pool2d_ceil_mode_count_include_pad",
        fn(lambda m, x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=True)),
        ((1, 2, 8, 8),),
        ("aten::avg_pool2d",),
    ),
    OpCase(
        "avg_pool3d_ceil_mode_count_include_pad",
        fn(lambda m, x: F.avg_pool3d(x, (2, 3, 3), (2, 2, 3), (1, 1, 0), ceil_mode=True, count_include_pad=True)),
        ((1, 2, 5, 6, 7),),
        ("aten::avg_pool3d",),
        not_in_bf16_models="eager PyTorch has no bf16 avg_pool3d",
    ),
    # Export turns a 1x1 adaptive average pool into a mean over H and W.
    OpCase("adaptive_avg_pool2d_1x1", fn(lambda m, x: F.adaptive_avg_pool2d(x, 1)), (IMG,), ("aten::mean",)),
    OpCase(
        "adaptive_avg_pool2d_3x3", fn(lambda m, x: F.adaptive_avg_pool2d(x, 3)), (IMG,), ("aten::_adaptive_avg_pool2d",)
    ),
    OpCase("max_pool3d", fn(lambda m, x: F.max_pool3d(x, 2, padding=1)), (VOL,), ("aten::max_pool3d_with_indices",)),
    OpCase(
        "avg_pool3d_ceil_mode",
        fn(lambda m, x: F.avg_pool3d(x, 2, stride=2, ceil_mode=True, count_include_pad=False)),
        ((1, 2, 5, 6, 7),),
        ("aten::avg_pool3d",),
        not_in_bf16_models="eager PyTorch has no bf16 avg_pool3d",
    ),
    OpCase(
        "adaptive_avg_pool3d",
        fn(lambda m, x: F.adaptive_avg_pool3d(x, (2, 3, 2))),
        (VOL,),
        ("aten::_adaptive_avg_pool3d",),
    ),
    # Output sizes that do not divide the input's: windows of unequal sizes (ADAPTIVE_POOLING, on the host).
    OpCase(
        "adaptive_avg_pool2d_uneven",
        fn(lambda m, x: F.adaptive_avg_pool2d(x, (4, 5))),
        (IMG,),
        ("aten::_adaptive_avg_pool2d",),
    ),
    OpCase(
        "adaptive_avg_pool3d_uneven",
        fn(lambda m, x: F.adaptive_avg_pool3d(x, (3, 4, 5))),
        (VOL,),
        ("aten::_adaptive_avg_pool3d",),
    ),
    OpCase(
        "adaptive_max_pool2d_uneven",
        fn(lambda m, x: F.adaptive_max_pool2d(x, (4, 5))),
        (IMG,),
        ("aten::adaptive_max_pool2d",),
        non_core_aten=True,
    ),
    OpCase(
        "adaptive_max_pool1d",
        fn(lambda m, x: F.adaptive_max_pool1d(x, 3)),
        ((2, 4, 9),),
        ("aten::adaptive_max_pool2d",),
        non_core_aten=True,
    ),
    OpCase(
        "adaptive_max_pool3d_uneven",
        fn(lambda m, x: F.adaptive_max_pool3d(x, (3, 4, 5))),
        (VOL,),
        ("aten::adaptive_max_pool3d",),
        non_core_aten=True,
    ),
    OpCase(
        "adaptive_max_pool3d",
        fn(lambda m, x: F.adaptive_max_pool3d(x, (2, 3, 2))),
        (VOL,),
        ("aten::adaptive_max_pool3d",),
        non_core_aten=True,
    ),
    OpCase("mean_spatial_keepdim", fn(lambda m, x: x.mean((2, 3), keepdim=True)), (IMG,), ("aten::mean",)),
    OpCase("mean_spatial", fn(lambda m, x: x.mean((-2, -1))), (IMG,), ("aten::mean",)),
    OpCase("sum_last_dim", fn(lambda m, x: x.sum(-1)), (IMG,), ("aten::sum",)),
    OpCase(
        "mean_with_its_own_dtype",
        fn(lambda m, x: x.mean(-1, dtype=torch.float32)),
        (IMG,),
        ("aten::mean",),
        not_in_bf16_models="the dtype argument differs from a bf16 input's (refused: a cast)",
    ),
    OpCase("amax_dim1_keepdim", fn(lambda m, x: x.amax(1, keepdim=True)), (IMG,), ("aten::amax",)),
    OpCase("amin_dims", fn(lambda m, x: x.amin((1, 2))), (IMG,), ("aten::amin",)),
    # Only size-1 dims reduced (oneDNN refuses such a reduction): the values themselves.
    OpCase("amax_of_one_value", fn(lambda m, x: torch.amax(x)), ((1,),), ("aten::amax",)),
    OpCase("mean_over_size_one_dim", fn(lambda m, x: x.mean(1)), ((4, 1, 3),), ("aten::mean",)),
]

RESAMPLING = [
    OpCase("cat_dim1", fn(lambda m, a, b: torch.cat([a, b], 1)), ((2, 3, 4), (2, 5, 4)), ("aten::cat",)),
    OpCase("cat_last_dim_three", fn(lambda m, a, b: torch.cat([a, b, a], -1)), ((2, 3, 4), (2, 3, 2)), ("aten::cat",)),
    OpCase("constant_pad", fn(lambda m, x: F.pad(x, (1, 2, 0, 3), value=0.5)), (IMG,), ("aten::constant_pad_nd",)),
    OpCase("constant_pad_last_dim", fn(lambda m, x: F.pad(x, (2, 1))), ((3, 4, 5),), ("aten::constant_pad_nd",)),
    OpCase(
        "upsample_nearest_x2",
        fn(lambda m, x: F.interpolate(x, scale_factor=2, mode="nearest")),
        (IMG,),
        ("aten::upsample_nearest2d",),
    ),
    OpCase(
        "upsample_nearest_non_integer_scale",
        fn(lambda m, x: F.interpolate(x, scale_factor=(1.5, 0.7), mode="nearest")),
        (IMG,),
        ("aten::upsample_nearest2d",),
    ),
    OpCase(
        "upsample_nearest_non_integer_size",
        fn(lambda m, x: F.interpolate(x, size=(13, 4), mode="nearest")),
        (IMG,),
        ("aten::upsample_nearest2d",),
    ),
    OpCase(
        "upsample_nearest_size_3x",
        fn(lambda m, x: F.interpolate(x, size=(27, 18), mode="nearest")),
        (IMG,),
        ("aten::upsample_nearest2d",),
    ),
    OpCase(
        "upsample_bilinear_x2",
        fn(lambda m, x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)),
        (IMG,),
        ("aten::upsample_bilinear2d",),
    ),
    OpCase(
        "upsample_bilinear_size",
        fn(lambda m, x: F.interpolate(x, size=(13, 20), mode="bilinear", align_corners=False)),
        (IMG,),
        ("aten::upsample_bilinear2d",),
    ),
    OpCase(
        "upsample_bilinear_align_corners",
        fn(lambda m, x: F.interpolate(x, size=(13, 20), mode="bilinear", align_corners=True)),
        (IMG,),
        ("aten::upsample_bilinear2d",),
    ),
    OpCase(
        "upsample_bilinear_align_corners_down_x2",
        fn(lambda m, x: F.interpolate(x, scale_factor=0.5, mode="bilinear", align_corners=True)),
        ((1, 2, 8, 6),),
        ("aten::upsample_bilinear2d",),
    ),
]

# Each layout op feeds a compute op here (layout ops alone: test_partitioner).
LAYOUT = [
    OpCase("view", fn(lambda m, x: torch.relu(x.view(3, 20))), T2, ("aten::view_copy",)),
    OpCase("reshape", fn(lambda m, x: torch.relu(x).reshape(5, 12)), T2, ("aten::view_copy",)),
    OpCase("permute", fn(lambda m, x: torch.relu(x.permute(2, 0, 1))), T2, ("aten::permute_copy",)),
    OpCase("permute_negative_dims", fn(lambda m, x: torch.relu(x).permute(-1, -3, -2)), T2, ("aten::permute_copy",)),
    OpCase("transpose", fn(lambda m, x: torch.relu(x.transpose(0, 2))), T2, ("aten::permute_copy",)),
    OpCase("squeeze_dim", fn(lambda m, x: torch.relu(x.squeeze(1))), ((3, 1, 5),), ("aten::squeeze_copy",)),
    OpCase("squeeze_all", fn(lambda m, x: torch.relu(x.squeeze())), ((3, 1, 5, 1),), ("aten::squeeze_copy",)),
    OpCase(
        "squeeze_copy_dim",
        fn(lambda m, x: torch.ops.aten.squeeze_copy.dim(torch.relu(x), 1)),
        ((3, 1, 5),),
        ("aten::squeeze_copy",),
    ),
    OpCase(
        "squeeze_copy_default",
        fn(lambda m, x: torch.ops.aten.squeeze_copy.default(torch.relu(x))),
        ((3, 1, 5),),
        ("aten::squeeze_copy",),
    ),
    OpCase("select", fn(lambda m, x: torch.relu(x[:, 1])), T2, ("aten::select_copy",)),
    OpCase("select_negative_index", fn(lambda m, x: torch.relu(x)[..., -1]), T2, ("aten::select_copy",)),
    OpCase("slice", fn(lambda m, x: torch.relu(x[:, 1:3])), T2, ("aten::slice_copy",)),
    OpCase("slice_open_end_last_dim", fn(lambda m, x: torch.relu(x)[..., 2:]), T2, ("aten::slice_copy",)),
    OpCase("slice_with_step", fn(lambda m, x: torch.relu(x)[:, 1::2]), T2, ("aten::slice_copy",)),
    OpCase(
        "split_with_sizes",
        fn(lambda m, x: torch.cat([torch.relu(p) for p in torch.split(x, [1, 3], dim=1)][::-1], 1)),
        T2,
        ("aten::split_with_sizes_copy",),
    ),
    OpCase("unsqueeze", fn(lambda m, x: torch.relu(x).unsqueeze(1)), T2, ("aten::unsqueeze_copy",)),
    OpCase("flatten", fn(lambda m, x: torch.relu(torch.flatten(x, 1))), (IMG,), ("aten::view_copy",)),
    OpCase("clone", fn(lambda m, x: torch.relu(x).clone() + 1), T2, ("dim_order_ops::_clone_dim_order",)),
    OpCase("alias_copy", fn(lambda m, x: torch.ops.aten.alias_copy.default(torch.relu(x))), T2, ("aten::alias_copy",)),
    OpCase(
        "aten_clone_between_computes",
        fn(lambda m, x: torch.ops.aten.clone.default(torch.relu(x)) * 2),
        T2,
        ("dim_order_ops::_clone_dim_order", "aten::mul"),
    ),
    OpCase(
        "attention_with_safe_softmax_guard",
        fn(lambda m, q, k, v, mask: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)),
        ((1, 2, 4, 8), (1, 2, 5, 8), (1, 2, 5, 8), (4, 5)),
        ("aten::_softmax", "aten::where", "aten::eq", "aten::any", "aten::logical_not", "aten::full_like"),
    ),
    OpCase(
        "int_constant_cast_to_float",
        fn(lambda m, x: x + m.table.to(torch.float32)),
        T2,
        ("aten::add", "dim_order_ops::_to_dim_order_copy"),
    ),
    OpCase(
        "cast_without_dim_order",
        fn(lambda m, x: (x.to(torch.bfloat16) * 2).to(torch.float32) + 1),
        T2,
        ("aten::_to_copy", "aten::mul", "aten::add"),
        skip_dim_order=True,
        not_in_bf16="its casts between fixed dtypes are what it checks",
    ),
]


def _with_int_table(case: OpCase) -> OpCase:
    """The cast case needs an int64 buffer on the module: constants of any dtype fold ahead of time."""

    def build() -> nn.Module:
        m = case.model()
        m.register_buffer("table", torch.arange(20).reshape(4, 5))
        return m

    return OpCase(case.id, build, case.shapes, case.ops, case.tolerance, case.positive)


LAYOUT = [_with_int_table(c) if c.id == "int_constant_cast_to_float" else c for c in LAYOUT]


def floats_and(*extra: Callable[[torch.Generator], torch.Tensor], shape: tuple[int, ...] = (3, 5)):
    """Inputs: a float tensor of `shape`, then one tensor per `extra` factory (indices, masks, ...)."""
    return lambda g: (torch.randn(shape, generator=g), *(make(g) for make in extra))


def indices(high: int, shape: tuple[int, ...]) -> Callable[[torch.Generator], torch.Tensor]:
    return lambda g: torch.randint(0, high, shape, generator=g)


def mask(shape: tuple[int, ...]) -> Callable[[torch.Generator], torch.Tensor]:
    return lambda g: torch.rand(shape, generator=g) > 0.5


COMPARISONS = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge}
# Integer and boolean results and operands: the runtime's host index steps (ops/indexing.py).
INDEXING = [
    OpCase("argmax_dim", fn(lambda m, x: torch.argmax(x, dim=1)), ((3, 5, 4),), ("aten::argmax",)),
    OpCase("argmax_all", fn(lambda m, x: torch.argmax(x)), ((3, 5, 4),), ("aten::argmax",)),
    OpCase("argmin_keepdim", fn(lambda m, x: torch.argmin(x, -1, keepdim=True)), T2, ("aten::argmin",)),
    OpCase(
        "argmax_of_computed",
        fn(lambda m, x: torch.argmax(torch.relu(x) * 3 + 1, dim=0)),
        T2,
        ("aten::argmax", "aten::relu"),
        not_in_bf16_models="ties between values rounded to bf16 pick another index",
    ),
    OpCase(
        "index_select",
        fn(lambda m, x, i: torch.index_select(x, 1, i)),
        (),
        ("aten::index_select",),
        make_inputs=floats_and(indices(5, (7,))),
    ),
    OpCase(
        "index_select_constant_indices_then_add",
        fn(lambda m, x: torch.index_select(x, 0, torch.tensor([2, 0, 2])) + 1),
        (),
        ("aten::index_select", "aten::add"),
        make_inputs=floats_and(),
    ),
    OpCase(
        "embedding",
        module(lambda: nn.Embedding(10, 6)),
        (),
        ("aten::embedding",),
        make_inputs=lambda g: (indices(10, (2, 3))(g),),
    ),
    OpCase(
        "index_by_one_tensor",
        fn(lambda m, x, i: x[:, i]),
        (),
        ("aten::index",),
        make_inputs=floats_and(indices(5, (4,))),
    ),
    OpCase(
        "index_put_two_index_tensors_broadcast_value",
        fn(lambda m, x, i, j: torch.index_put(x, (i, j), torch.tensor([7.5]))),
        (),
        ("aten::index_put",),
        make_inputs=lambda g: (torch.randn(4, 5, 3, generator=g), torch.tensor([0, 3, -1]), torch.tensor([4, 0, 2])),
    ),
    OpCase(
        "index_put_accumulate_repeated_rows",
        fn(lambda m, x, i, v: x.index_put((i,), v, accumulate=True)),
        (),
        ("aten::index_put",),
        make_inputs=lambda g: (torch.randn(4, 5, generator=g), torch.tensor([1, 3, 1]), torch.randn(3, 5, generator=g)),
    ),
    OpCase(
        "index_put_after_whole_leading_dims_as_a_kv_cache_writes",
        fn(lambda m, x, i, v: written(x, (slice(None), slice(None), i), v)),
        (),
        ("aten::index_put",),
        make_inputs=lambda g: (
            torch.randn(2, 3, 6, 4, generator=g),
            torch.tensor([4, -6]),
            torch.randn(2, 3, 2, 4, generator=g),
        ),
    ),
    OpCase(
        "index_put_after_a_whole_dim_broadcast_value",
        fn(lambda m, x, i, j: written(x, (slice(None), i, j), torch.tensor([7.5]))),
        (),
        ("aten::index_put",),
        make_inputs=lambda g: (torch.randn(2, 4, 5, 3, generator=g), torch.tensor([0, 3]), torch.tensor([4, -1])),
    ),
    OpCase(
        "floor_divide_float",
        fn(lambda m, x, y: torch.floor_divide(x * 8, y)),
        (T2[0], (5,)),
        ("aten::div",),
        bf16_exact_inputs=True,
        not_in_bf16="a quotient rounded to bf16 floors to another integer",
    ),
    OpCase(
        "trunc_divide_float",
        fn(lambda m, x, y: torch.div(x * 8, y, rounding_mode="trunc")),
        (T2[0], (5,)),
        ("aten::div",),
        not_in_bf16="a quotient rounded to bf16 truncates to another integer",
    ),
    OpCase(
        "floor_divide_int64_broadcast",
        fn(lambda m, x, y: torch.floor_divide(x, y)),
        (),
        ("aten::div",),
        make_inputs=lambda g: (torch.randint(-50, 50, (4, 5), generator=g), torch.tensor([3, -3, 7, -1, 2])),
    ),
    *(
        OpCase(f"{name}_tensor_broadcast", fn(lambda m, x, y, op=op: op(x, y)), (T2[0], (5,)), (f"aten::{name}",))
        for name, op in COMPARISONS.items()
    ),
    *(
        OpCase(f"{name}_scalar", fn(lambda m, x, op=op: op(x, 0.25)), T2, (f"aten::{name}",))
        for name, op in COMPARISONS.items()
    ),
    *(
        OpCase(
            f"logical_{name}_of_comparisons",
            fn(lambda m, x, y, op=op: op(x > 0, y < 0.5)),
            (T2[0], (5,)),
            (f"aten::logical_{name}", "aten::gt", "aten::lt"),
        )
        for name, op in {"and": torch.logical_and, "or": torch.logical_or, "xor": torch.logical_xor}.items()
    ),
    OpCase(
        "logical_not_of_mask",
        fn(lambda m, x, keep: torch.where(torch.logical_not(keep), x, 0.0)),
        (),
        ("aten::logical_not", "aten::where"),
        make_inputs=floats_and(mask((3, 5))),
    ),
    OpCase(
        "masked_fill_broadcast_mask",
        fn(lambda m, x, keep: x.masked_fill(keep, -2.5)),
        (),
        ("aten::where",),
        make_inputs=floats_and(mask((4, 1, 5)), shape=(2, 4, 3, 5)),
    ),
    OpCase("threshold", module(lambda: nn.Threshold(0.1, 20.0)), T2, ("aten::where", "aten::le")),
    OpCase(
        "where_int64",
        fn(lambda m, x, i: torch.where(x > 0, i, torch.tensor(-1))),
        (),
        ("aten::where", "aten::gt"),
        make_inputs=floats_and(indices(9, (3, 5))),
    ),
]

CASES = CONVOLUTION + MATMUL + NORMALIZATION + ELTWISE + BINARY + POOLING + RESAMPLING + LAYOUT + INDEXING
