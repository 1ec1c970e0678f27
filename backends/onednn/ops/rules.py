# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Every op the delegate takes, one row each: how it lowers to a runtime step.

A rule's lowering is also its support check: it raises `Unsupported` for anything the runtime cannot
execute exactly, and the partitioner runs it on each candidate node before claiming it.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeGuard

import torch
import torch.ao.quantization.fx._decomposed  # registers the quantized_decomposed ops
from torch._subclasses.fake_tensor import is_fake
from torch.fx import Node

from ..serialization.schema import (
    TORCH_TO_DTYPE,
    BinaryAlg,
    DType,
    EltwiseAlg,
    PoolingAlg,
    PostOpKind,
    ReductionAlg,
    ResamplingAlg,
    StepKind,
)
from ..serialization.shapes import SymDim, is_read_from_data, largest, left_pad, same, same_dims, smallest
from ..serialization.step_kinds import COMMUTATIVE
from .arguments import arg, bool_arg, float_arg, floats_arg, int_arg, ints_arg, list_arg, node_arg, str_arg
from .context import (
    SUPPORTED_DTYPES,
    LoweringContext,
    Unsupported,
    aten_op,
    fake_tensor,
    node_dtype,
    same_sizes,
)

aten = torch.ops.aten

Lowering = Callable[[LoweringContext, Node], None]


@dataclass(frozen=True)
class OpRule:
    lower: Lowering
    # False for ops that only move data (exact at any precision, see the bf16 fallback warning).
    compute: bool = True
    # Constraints on how the result is used, e.g. "only output 0 of a multi-output op".
    users_ok: Callable[[Node, Callable[[Node], bool]], str | None] | None = None
    # Lowers to no value: a pattern's inner node that its users' lowering reads through (getitem of it
    # lowers to nothing as well).
    pattern_member: bool = False


def spatial(values: object, count: int, name: str) -> list[int]:
    if not isinstance(values, (int, list, tuple)):
        raise Unsupported(f"{name}={values!r} for {count} spatial dims")
    items = [values] if isinstance(values, int) else list(values)
    if len(items) == 1:
        items = items * count
    if len(items) != count or not all(isinstance(v, int) for v in items):
        raise Unsupported(f"{name}={values!r} for {count} spatial dims")
    return items


def normalize_dim(dim: int, rank: int) -> int:
    if not -max(rank, 1) <= dim < max(rank, 1):
        raise Unsupported(f"dim {dim} out of range for rank {rank}")
    return dim % max(rank, 1)


def only_first_output_used(node: Node, _: Callable[[Node], bool]) -> str | None:
    for user in node.users:
        if user.target is not operator.getitem or user.args[1] != 0:
            return f"{node.name}: only its first output may be used"
    return None


# --- elementwise: (alg, alpha, beta) from the node -------------------------------------------------
EltwiseParams = Callable[[Node], tuple[EltwiseAlg, float, float]]


def fixed(alg: EltwiseAlg, alpha: float = 0.0, beta: float = 0.0) -> EltwiseParams:
    return lambda node: (alg, alpha, beta)


def clamp_params(node: Node) -> tuple[EltwiseAlg, float, float]:
    low, high = arg(node, 1, "min"), arg(node, 2, "max")
    if isinstance(low, Node) or isinstance(high, Node):
        raise Unsupported("clamp with tensor bounds")
    return (
        EltwiseAlg.CLIP,
        # An absent bound is infinite: a finite stand-in would clamp an inf input.
        -math.inf if low is None else float_arg(node, 1, "min"),
        math.inf if high is None else float_arg(node, 2, "max"),
    )


def gelu_params(node: Node) -> tuple[EltwiseAlg, float, float]:
    approximate = str_arg(node, 1, "approximate", "none")
    algs = {"none": EltwiseAlg.GELU_ERF, "tanh": EltwiseAlg.GELU_TANH}
    if approximate not in algs:
        raise Unsupported(f"gelu approximate={approximate!r}")
    return algs[approximate], 0.0, 0.0


def elu_params(node: Node) -> tuple[EltwiseAlg, float, float]:
    scale, input_scale = arg(node, 2, "scale", 1), arg(node, 3, "input_scale", 1)
    if scale != 1 or input_scale != 1:
        raise Unsupported("elu with scale or input_scale other than 1")
    return EltwiseAlg.ELU, float_arg(node, 1, "alpha", 1.0), 0.0


def pow_params(node: Node) -> tuple[EltwiseAlg, float, float]:
    exponent = arg(node, 1, "exponent")
    if not isinstance(exponent, (int, float)):
        raise Unsupported("pow with a tensor exponent")
    return EltwiseAlg.POW, 1.0, float(exponent)


ELTWISE: dict[object, EltwiseParams] = {
    aten.relu.default: fixed(EltwiseAlg.RELU),
    aten.leaky_relu.default: lambda n: (EltwiseAlg.RELU, float_arg(n, 1, "negative_slope", 0.01), 0.0),
    aten.hardtanh.default: lambda n: (
        EltwiseAlg.CLIP,
        float_arg(n, 1, "min_val", -1.0),
        float_arg(n, 2, "max_val", 1.0),
    ),
    aten.clamp.default: clamp_params,
    aten.gelu.default: gelu_params,
    aten.silu.default: fixed(EltwiseAlg.SWISH, 1.0),
    aten.sigmoid.default: fixed(EltwiseAlg.LOGISTIC),
    aten.tanh.default: fixed(EltwiseAlg.TANH),
    aten.hardswish.default: fixed(EltwiseAlg.HARDSWISH, 1.0 / 6.0, 0.5),
    aten.hardsigmoid.default: fixed(EltwiseAlg.HARDSIGMOID, 1.0 / 6.0, 0.5),
    aten.elu.default: elu_params,
    aten.exp.default: fixed(EltwiseAlg.EXP),
    aten.log.default: fixed(EltwiseAlg.LOG),
    aten.sqrt.default: fixed(EltwiseAlg.SQRT),
    aten.rsqrt.default: fixed(EltwiseAlg.POW, 1.0, -0.5),
    aten.reciprocal.default: fixed(EltwiseAlg.POW, 1.0, -1.0),
    aten.abs.default: fixed(EltwiseAlg.ABS),
    aten.neg.default: fixed(EltwiseAlg.LINEAR, -1.0, 0.0),
    aten.round.default: fixed(EltwiseAlg.ROUND),
    aten.floor.default: fixed(EltwiseAlg.FLOOR),
    aten.ceil.default: fixed(EltwiseAlg.CEIL),
    aten.trunc.default: fixed(EltwiseAlg.TRUNC),
    aten.log1p.default: fixed(EltwiseAlg.LOG1P),
}


def eltwise_rule(params: EltwiseParams) -> OpRule:
    def lower(ctx: LoweringContext, node: Node) -> None:
        alg, alpha, beta = params(node)
        src = ctx.value(node.args[0])
        emit_eltwise(ctx, src, ctx.output(node), alg, alpha, beta)

    return OpRule(lower)


def emit_eltwise(ctx: LoweringContext, src: int, dst: int, alg: EltwiseAlg, alpha: float, beta: float) -> None:
    ctx.emit(StepKind.ELTWISE, [src], [dst], {"alg": [alg]}, {"alpha": [alpha], "beta": [beta]})


def lower_pow(ctx: LoweringContext, node: Node) -> None:
    # oneDNN 3.2's eltwise_pow computes exp(beta * log|x|) and costs ~20x a multiply: x^2 and x^3 (GPT-2's
    # tanh GELU) become binary multiplies.
    alg, alpha, beta = pow_params(node)
    src, dst = ctx.value(node.args[0]), ctx.output(node)
    if beta not in (2.0, 3.0):
        emit_eltwise(ctx, src, dst, alg, alpha, beta)
        return
    square = dst if beta == 2.0 else ctx.new_value(tuple(ctx.dims(src)), ctx.dtype(src))
    ctx.emit(StepKind.BINARY, [src, src], [square], {"alg": [BinaryAlg.MUL]})
    if beta == 3.0:
        ctx.emit(StepKind.BINARY, [square, src], [dst], {"alg": [BinaryAlg.MUL]})


# --- binary ---------------------------------------------------------------------------------------
BINARY: dict[object, BinaryAlg] = {
    aten.add.Tensor: BinaryAlg.ADD,
    aten.sub.Tensor: BinaryAlg.SUB,
    aten.mul.Tensor: BinaryAlg.MUL,
    aten.div.Tensor: BinaryAlg.DIV,
    aten.add.Scalar: BinaryAlg.ADD,
    aten.sub.Scalar: BinaryAlg.SUB,
    aten.mul.Scalar: BinaryAlg.MUL,
    aten.div.Scalar: BinaryAlg.DIV,
}
# x OP c as alpha * x + beta, and c OP x likewise (None: not expressible as LINEAR).
SCALAR_RIGHT: dict[BinaryAlg, Callable[[float], tuple[float, float] | None]] = {
    BinaryAlg.ADD: lambda c: (1.0, c),
    BinaryAlg.SUB: lambda c: (1.0, -c),
    BinaryAlg.MUL: lambda c: (c, 0.0),
    BinaryAlg.DIV: lambda c: (1.0 / c, 0.0) if c != 0 else None,
}
SCALAR_LEFT: dict[BinaryAlg, Callable[[float], tuple[float, float] | None]] = {
    BinaryAlg.ADD: lambda c: (1.0, c),
    BinaryAlg.SUB: lambda c: (-1.0, c),
    BinaryAlg.MUL: lambda c: (c, 0.0),
}


def binary_rule(alg: BinaryAlg) -> OpRule:
    def lower(ctx: LoweringContext, node: Node) -> None:
        alpha = arg(node, 2, "alpha", 1)
        if not isinstance(alpha, (int, float)) or isinstance(alpha, bool):
            raise Unsupported(f"add/sub with alpha={alpha!r}")
        out_dims = ctx.dims_of(node)
        lhs, rhs = node.args[0], node.args[1]

        def scalar(operand: object) -> float | None:
            if isinstance(operand, (int, float)) and not isinstance(operand, bool):
                return float(operand)
            if isinstance(operand, Node):
                data = ctx.constant(ctx.value(operand))
                if data is not None and data.numel() == 1:
                    # The partitioner's checks see fake constants; any value picks the same lowering.
                    return 1.0 if is_fake(data) else float(data.reshape(()))
            return None

        for tensor, constant, table in ((lhs, scalar(rhs), SCALAR_RIGHT), (rhs, scalar(lhs), SCALAR_LEFT)):
            if constant is None or not isinstance(tensor, Node) or alpha != 1:
                continue
            src = ctx.value(tensor)
            as_linear = table.get(alg, lambda c: None)(constant)
            if same_dims(ctx.dims(src), out_dims) and as_linear is not None:
                emit_eltwise(ctx, src, ctx.output(node), EltwiseAlg.LINEAR, *as_linear)
                return
            if same_dims(ctx.dims(src), out_dims) and table is SCALAR_LEFT and alg == BinaryAlg.DIV:
                emit_eltwise(ctx, src, ctx.output(node), EltwiseAlg.POW, constant, -1.0)
                return

        def operand(x: object) -> int:
            if isinstance(x, Node):
                return ctx.value(x)
            if not isinstance(x, (int, float)):
                raise Unsupported(f"{node.name}: operand {x!r}")
            return ctx.graph.add_constant(torch.tensor(float(x)), DType.F32)

        src0, src1 = operand(lhs), operand(rhs)
        if alpha != 1:  # x + alpha * y: PyTorch fuses the multiply-add, here alpha * y is rounded first
            scaled = ctx.new_value(ctx.dims(src1), ctx.dtype(src1))
            emit_eltwise(ctx, src1, scaled, EltwiseAlg.LINEAR, float(alpha), 0.0)
            src1 = scaled
        rank = len(out_dims)
        post_ops: dict[str, list[int]] = {}
        floats: dict[str, list[float]] = {}
        swappable = alg in COMMUTATIVE | {BinaryAlg.SUB}
        # Decided at every size alike (same_dims): at 1x1 a per-channel scale has the map's dims.
        full0, full1 = (same_dims(left_pad(ctx.dims(src), rank), out_dims) for src in (src0, src1))
        if not full0 and full1 and swappable:
            src0, src1 = src1, src0
            if alg == BinaryAlg.SUB:  # a - b == -(b - a)
                post_ops = {"post_ops": [PostOpKind.ELTWISE, EltwiseAlg.LINEAR]}
                floats = {"post_op_params": [-1.0, 0.0]}
        if not same_dims(ctx.dims(src0), out_dims):  # oneDNN broadcasts only the second operand
            src0 = emit_broadcast_copy(ctx, src0, node)
        if broadcasts_between_kept_dims(left_pad(ctx.dims(src1), rank), out_dims):
            src1 = emit_broadcast_copy(ctx, src1, node)
        ctx.emit(StepKind.BINARY, [src0, src1], [ctx.output(node)], {"alg": [alg], **post_ops}, floats)

    return OpRule(lower)


# --- static int8: quantize, dequantize, and int8 operands of convolution and matmul ---------------
qd = torch.ops.quantized_decomposed
QUANT_RANGES = {torch.uint8: (0, 255), torch.int8: (-128, 127)}


def per_tensor_params(node: Node) -> tuple[float, int, torch.dtype]:
    """(scale, zero point, dtype) of a quantize/dequantize_per_tensor over the dtype's full range."""
    _x, scale, zero_point, quant_min, quant_max, dtype = node.args[:6]
    if not isinstance(dtype, torch.dtype) or dtype not in QUANT_RANGES:
        raise Unsupported(f"quantized dtype {dtype}")
    if (quant_min, quant_max) != QUANT_RANGES[dtype]:
        raise Unsupported(f"quantization range [{quant_min}, {quant_max}] narrower than {dtype}")
    if not isinstance(scale, float) or not isinstance(zero_point, int) or not scale > 0:
        raise Unsupported("quantization with tensor or non-positive scale")
    return scale, zero_point, dtype


def lower_quantize(ctx: LoweringContext, node: Node) -> None:
    scale, zero_point, dtype = per_tensor_params(node)
    src = ctx.value(node.args[0])
    if ctx.dtype(src) != DType.F32:
        raise Unsupported("quantize of a non-fp32 tensor")
    dst = ctx.output(node, {dtype})
    ctx.emit(StepKind.REORDER, [src], [dst], {"dst_zero_point": [zero_point]}, {"dst_scale": [scale]})


def lower_dequantize(ctx: LoweringContext, node: Node) -> None:
    scale, zero_point, _dtype = per_tensor_params(node)
    if node.kwargs.get("out_dtype") not in (None, torch.float32):
        raise Unsupported("dequantize to a type other than fp32")
    src = ctx.value(node.args[0])
    if ctx.dtype(src) not in (DType.U8, DType.S8):
        raise Unsupported("dequantize of a non-int8 tensor")
    dst = ctx.output(node)
    ctx.emit(StepKind.REORDER, [src], [dst], {"src_zero_point": [zero_point]}, {"src_scale": [scale]})


def quantized_outputs_stay_inside(node: Node, supported: Callable[[Node], bool]) -> str | None:
    if not all(supported(user) for user in node.users):
        return f"{node.name}: int8 results may not leave the delegate"
    return None


@dataclass(frozen=True)
class Int8Operands:
    src: int  # the u8/s8 activation, read before its dequantize
    weights: int  # s8 constant
    ints: dict[str, list[int]]
    floats: dict[str, list[float]]


@dataclass(frozen=True)
class Int8Pattern:
    activation: object  # the u8/s8 tensor the activation's dequantize reads
    data: torch.Tensor  # the s8 weights as quantized (possibly fake: the partitioner's checks)
    weight_scales: list[float]
    src_scale: float
    src_zero_point: int


def int8_pattern(ctx: LoweringContext, x: object, w: object, output_axis: int) -> Int8Pattern | None:
    """dequantize_per_tensor(x_q) and a dequantize of constant s8 weights (symmetric; per tensor, or per
    channel along the weight's output-channel axis): the int8 operands of one primitive, read without
    touching the payload; None when the operands are not that pattern (the op then runs in fp32 on the
    dequantized values, which is exact too)."""
    if not _is(x, qd.dequantize_per_tensor.default):
        return None
    weight_dtype = getattr(w, "kwargs", {}).get("out_dtype")
    if x.kwargs.get("out_dtype") not in (None, torch.float32) or weight_dtype not in (None, torch.float32):
        return None
    weights = _int8_weights(ctx, w, output_axis)
    if weights is None:
        return None
    data, weight_scales = weights
    scale, zero_point, _dtype = per_tensor_params(x)
    return Int8Pattern(x.args[0], data, weight_scales, scale, zero_point)


def _int8_weights(ctx: LoweringContext, w: object, output_axis: int) -> tuple[torch.Tensor, list[float]] | None:
    """(s8 data, one scale per output channel) of a dequantized constant weight, or None."""
    if _is(w, qd.dequantize_per_channel.default):
        w_q, scales, zero_points, axis, quant_min, _quant_max, w_dtype = w.args[:7]
        data, scales, zero_points = (ctx.constant_node_data(n) for n in (w_q, scales, zero_points))
        if data is None or scales is None or zero_points is None or axis != output_axis:
            return None
    elif _is(w, qd.dequantize_per_tensor.default):
        w_q, scale, zero_point, quant_min, _quant_max, w_dtype = w.args[:6]
        data = ctx.constant_node_data(w_q)
        if data is None or data.dim() <= output_axis or not isinstance(scale, float) or not isinstance(zero_point, int):
            return None
        scales = torch.full((data.shape[output_axis],), scale, dtype=torch.float64)
        zero_points = torch.tensor([zero_point])
    else:
        return None
    if w_dtype != torch.int8 or data.dtype != torch.int8 or not isinstance(quant_min, int) or quant_min < -128:
        return None
    if output_axis == 1 and data.dim() != 2:
        return None
    # The partitioner's checks see fake constants: their values are checked when lowering for real.
    fake = is_fake(zero_points) or is_fake(scales)
    if not fake and (bool(zero_points.any()) or not bool((scales > 0).all())):
        return None
    return data, [1.0] * scales.numel() if fake else scales.double().tolist()


def int8_operands(ctx: LoweringContext, x: object, w: object, output_axis: int = 0) -> Int8Operands | None:
    """The int8 pattern's activation and s8 weights as payload values. Weights quantized along axis 1
    (a [K, N] matrix, as addmm takes it) are stored transposed, [N, K], like a linear's."""
    pattern = int8_pattern(ctx, x, w, output_axis)
    if pattern is None:
        return None
    src = ctx.value(pattern.activation)
    data = pattern.data.t() if output_axis == 1 else pattern.data
    return Int8Operands(
        src,
        ctx.graph.add_constant(data.contiguous(), DType.S8),
        {"src_zero_point": [pattern.src_zero_point]} if pattern.src_zero_point else {},
        {"src_scale": [pattern.src_scale], "weight_scales": pattern.weight_scales},
    )


# The ops whose int8 lowering reads a dequantize_per_channel's s8 data directly: (activation index,
# weight index, the weight's output-channel axis).
INT8_WEIGHT_READERS = {
    aten.convolution.default: (0, 1, 0),
    aten.linear.default: (0, 1, 0),
    aten.addmm.default: (1, 2, 1),
    aten.mm.default: (0, 1, 1),
}


def lower_weight_dequantize(ctx: LoweringContext, node: Node) -> None:
    """A dequantize_per_channel too large to fold ahead of time (an LM head's f32 weights): taken when
    every user reads its s8 data as int8 weights, so that its f32 result is never needed."""
    for user in node.users:
        reader = INT8_WEIGHT_READERS.get(aten_op(user.target))
        if reader is None or user.args[reader[1]] is not node:
            raise Unsupported(f"{user.name} would need {node.name}'s dequantized weights")
        if int8_pattern(ctx, user.args[reader[0]], node, reader[2]) is None:
            raise Unsupported(f"{user.name} does not take {node.name} as int8 weights")


def every_user_taken(node: Node, supported: Callable[[Node], bool]) -> str | None:
    if not all(supported(user) for user in node.users):
        return f"{node.name}: a user left outside the delegate would need its dequantized weights"
    return None


# --- convolution and matmul -----------------------------------------------------------------------
def lower_convolution(ctx: LoweringContext, node: Node) -> None:
    x, w, b, stride, padding, dilation, transposed, output_padding = node.args[:8]
    int8 = None if transposed else int8_operands(ctx, x, w)
    if int8 is not None:
        src, weights = int8.src, int8.weights
    else:
        src, weights = ctx.value(x), ctx.value(w)
    bias = ctx.optional_value(b)
    rank = len(ctx.dims(src))
    if rank not in (3, 4, 5):
        raise Unsupported(f"convolution of rank {rank}")
    if ctx.constant(weights) is None:
        raise Unsupported("convolution weights must be constant")
    n = rank - 2
    strides, pad, dil = spatial(stride, n, "stride"), spatial(padding, n, "padding"), spatial(dilation, n, "dilation")
    out_pad = spatial(output_padding, n, "output_padding")
    if transposed:
        # output_padding widens the output on the right: negative right padding where it exceeds the
        # padding, which oneDNN's deconvolution takes (those rows get the bias alone, as in PyTorch).
        padding_r = [p - o for p, o in zip(pad, out_pad)]
        kind = StepKind.DECONVOLUTION
    else:
        if any(out_pad):
            raise Unsupported("output_padding on a forward convolution")
        padding_r, kind = pad, StepKind.CONVOLUTION
    groups = int_arg(node, 8, "groups")
    ints = {"strides": strides, "padding_l": pad, "padding_r": padding_r, "dilation": dil, "groups": [groups]}
    if int8 is None:
        ctx.emit(kind, [src, weights, bias], [ctx.output(node)], ints)
    else:
        ctx.emit(kind, [src, weights, bias], [ctx.output(node)], {**ints, **int8.ints}, int8.floats)


def emit_matmul(ctx: LoweringContext, node: Node, a: object, b: object, bias: object, transpose_b: bool) -> None:
    # int8: weights quantized per output feature, [N, K] for linear, [K, N] for addmm/mm (then stored as
    # [N, K], read transposed).
    int8 = int8_operands(ctx, a, b, output_axis=0 if transpose_b else 1)
    if int8 is not None:
        va, vb, transpose_b = int8.src, int8.weights, True
    else:
        va, vb = ctx.value(a), ctx.value(b)
    vbias = ctx.optional_value(bias)
    out_dims = ctx.dims_of(node)
    if len(ctx.dims(va)) < 2 or len(ctx.dims(vb)) < 2 or len(out_dims) < 2:
        raise Unsupported("matmul operands and result must have rank >= 2")
    if vbias is not None and len(ctx.dims(vbias)) > len(out_dims):
        raise Unsupported("matmul bias of higher rank than the result")
    ints = {"transpose_b": [int(transpose_b)]}
    if int8 is None:
        ctx.emit(StepKind.MATMUL, [va, vb, vbias], [ctx.output(node)], ints)
    else:
        ctx.emit(StepKind.MATMUL, [va, vb, vbias], [ctx.output(node)], {**ints, **int8.ints}, int8.floats)


def lower_linear(ctx: LoweringContext, node: Node) -> None:
    from .affine import emit_compressed_linear  # affine.py builds on this module's OpRule

    if emit_compressed_linear(ctx, node, node.args[0], node.args[1], arg(node, 2, "bias")):
        return
    emit_matmul(ctx, node, node.args[0], node.args[1], arg(node, 2, "bias"), transpose_b=True)


def lower_addmm(ctx: LoweringContext, node: Node) -> None:
    if arg(node, 3, "beta", 1) != 1 or arg(node, 4, "alpha", 1) != 1:
        raise Unsupported("addmm with alpha or beta other than 1")
    emit_matmul(ctx, node, node.args[1], node.args[2], node.args[0], transpose_b=False)


def lower_mm(ctx: LoweringContext, node: Node) -> None:
    emit_matmul(ctx, node, node.args[0], node.args[1], None, transpose_b=False)


# --- normalization, softmax -----------------------------------------------------------------------
def lower_batch_norm(ctx: LoweringContext, node: Node) -> None:
    x, weight, bias, mean, var = node.args[:5]
    src = ctx.value(x)
    if len(ctx.dims(src)) < 2:
        raise Unsupported("batch norm needs a channel dim")
    stats = [ctx.value(mean), ctx.value(var)]
    if any(ctx.constant(v) is None for v in stats):
        raise Unsupported("batch norm statistics must be constant")
    inputs = [src, *stats, ctx.optional_value(weight), ctx.optional_value(bias)]
    ctx.emit(StepKind.BATCH_NORM, inputs, [ctx.output(node)], floats={"eps": [float_arg(node, 6, "eps")]})


def lower_layer_norm(ctx: LoweringContext, node: Node) -> None:
    x, weight, bias = node.args[0], node.args[2], node.args[3]
    if len(list_arg(node, 1, "normalized_shape")) != 1:  # its items may be sizes of dynamic dims
        raise Unsupported("layer norm over more than the last dim")
    inputs = [ctx.value(x), ctx.optional_value(weight), ctx.optional_value(bias)]
    ctx.emit(StepKind.LAYER_NORM, inputs, [ctx.output(node)], floats={"eps": [float_arg(node, 4, "eps")]})


def softmax_rule(log: bool) -> OpRule:
    def lower(ctx: LoweringContext, node: Node) -> None:
        if node.args[2]:
            raise Unsupported("softmax with half_to_float")
        src = ctx.value(node.args[0])
        axis = normalize_dim(int_arg(node, 1, "dim"), len(ctx.dims(src)))
        ctx.emit(StepKind.SOFTMAX, [src], [ctx.output(node)], {"axis": [axis], "log": [int(log)]})

    return OpRule(lower)


# --- safe softmax: the fully-masked-row guard of decomposed attention ----------------------------
# where(logical_not(any(logical_not(eq(x, -inf)), dim)), full_like(s, 0), s) with s = softmax(x, dim):
# one SOFTMAX step that zeroes rows whose inputs are all -inf. The guard's boolean nodes lower to
# nothing; they are claimed only as part of the whole pattern.
@dataclass(frozen=True)
class SafeSoftmax:
    where: Node
    softmax: Node
    members: frozenset[Node]


def _is(node: object, target: object) -> TypeGuard[Node]:
    return isinstance(node, Node) and node.op == "call_function" and aten_op(node.target) == target


def match_safe_softmax(where: Node) -> SafeSoftmax | None:
    if not _is(where, aten.where.self) or len(where.args) != 3:
        return None
    keep_zero, fill, softmax = where.args
    if not (_is(softmax, aten._softmax.default) and _is(fill, aten.full_like.default) and fill.args[1:] == (0,)):
        return None
    if not (_is(keep_zero, aten.logical_not.default) and _is(keep_zero.args[0], aten.any.dim)):
        return None
    any_unmasked = keep_zero.args[0]
    unmasked = any_unmasked.args[0]
    if not (_is(unmasked, aten.logical_not.default) and _is(unmasked.args[0], aten.eq.Scalar)):
        return None
    is_masked = unmasked.args[0]
    x = node_arg(softmax, 0, "self")
    if is_masked.args != (x, -math.inf) or fill.args[0] is not softmax:
        return None
    rank = len(fake_tensor(x).shape)
    guarded_dim, dim = int_arg(any_unmasked, 1, "dim"), int_arg(softmax, 1, "dim")
    if normalize_dim(guarded_dim, rank) != normalize_dim(dim, rank) or not bool_arg(any_unmasked, 2, "keepdim", False):
        return None
    owners = {softmax: {fill, where}, fill: {where}, keep_zero: {where}, any_unmasked: {keep_zero}}
    owners |= {unmasked: {any_unmasked}, is_masked: {unmasked}}
    if any(set(node.users) != users for node, users in owners.items()):
        return None
    return SafeSoftmax(where, softmax, frozenset({fill, keep_zero, any_unmasked, unmasked, is_masked}))


def lower_safe_softmax(ctx: LoweringContext, node: Node, pattern: SafeSoftmax) -> None:
    """The `where` that zeroes a softmax's fully-masked rows: the SOFTMAX step does it."""
    probabilities = ctx.value(pattern.softmax)
    for step in ctx.graph.steps:
        if probabilities in step.outputs and step.kind == StepKind.SOFTMAX:
            step.ints["zero_fully_masked_rows"] = [1]
    ctx.alias(node, probabilities)


def in_safe_softmax(node: Node, supported: Callable[[Node], bool]) -> str | None:
    """Guard nodes are taken only inside a complete safe-softmax pattern whose `where` is taken too."""
    frontier, seen = [node], set()
    while frontier:
        current = frontier.pop()
        seen.add(current)
        pattern = match_safe_softmax(current)
        if pattern is not None and node in pattern.members and supported(pattern.where):
            return None
        frontier.extend(user for user in current.users if user not in seen and len(seen) < 8)
    return f"{node.name} is taken only as part of a softmax's fully-masked-row guard"


def lower_nothing(ctx: LoweringContext, node: Node) -> None:
    """Consumed by the pattern that contains it."""


SAFE_SOFTMAX_GUARD = OpRule(lower_nothing, compute=False, users_ok=in_safe_softmax)


# A dynamic program's size arithmetic (x.shape[0] * 3 for a view): the runtime takes every dim from
# the node's own sizes, so it computes nothing; it is taken with its users so that the delegate
# never receives a SymInt.
def size_users_taken(node: Node, supported: Callable[[Node], bool]) -> str | None:
    if all(supported(user) for user in node.users):
        return None
    return f"{node.name}: a size an undelegated op needs (the delegate then receives it as an argument)"


SIZE_ARITHMETIC = OpRule(lower_nothing, compute=False, users_ok=size_users_taken)


# --- pooling and reductions -----------------------------------------------------------------------
def emit_pooling(
    ctx: LoweringContext, node: Node, alg: PoolingAlg, kernel: object, stride: object, padding: object, dilation: object
) -> None:
    src = ctx.value(node.args[0])
    in_dims, out_dims = ctx.dims(src), ctx.dims_of(node)
    n = len(in_dims) - 2
    if n not in (2, 3):
        raise Unsupported(f"pooling of a {len(in_dims)}d input (2d pooling takes 4d, 3d pooling 5d)")
    k = spatial(kernel, n, "kernel_size")
    s = spatial(stride, n, "stride") if stride else k
    pad_l, dil = spatial(padding, n, "padding"), spatial(dilation, n, "dilation")

    def right_padding() -> list[int]:
        # ceil_mode shows up as extra padding on the right, derived from the exported output size.
        pad_r = [
            (o - 1) * st + (kk - 1) * d + 1 - i - p
            for o, st, kk, d, i, p in zip(out_dims[2:], s, k, dil, in_dims[2:], pad_l)
        ]
        # Floor mode may leave the last input rows unread (pad_r < 0); oneDNN floors its output size
        # too, so pad_r = 0 gives the same windows whenever the shortfall is less than one stride.
        pad_r = [0 if -st < p < 0 else p for p, st in zip(pad_r, s)]
        if min(pad_r) < 0:
            raise Unsupported("pooling window does not reach the input's end")
        return pad_r

    pad_r = right_padding()
    if alg == PoolingAlg.AVG_INCLUDE_PADDING and pad_r != pad_l:
        # PyTorch counts the padding but not ceil_mode's extension past it, which oneDNN counts too:
        # the padding becomes zeros of the input, averaged excluding the extension.
        padded = ctx.new_value((*in_dims[:2], *(i + 2 * p for i, p in zip(in_dims[2:], pad_l))), ctx.dtype(src))
        ctx.emit(
            StepKind.PAD, [src], [padded], {"pad_front": [0, 0, *pad_l], "pad_back": [0, 0, *pad_l]}, {"value": [0.0]}
        )
        src, in_dims, pad_l, alg = padded, ctx.dims(padded), [0] * n, PoolingAlg.AVG_EXCLUDE_PADDING
        pad_r = right_padding()
    ints = {"alg": [alg], "kernel": k, "strides": s, "padding_l": pad_l, "padding_r": pad_r, "dilation": dil}
    ctx.emit(StepKind.POOLING, [src], [ctx.output(node)], ints)


def lower_max_pool(ctx: LoweringContext, node: Node) -> None:
    emit_pooling(
        ctx,
        node,
        PoolingAlg.MAX,
        node.args[1],
        arg(node, 2, "stride", []),
        arg(node, 3, "padding", 0),
        arg(node, 4, "dilation", 1),
    )


def lower_avg_pool(ctx: LoweringContext, node: Node) -> None:
    if arg(node, 6, "divisor_override") is not None:
        raise Unsupported("avg pool with divisor_override")
    include = arg(node, 5, "count_include_pad", True)
    alg = PoolingAlg.AVG_INCLUDE_PADDING if include else PoolingAlg.AVG_EXCLUDE_PADDING
    emit_pooling(ctx, node, alg, node.args[1], arg(node, 2, "stride", []), arg(node, 3, "padding", 0), 1)


def adaptive_pool_rule(alg: PoolingAlg) -> OpRule:
    """Adaptive pooling: a plain pooling when the output size divides the input's (equal windows),
    else an ADAPTIVE_POOLING step."""

    def lower(ctx: LoweringContext, node: Node) -> None:
        in_dims, out_dims = ctx.dims(ctx.value(node.args[0])), ctx.dims_of(node)
        if not 3 <= len(in_dims) <= 5:
            raise Unsupported(f"adaptive pooling of a {len(in_dims)}d input")
        if any(i % o for i, o in zip(in_dims[2:], out_dims[2:])):  # windows of unequal sizes: on the host
            src = ctx.value(node.args[0])
            ctx.emit(StepKind.ADAPTIVE_POOLING, [src], [ctx.output(node)], {"alg": [alg]})
            return
        kernel = [i // o for i, o in zip(in_dims[2:], out_dims[2:])]
        emit_pooling(ctx, node, alg, kernel, kernel, 0, 1)

    return OpRule(lower, users_ok=only_first_output_used if alg == PoolingAlg.MAX else None)


def reduction_rule(alg: ReductionAlg, has_dtype: bool) -> OpRule:
    def lower(ctx: LoweringContext, node: Node) -> None:
        src = ctx.value(node.args[0])
        in_dims = ctx.dims(src)
        dims = arg(node, 1, "dim")
        keepdim = arg(node, 2, "keepdim", False)
        dtype = arg(node, 3, "dtype") if has_dtype else None
        if dtype is not None and dtype != fake_tensor(node_arg(node, 0, "self")).dtype:
            raise Unsupported("reduction to another dtype than its input's")
        every_dim = set(range(len(in_dims)))
        reduced = {normalize_dim(d, len(in_dims)) for d in ints_arg(node, 1, "dim")} if dims else every_dim
        kept = tuple(1 if i in reduced else d for i, d in enumerate(in_dims))
        reduced_value = ctx.output(node) if keepdim else ctx.new_value(kept, ctx.dtype(src))
        if alg == ReductionAlg.MEAN and len(in_dims) == 4 and reduced == {2, 3}:
            # Global average pooling: oneDNN has fast pooling kernels for every layout, while its
            # reduction falls back to reference code on the blocked layouts convolutions leave.
            window = list(in_dims[2:])
            ints = {"alg": [PoolingAlg.AVG_EXCLUDE_PADDING], "kernel": window, "strides": window}
            ints |= {"padding_l": [0, 0], "padding_r": [0, 0], "dilation": [1, 1]}
            ctx.emit(StepKind.POOLING, [src], [reduced_value], ints)
        elif kept == tuple(in_dims):  # only size-1 dims: the values themselves (oneDNN refuses it)
            ctx.emit(StepKind.RESHAPE, [src], [reduced_value])
        else:
            ctx.emit(StepKind.REDUCTION, [src], [reduced_value], {"alg": [alg]})
        if not keepdim:
            ctx.emit(StepKind.RESHAPE, [reduced_value], [ctx.output(node)])

    return OpRule(lower)


# --- layout-only ops (folded ahead of time when their input is constant) --------------------------
def layout_rule(permutation: Callable[[Node, int], list[int]] | None = None) -> OpRule:
    def lower(ctx: LoweringContext, node: Node) -> None:
        src = ctx.value(node.args[0])
        out_dims = ctx.dims_of(node)
        data = ctx.constant(src)
        perm = permutation(node, len(ctx.dims(src))) if permutation else None
        if data is not None:
            ctx.fold(node, (data.permute(perm) if perm else data).reshape(out_dims).contiguous())
        elif perm is not None and perm != list(range(len(perm))):
            ctx.emit(StepKind.REORDER, [src], [ctx.output(node)], {"permutation": perm})
        else:
            ctx.emit(StepKind.RESHAPE, [src], [ctx.output(node)])

    return OpRule(lower, compute=False)


def permute_dims(node: Node, rank: int) -> list[int]:
    return [normalize_dim(d, rank) for d in ints_arg(node, 1, "dims")]


def transpose_dims(node: Node, rank: int) -> list[int]:
    perm = list(range(rank))
    a, b = normalize_dim(int_arg(node, 1, "dim0"), rank), normalize_dim(int_arg(node, 2, "dim1"), rank)
    perm[a], perm[b] = perm[b], perm[a]
    return perm


def weights_cast_users_taken(node: Node, supported: Callable[[Node], bool]) -> str | None:
    """A cast of int8 weights has no value of its own: every linear reading it must be delegated too."""
    from .affine import every_user_taken, int8_weights_cast

    return None if int8_weights_cast(node) is None else every_user_taken(node, supported)


def lower_dim_order_copy(ctx: LoweringContext, node: Node) -> None:
    from .affine import reads_through_cast  # affine.py builds on this module's OpRule

    if reads_through_cast(ctx, node):
        return  # int8 weights: their linear layers read them compressed
    dim_order = node.kwargs.get("dim_order")
    rank = len(ctx.dims_of(node))
    if dim_order not in (None, list(range(rank))):
        raise Unsupported("copy that changes the dim order")
    if node.kwargs.get("memory_format") not in (None, torch.preserve_format, torch.contiguous_format):
        raise Unsupported(f"copy to {node.kwargs['memory_format']}")
    data = ctx.constant_node_data(node.args[0])
    target = fake_tensor(node).dtype
    if data is not None and target in SUPPORTED_DTYPES:
        ctx.fold(node, data.to(target).reshape(ctx.dims_of(node)))
        return
    src = ctx.value(node.args[0])
    if TORCH_TO_DTYPE.get(target) != ctx.dtype(src):
        node_dtype(node)  # refuses types the runtime lacks
        ctx.emit(StepKind.REORDER, [src], [ctx.output(node)])  # a cast: REORDER writes dst's type
        return
    layout_rule().lower(ctx, node)


# An expand read by other steps than binaries is materialized as copies of its source along each
# expanded dim: a concat of up to this many (grouped-query attention's keys and values: 2-8 copies),
# else a gather of row 0 (a concat's primitive takes long to build for many inputs).
MAX_EXPAND_COPIES = 64


def expanded_axes(node: Node) -> list[tuple[int, int]] | None:
    """(axis, count) of every dim `node` expands from 1 to a static count (new leading dims count as
    expanded from 1), or None when it does anything else."""
    source = node.args[0]
    if not isinstance(source, Node):
        return None
    after = fake_tensor(node).shape
    before = (1,) * (len(after) - len(fake_tensor(source).shape)) + tuple(fake_tensor(source).shape)
    axes = []
    for axis, (a, b) in enumerate(zip(before, after)):
        if str(a) == str(b):
            continue
        if str(a) != "1" or not isinstance(b, int) or b < 2:
            return None
        axes.append((axis, b))
    return axes


def broadcast_by_users(node: Node) -> bool:
    return all(aten_op(user.target) in BINARY for user in node.users)


def expands_nothing(node: Node) -> bool:
    source = node.args[0]
    return isinstance(source, Node) and same_sizes(fake_tensor(source).shape, fake_tensor(node).shape)


def lower_expand(ctx: LoweringContext, node: Node) -> None:
    src = ctx.value(node.args[0])
    data = ctx.constant(src)
    if data is not None:
        ctx.fold(node, data.expand(ctx.dims_of(node)).contiguous())
    elif expands_nothing(node) or broadcast_by_users(node):
        ctx.alias(node, src)  # the consuming binary steps broadcast the unexpanded operand themselves
    else:
        emit_broadcast_copy(ctx, src, node, ctx.output(node))


def broadcasts_between_kept_dims(src1: Sequence[int], dst: Sequence[int]) -> bool:
    """Whether `src1` broadcasts a dim that lies between two dims it keeps (of size > 1), as a rotary
    table [1, S, 1, D] does over a query's heads [1, S, H, D]: oneDNN has no jit binary kernel for that
    pattern (its reference loop: 0.9 ms for 1x128x8x32 on the AMX Xeon), so the operand is copied to
    full size first (microseconds). [N, 1, 1, W] against [N, C, H, W] is a pattern oneDNN has."""
    # A dynamic dim counts as kept at every size, so that the decision is the same at all of them.
    kept = [axis for axis, (a, b) in enumerate(zip(src1, dst)) if same(a, b) and (isinstance(b, SymDim) or b != 1)]
    widened = [axis for axis, (a, b) in enumerate(zip(src1, dst)) if not same(a, b)]
    if not kept or kept == [0, len(dst) - 1]:
        return False
    return any(kept[0] < axis < kept[-1] for axis in widened)


def emit_broadcast_copy(ctx: LoweringContext, src: int, node: Node, dst: int | None = None) -> int:
    """`src` broadcast to `node`'s static dims as a copy: left-padded with 1s, then copied along each
    widened dim in turn (see MAX_EXPAND_COPIES). Returns the copy."""
    out_dims = ctx.dims_of(node)
    dims = list(left_pad(ctx.dims(src), len(out_dims)))
    axes = [(axis, count) for axis, (size, count) in enumerate(zip(dims, out_dims)) if size != count]
    shape = fake_tensor(node).shape
    if any(dims[a] != 1 or not isinstance(shape[a], int) or n < 2 for a, n in axes):
        raise Unsupported(f"broadcasting {ctx.dims(src)} to {out_dims} as copies: static counts only")
    if tuple(dims) != ctx.dims(src):
        padded = dst if dst is not None and not axes else ctx.new_value(tuple(dims), ctx.dtype(src))
        ctx.emit(StepKind.RESHAPE, [src], [padded])
        src = padded
    for index, (axis, count) in enumerate(axes):
        dims[axis] = count
        last = index == len(axes) - 1
        copy = dst if dst is not None and last else ctx.new_value(tuple(dims), ctx.dtype(src))
        if count <= MAX_EXPAND_COPIES:
            ctx.emit(StepKind.CONCAT, [src] * count, [copy], {"axis": [axis]})
        else:  # a concat of that many inputs would be slow to build: gather index 0 `count` times
            zeros = ctx.graph.add_constant(torch.zeros(count, dtype=torch.int64), DType.S64)
            ctx.emit(StepKind.GATHER, [src, zeros], [copy], {"axis": [axis]})
        src = copy
    if dst is not None and src != dst:
        ctx.emit(StepKind.RESHAPE, [src], [dst])
    return src if dst is None else dst


def expand_users_ok(node: Node, supported: Callable[[Node], bool]) -> str | None:
    if expands_nothing(node):
        return None
    if broadcast_by_users(node) and all(supported(u) for u in node.users):
        return None
    if not broadcast_by_users(node) and expanded_axes(node) is not None:
        return None
    return "expand is taken only when all its users are delegated binary ops that broadcast, or as copies"


# --- concat, pad, resampling ----------------------------------------------------------------------
def lower_cat(ctx: LoweringContext, node: Node) -> None:
    sources = [ctx.value(x) for x in list_arg(node, 0, "tensors")]
    out_dims = ctx.dims_of(node)
    axis = normalize_dim(int_arg(node, 1, "dim", 0), len(out_dims))
    if any(len(ctx.dims(s)) != len(out_dims) for s in sources):
        raise Unsupported("cat of tensors of different ranks")
    ctx.emit(StepKind.CONCAT, sources, [ctx.output(node)], {"axis": [axis]})


def lower_constant_pad(ctx: LoweringContext, node: Node) -> None:
    src = ctx.value(node.args[0])
    # A pad computed from dynamic sizes (to a multiple of a window) follows them.
    pad = [ctx.size(amount) for amount in list_arg(node, 1, "pad")]
    value = float_arg(node, 2, "value", 0.0)
    rank = len(ctx.dims(src))
    if len(pad) % 2 or len(pad) > 2 * rank or min(pad, default=0) < 0:
        raise Unsupported(f"constant pad {pad}")
    front, back = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):
        front[rank - 1 - i], back[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    ctx.emit(StepKind.PAD, [src], [ctx.output(node)], {"pad_front": front, "pad_back": back}, {"value": [value]})


def resampling_rule(alg: ResamplingAlg) -> OpRule:
    def lower(ctx: LoweringContext, node: Node) -> None:
        src = ctx.value(node.args[0])
        in_dims, out_dims = ctx.dims(src), ctx.dims_of(node)
        if alg == ResamplingAlg.LINEAR and arg(node, 2, "align_corners", False):
            raise Unsupported("bilinear upsampling with align_corners=True")
        scales_at = (3 if alg == ResamplingAlg.LINEAR else 2, "scale_factors")
        scales = None if arg(node, *scales_at) is None else floats_arg(node, *scales_at)
        if scales is not None and any(o != i * s for i, o, s in zip(in_dims[2:], out_dims[2:], scales)):
            raise Unsupported("upsampling whose scale factor does not give the output size exactly")
        if alg == ResamplingAlg.NEAREST and any(o % i for i, o in zip(in_dims[2:], out_dims[2:])):
            raise Unsupported("nearest upsampling by a non-integer factor")
        ctx.emit(StepKind.RESAMPLING, [src], [ctx.output(node)], {"alg": [alg]})

    return OpRule(lower)


def lower_getitem(ctx: LoweringContext, node: Node) -> None:
    source, index = node.args
    if not isinstance(source, Node) or not isinstance(index, int):
        raise Unsupported("getitem of a non-tensor result")
    if source not in ctx.node_values and source not in ctx.multi_values:
        # Checked on its own: it is supported when its source lowers.
        from . import rule_for  # every table's rules, merged in __init__.py

        rule = rule_for(source)
        if rule is None:
            raise Unsupported(f"getitem of {source.target}")
        rule.lower(ctx, source)
        if rule.pattern_member:
            return
    if source in ctx.multi_values:
        ctx.alias(node, ctx.multi_values[source][index])
    elif index == 0:
        ctx.alias(node, ctx.value(source))
    else:
        raise Unsupported("only the first output of this op")


# --- slicing: a reorder reading a block of the source ---------------------------------------------
def emit_slice(ctx: LoweringContext, src: int, dim: int, start: int, length: int) -> int:
    if any(isinstance(size, SymDim) and is_read_from_data(size) for size in (start, length)):
        # The runtime reads every size from an input's dims; a value read from a tensor (`.item()`,
        # e.g. a decode position) is in none of them.
        raise Unsupported(f"slice at {start}, {length} long: a position read from tensor data")
    dims = list(ctx.dims(src))
    if same(start, 0) and same(length, dims[dim]):
        return src
    offsets = [0] * len(dims)
    offsets[dim], dims[dim] = start, length
    data = ctx.constant(src)
    # A block of a constant at a place known only at run time (a position table indexed by the decode
    # position) is a step; a SymDim is an int, so narrow() would fold it at one size.
    if data is not None and not isinstance(start, SymDim) and not isinstance(length, SymDim):
        return ctx.graph.add_constant(data.narrow(dim, start, length).contiguous(), ctx.dtype(src))
    block = ctx.new_value(tuple(dims), ctx.dtype(src))
    ctx.emit(StepKind.REORDER, [src], [block], {"offsets": offsets})
    return block


def define_reshaped(ctx: LoweringContext, node: Node, value: int) -> None:
    """The node's result is `value` with the node's dims (free for plain activations)."""
    out_dims = ctx.dims_of(node)
    data = ctx.constant(value)
    if same_dims(ctx.dims(value), out_dims):
        ctx.alias(node, value)
    elif data is not None:
        ctx.fold(node, data.reshape(out_dims))
    else:
        ctx.emit(StepKind.RESHAPE, [value], [ctx.output(node)])


def lower_select(ctx: LoweringContext, node: Node) -> None:
    src = ctx.value(node.args[0])
    dims = ctx.dims(src)
    dim = normalize_dim(int_arg(node, 1, "dim"), len(dims))
    index = node.args[2]
    if not isinstance(index, int) or not -dims[dim] <= index < dims[dim]:
        raise Unsupported(f"select index {index!r}")
    define_reshaped(ctx, node, emit_slice(ctx, src, dim, index + dims[dim] if index < 0 else index, 1))


def lower_slice(ctx: LoweringContext, node: Node) -> None:
    src = ctx.value(node.args[0])
    dims = ctx.dims(src)
    dim = normalize_dim(int_arg(node, 1, "dim", 0), len(dims))
    step = arg(node, 4, "step", 1)
    start, end = (ctx.size(arg(node, 2, "start")), ctx.size(arg(node, 3, "end")))

    def clamp(bound: int | None, default: int) -> int:  # Python's slice rules, at every size
        # A static bound past the dim at its largest is past it at every size.
        if bound is None or (not isinstance(bound, SymDim) and bound >= dims[dim] and default != 0):
            return default
        return smallest(largest(bound + dims[dim] if bound < 0 else bound, 0), dims[dim])

    begin = clamp(start, 0)
    stop = largest(clamp(end, dims[dim]), begin)
    if step == 1:
        define_reshaped(ctx, node, emit_slice(ctx, src, dim, begin, stop - begin))
        return
    if isinstance(begin, SymDim) or isinstance(stop, SymDim):
        define_reshaped(ctx, node, emit_every_step_th(ctx, src, dim, begin, stop, step))
        return
    if not (isinstance(step, int) and isinstance(begin, int) and isinstance(stop, int) and stop > begin):
        raise Unsupported("slice with a step: static, non-empty bounds only")
    picked = ctx.graph.add_constant(torch.arange(begin, stop, step), DType.S64)  # every step-th row
    ctx.emit(StepKind.GATHER, [src, picked], [ctx.output(node)], {"axis": [dim]})


def emit_every_step_th(ctx: LoweringContext, src: int, dim: int, begin: int, stop: int, step: object) -> int:
    """Rows begin, begin + step, ... of a dynamic dim (a constant list of rows cannot follow its size):
    the dim split into (rows // step, step), then one column of that."""
    dims = ctx.dims(src)
    rows = dims[dim]
    if not (isinstance(step, int) and not isinstance(begin, SymDim) and 0 <= begin < step and same(stop, rows)):
        raise Unsupported("slice with a step over a dynamic dim: only every step-th row of the whole dim")
    if not same(rows % step, 0):
        raise Unsupported(f"slice with a step over a dynamic dim: {rows!r} is not a multiple of {step} at every size")
    split = ctx.new_value((*dims[:dim], rows // step, step, *dims[dim + 1 :]), ctx.dtype(src))
    ctx.emit(StepKind.RESHAPE, [src], [split])
    return emit_slice(ctx, split, dim + 1, begin, 1)


def lower_split_with_sizes(ctx: LoweringContext, node: Node) -> None:
    src = ctx.value(node.args[0])
    dims = ctx.dims(src)
    sizes = ints_arg(node, 1, "split_sizes")
    dim = normalize_dim(int_arg(node, 2, "dim", 0), len(dims))
    if sum(sizes) != dims[dim] or min(sizes) < 1:
        raise Unsupported(f"split sizes {sizes} of dim {dims[dim]}")
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    parts = [emit_slice(ctx, src, dim, start, size) for start, size in zip(starts, sizes)]
    ctx.multi_values[node] = parts


OP_RULES: dict[object, OpRule] = {
    **{target: eltwise_rule(params) for target, params in ELTWISE.items()},
    **{target: binary_rule(alg) for target, alg in BINARY.items()},
    aten.pow.Tensor_Scalar: OpRule(lower_pow),
    aten.convolution.default: OpRule(lower_convolution),
    aten.linear.default: OpRule(lower_linear),
    aten.addmm.default: OpRule(lower_addmm),
    aten.mm.default: OpRule(lower_mm),
    aten.bmm.default: OpRule(lower_mm),
    aten._native_batch_norm_legit_no_training.default: OpRule(lower_batch_norm, users_ok=only_first_output_used),
    aten.native_layer_norm.default: OpRule(lower_layer_norm, users_ok=only_first_output_used),
    aten._softmax.default: softmax_rule(log=False),
    aten.any.dim: SAFE_SOFTMAX_GUARD,
    aten.full_like.default: SAFE_SOFTMAX_GUARD,
    aten._log_softmax.default: softmax_rule(log=True),
    aten.max_pool2d_with_indices.default: OpRule(lower_max_pool, users_ok=only_first_output_used),
    aten.max_pool3d_with_indices.default: OpRule(lower_max_pool, users_ok=only_first_output_used),
    aten.avg_pool2d.default: OpRule(lower_avg_pool),
    aten.avg_pool3d.default: OpRule(lower_avg_pool),
    aten._adaptive_avg_pool2d.default: adaptive_pool_rule(PoolingAlg.AVG_EXCLUDE_PADDING),
    aten._adaptive_avg_pool3d.default: adaptive_pool_rule(PoolingAlg.AVG_EXCLUDE_PADDING),
    aten.adaptive_max_pool2d.default: adaptive_pool_rule(PoolingAlg.MAX),
    aten.adaptive_max_pool3d.default: adaptive_pool_rule(PoolingAlg.MAX),
    aten.mean.dim: reduction_rule(ReductionAlg.MEAN, has_dtype=True),
    aten.sum.dim_IntList: reduction_rule(ReductionAlg.SUM, has_dtype=True),
    aten.amax.default: reduction_rule(ReductionAlg.MAX, has_dtype=False),
    aten.amin.default: reduction_rule(ReductionAlg.MIN, has_dtype=False),
    aten.cat.default: OpRule(lower_cat),
    aten.constant_pad_nd.default: OpRule(lower_constant_pad),
    aten.view_copy.default: layout_rule(),
    aten.squeeze_copy.dims: layout_rule(),
    aten.squeeze_copy.dim: layout_rule(),
    aten.squeeze_copy.default: layout_rule(),
    aten.unsqueeze_copy.default: layout_rule(),
    aten.clone.default: layout_rule(),
    aten.alias_copy.default: layout_rule(),
    aten.permute_copy.default: layout_rule(permute_dims),
    aten.transpose_copy.int: layout_rule(transpose_dims),
    aten.select_copy.int: OpRule(lower_select, compute=False),
    aten.slice_copy.Tensor: OpRule(lower_slice, compute=False),
    aten.split_with_sizes_copy.default: OpRule(lower_split_with_sizes, compute=False),
    aten.expand_copy.default: OpRule(lower_expand, compute=False, users_ok=expand_users_ok),
    torch.ops.dim_order_ops._to_dim_order_copy.default: OpRule(
        lower_dim_order_copy, compute=False, users_ok=weights_cast_users_taken
    ),
    torch.ops.dim_order_ops._clone_dim_order.default: OpRule(lower_dim_order_copy, compute=False),
    # What export_llm's edge programs hold instead (its LLMEdgeManager skips dim orders).
    aten._to_copy.default: OpRule(lower_dim_order_copy, compute=False, users_ok=weights_cast_users_taken),
    operator.getitem: OpRule(lower_getitem, compute=False),
    aten.sym_size.int: SIZE_ARITHMETIC,
    **dict.fromkeys((operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod), SIZE_ARITHMETIC),
    qd.quantize_per_tensor.default: OpRule(lower_quantize, users_ok=quantized_outputs_stay_inside),
    qd.dequantize_per_tensor.default: OpRule(lower_dequantize),
    qd.dequantize_per_channel.default: OpRule(lower_weight_dequantize, users_ok=every_user_taken),
}

# Ops that ExecuTorch's default decompositions would break apart, though the runtime runs them whole.
KEEP_WHOLE = [
    aten.linear.default,
    aten.hardswish.default,
    aten.hardsigmoid.default,
    aten.silu.default,
    aten.gelu.default,
    aten.leaky_relu.default,
    aten.elu.default,
]
