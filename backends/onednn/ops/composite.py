# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Ops with no oneDNN primitive of their own, lowered as a few existing steps with the same result."""

from __future__ import annotations

import math

import torch
from torch._subclasses.fake_tensor import is_fake
from torch.fx import Node

from ..serialization.schema import BinaryAlg, DType, EltwiseAlg, PostOpKind, ResamplingAlg, StepKind
from .arguments import arg, int_arg
from .context import LoweringContext, Unsupported
from .rules import OpRule, emit_eltwise, resampling_rule

aten = torch.ops.aten


def scaled_log_rule(scale: float) -> OpRule:
    """log2 and log10: the natural log times a constant (one post-op once fused)."""

    def lower(ctx: LoweringContext, node: Node) -> None:
        src = ctx.value(node.args[0])
        log = ctx.new_value(ctx.dims(src), ctx.dtype(src))
        emit_eltwise(ctx, src, log, EltwiseAlg.LOG, 0.0, 0.0)
        emit_eltwise(ctx, log, ctx.output(node), EltwiseAlg.LINEAR, scale, 0.0)

    return OpRule(lower)


def lower_prelu(ctx: LoweringContext, node: Node) -> None:
    """x if x > 0 else w * x, w shared or one per channel (dim 1)."""
    x, w = node.args[0], node.args[1]
    src, dst = ctx.value(x), ctx.output(node)
    weights = ctx.constant(ctx.value(w))
    if weights is None:
        raise Unsupported("prelu with a computed weight")
    dims = ctx.dims(src)
    if weights.numel() == 1:  # oneDNN's relu with a negative slope is exactly that
        slope = 0.25 if is_fake(weights) else float(weights.reshape(()))
        emit_eltwise(ctx, src, dst, EltwiseAlg.RELU, slope, 0.0)
        return
    if len(dims) < 2 or dims[1] != weights.numel():
        raise Unsupported(f"prelu with {weights.numel()} weights for input dims {dims}")
    # max(x, 0) + w * min(x, 0): each product is w * x or w * 0, so the sum is exact.
    per_channel = ctx.graph.add_constant(
        weights.reshape((1, -1) + (1,) * (len(dims) - 2)).float().contiguous(), DType.F32
    )
    positive, negative = ctx.new_value(dims, ctx.dtype(src)), ctx.new_value(dims, ctx.dtype(src))
    emit_eltwise(ctx, src, positive, EltwiseAlg.RELU, 0.0, 0.0)
    emit_eltwise(ctx, src, negative, EltwiseAlg.CLIP, -math.inf, 0.0)
    ctx.emit(
        StepKind.BINARY,
        [negative, per_channel, positive],
        [dst],
        {"alg": [BinaryAlg.MUL], "post_ops": [PostOpKind.BINARY, BinaryAlg.ADD]},
        {"post_op_params": [0.0, 0.0]},
    )


# Largest input height or width that align_corners=True bilinear upsampling takes: as matmuls by the
# interpolation matrices it costs H + W multiply-adds per output value, the direct kernel four.
MAX_INTERPOLATED_EXTENT = 128


def align_corners_weights(in_size: int, out_size: int) -> torch.Tensor:
    """[out, in] linear interpolation weights with align_corners=True, computed in f32 as PyTorch's
    upsample_bilinear2d kernel computes its lambdas."""
    if out_size > 1:
        scale = torch.tensor(in_size - 1, dtype=torch.float32) / torch.tensor(out_size - 1, dtype=torch.float32)
    else:
        scale = torch.tensor(0.0)
    source = scale * torch.arange(out_size, dtype=torch.float32)
    low = source.floor().long().clamp(max=in_size - 1)
    high = (low + 1).clamp(max=in_size - 1)
    high_weight = source - low.float()
    weights = torch.zeros(out_size, in_size, dtype=torch.float32)
    rows = torch.arange(out_size)
    weights[rows, low] += 1.0 - high_weight
    weights[rows, high] += high_weight
    return weights


def lower_upsample_bilinear(ctx: LoweringContext, node: Node) -> None:
    """oneDNN's linear resampling has no align_corners=True: there it is out = Wh @ x @ Ww^T."""
    if not arg(node, 2, "align_corners", False):
        RESAMPLE_BILINEAR.lower(ctx, node)
        return
    src = ctx.value(node.args[0])
    in_dims, out_dims = ctx.dims(src), ctx.dims_of(node)
    if len(in_dims) != 4 or max(in_dims[2:]) > MAX_INTERPOLATED_EXTENT:
        limit = MAX_INTERPOLATED_EXTENT
        raise Unsupported(f"bilinear align_corners=True of {in_dims}: 4d, at most {limit} rows and columns")
    (in_h, in_w), (out_h, out_w) = in_dims[2:], out_dims[2:]
    across = ctx.graph.add_constant(align_corners_weights(in_w, out_w), DType.F32)  # [OW, W]
    down = ctx.graph.add_constant(align_corners_weights(in_h, out_h), DType.F32)  # [OH, H]
    rows = ctx.new_value((*in_dims[:3], out_w), ctx.dtype(src))
    ctx.emit(StepKind.MATMUL, [src, across, None], [rows], {"transpose_b": [1]})
    ctx.emit(StepKind.MATMUL, [down, rows, None], [ctx.output(node)], {"transpose_b": [0]})


def lower_upsample_nearest(ctx: LoweringContext, node: Node) -> None:
    """oneDNN picks other source rows than PyTorch for a non-integer factor: two gathers instead, by
    the rows and columns PyTorch's own kernel picks (it upsamples a tensor of flat indices)."""
    src = ctx.value(node.args[0])
    in_dims, out_dims = ctx.dims(src), ctx.dims_of(node)
    if all(o % i == 0 for i, o in zip(in_dims[2:], out_dims[2:])):
        RESAMPLE_NEAREST.lower(ctx, node)
        return
    static = all(isinstance(d, int) for d in (*in_dims, *out_dims))
    if len(in_dims) != 4 or not static or math.prod(in_dims[2:]) > 1 << 24:  # flat indices exact in f32
        raise Unsupported("nearest upsampling by a non-integer factor: 4d, static sizes, <= 2^24 pixels")
    (in_h, in_w), (out_h, out_w) = in_dims[2:], out_dims[2:]
    flat = torch.arange(in_h * in_w, dtype=torch.float32).reshape(1, 1, in_h, in_w)
    picked = aten.upsample_nearest2d.vec(flat, *node.args[1:]).to(torch.int64)[0, 0]
    if tuple(picked.shape) != (out_h, out_w):
        raise Unsupported(f"nearest upsampling to {tuple(picked.shape)}, exported as {(out_h, out_w)}")
    rows = ctx.graph.add_constant(picked[:, 0] // in_w, DType.S64)
    columns = ctx.graph.add_constant(picked[0, :] % in_w, DType.S64)
    tall = ctx.new_value((*in_dims[:2], out_h, in_w), ctx.dtype(src))
    ctx.emit(StepKind.GATHER, [src, rows], [tall], {"axis": [2]})
    ctx.emit(StepKind.GATHER, [tall, columns], [ctx.output(node)], {"axis": [3]})


def lower_round_decimals(ctx: LoweringContext, node: Node) -> None:
    """PyTorch's order: round(x * 10^d) / 10^d, or round(x / 10^-d) * 10^-d for negative d, in f32."""
    decimals = int_arg(node, 1, "decimals", 0)
    src, dtype = ctx.value(node.args[0]), ctx.dtype(ctx.value(node.args[0]))
    dims = ctx.dims(src)
    power = float(torch.tensor(10.0 ** abs(decimals), dtype=torch.float32))
    power_value = ctx.graph.add_constant(torch.tensor([power]), DType.F32)
    scaled, rounded = ctx.new_value(dims, dtype), ctx.new_value(dims, dtype)
    if decimals >= 0:
        emit_eltwise(ctx, src, scaled, EltwiseAlg.LINEAR, power, 0.0)
    else:
        ctx.emit(StepKind.BINARY, [src, power_value], [scaled], {"alg": [BinaryAlg.DIV]})
    emit_eltwise(ctx, scaled, rounded, EltwiseAlg.ROUND, 0.0, 0.0)
    if decimals >= 0:
        ctx.emit(StepKind.BINARY, [rounded, power_value], [ctx.output(node)], {"alg": [BinaryAlg.DIV]})
    else:
        emit_eltwise(ctx, rounded, ctx.output(node), EltwiseAlg.LINEAR, power, 0.0)


# The cases oneDNN's resampling computes as PyTorch does.
RESAMPLE_BILINEAR = resampling_rule(ResamplingAlg.LINEAR)
RESAMPLE_NEAREST = resampling_rule(ResamplingAlg.NEAREST)

COMPOSITE_RULES: dict[object, OpRule] = {
    aten.log2.default: scaled_log_rule(1.0 / math.log(2.0)),
    aten.log10.default: scaled_log_rule(1.0 / math.log(10.0)),
    aten.prelu.default: OpRule(lower_prelu),
    aten.upsample_bilinear2d.vec: OpRule(lower_upsample_bilinear),
    aten.upsample_nearest2d.vec: OpRule(lower_upsample_nearest, compute=False),
    aten.round.decimals: OpRule(lower_round_decimals),
}
# Kept whole through ExecuTorch's decompositions (prelu would become where(x > 0, x, w * x)).
COMPOSITE_KEEP_WHOLE = [aten.prelu.default, aten.upsample_nearest2d.vec, aten.upsample_bilinear2d.vec]
