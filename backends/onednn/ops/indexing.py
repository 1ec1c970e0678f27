# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Ops on indices and masks (int64 and bool tensors), which oneDNN's CPU primitives do not take.

They lower to the runtime's host index steps: ARG_REDUCTION (argmax, argmin), GATHER (index_select,
embedding, indexing by one tensor), HOST_ELEMENTWISE (division with a rounding mode, comparisons,
where, logical and/or/xor/not, and maximum/minimum, which keep a NaN) and INDEX_PUT, each checking its
indices or divisors at run time.
"""

from __future__ import annotations

import torch
from torch.fx import Node

from ..serialization.schema import TORCH_TO_DTYPE, ArgReductionAlg, HostElementwiseAlg, StepKind
from .arguments import arg, bool_arg, int_arg, list_arg, node_arg
from .context import SUPPORTED_DTYPES, LoweringContext, Unsupported, fake_tensor, same_sizes
from .rules import OpRule, in_safe_softmax, lower_safe_softmax, match_safe_softmax, normalize_dim

aten = torch.ops.aten
INDICES = {torch.int64}
BOOLEAN = {torch.bool}
FLOAT_OR_INT64 = SUPPORTED_DTYPES | INDICES


def arg_reduction_rule(alg: ArgReductionAlg) -> OpRule:
    def lower(ctx: LoweringContext, node: Node) -> None:
        src = ctx.value(node.args[0])
        dim = None if arg(node, 1, "dim") is None else int_arg(node, 1, "dim")
        axis = [] if dim is None else [normalize_dim(dim, len(ctx.dims(src)))]
        ctx.emit(StepKind.ARG_REDUCTION, [src], [ctx.output(node, INDICES)], {"alg": [alg], "axis": axis})

    return OpRule(lower)


def emit_gather(ctx: LoweringContext, node: Node, data: object, indices: object, dim: int) -> None:
    src = ctx.value(data)
    index = ctx.value(indices, INDICES)
    axis = normalize_dim(dim, len(ctx.dims(src)))
    ctx.emit(StepKind.GATHER, [src, index], [ctx.output(node)], {"axis": [axis]})


def lower_index_select(ctx: LoweringContext, node: Node) -> None:
    indices = node_arg(node, 2, "index")
    if len(fake_tensor(indices).shape) > 1:
        raise Unsupported("index_select with indices of more than one dim")
    emit_gather(ctx, node, node.args[0], indices, int_arg(node, 1, "dim"))


def lower_embedding(ctx: LoweringContext, node: Node) -> None:
    # padding_idx, scale_grad_by_freq and sparse change only the gradient.
    weight = node_arg(node, 0, "weight")
    if len(fake_tensor(weight).shape) != 2:
        raise Unsupported("embedding with a weight of rank other than 2")
    emit_gather(ctx, node, weight, node.args[1], 0)


def lower_index(ctx: LoweringContext, node: Node) -> None:
    """x[..., idx] with one index tensor and slices (None) before it: a gather along that dim."""
    indices = list_arg(node, 1, "indices")
    given = [i for i, index in enumerate(indices) if index is not None]
    if len(given) != 1 or given[0] != len(indices) - 1:
        raise Unsupported("indexing by more than one tensor, or with dims after the index")
    index = indices[given[0]]
    if not isinstance(index, Node):
        raise Unsupported(f"indexing by {index!r}")
    if fake_tensor(index).dtype != torch.int64:
        raise Unsupported(f"indexing by a {fake_tensor(index).dtype} tensor")
    emit_gather(ctx, node, node.args[0], index, given[0])


def lower_index_put(ctx: LoweringContext, node: Node) -> None:
    """x[:, ..., i0, i1, ...] = values (or += with accumulate): whole leading dims (a KV cache's batch
    and heads), then index tensors of one shape for the dims after them."""
    x, values = node_arg(node, 0, "self"), node_arg(node, 2, "values")
    accumulate = bool_arg(node, 3, "accumulate", False)
    index_list = list_arg(node, 1, "indices")
    sliced = next((k for k, index in enumerate(index_list) if index is not None), len(index_list))
    indices = [index for index in index_list[sliced:] if isinstance(index, Node)]
    if not indices or len(indices) != len(index_list) - sliced:
        raise Unsupported("index_put with a slice (None) after an index tensor, or without index tensors")
    first = fake_tensor(indices[0]).shape  # SymInts do not hash: compared by expression
    if not all(same_sizes(fake_tensor(index).shape, first) for index in indices[1:]):
        raise Unsupported("index_put with index tensors of different shapes")
    if fake_tensor(values).dtype != fake_tensor(x).dtype:
        raise Unsupported("index_put with values of another dtype")
    inputs = [ctx.value(x), ctx.value(values), *(ctx.value(index, INDICES) for index in indices)]
    attrs = {"accumulate": [int(accumulate)]} | ({"sliced": [sliced]} if sliced else {})
    ctx.emit(StepKind.INDEX_PUT, inputs, [ctx.output(node)], attrs)


def operand_pair(ctx: LoweringContext, node: Node) -> tuple[int, int]:
    """The call's two operands, of one dtype (float or int64) with no type promotion between them; a
    Python scalar second operand becomes a constant of the tensor's dtype, as PyTorch compares a tensor
    with a scalar."""
    a, b = node_arg(node, 0, "self"), node.args[1]
    tensor = fake_tensor(a)
    if tensor.dtype not in FLOAT_OR_INT64:
        raise Unsupported(f"{node.name}: operands of dtype {tensor.dtype}")
    first = ctx.value(a, FLOAT_OR_INT64)
    if isinstance(b, Node):
        if fake_tensor(b).dtype != tensor.dtype:
            raise Unsupported(f"{node.name}: operands of dtypes {tensor.dtype} and {fake_tensor(b).dtype}")
        return first, ctx.value(b, FLOAT_OR_INT64)
    if isinstance(b, bool) or not isinstance(b, (int, float)) or (tensor.dtype == torch.int64 and isinstance(b, float)):
        raise Unsupported(f"{node.name}: a scalar operand {b!r} of another type")
    return first, ctx.graph.add_constant(torch.tensor(b, dtype=tensor.dtype), TORCH_TO_DTYPE[tensor.dtype])


def comparison_rule(alg: HostElementwiseAlg) -> OpRule:
    def lower(ctx: LoweringContext, node: Node) -> None:
        a, b = operand_pair(ctx, node)
        ctx.emit(StepKind.HOST_ELEMENTWISE, [a, b], [ctx.output(node, BOOLEAN)], {"alg": [alg]})

    return OpRule(lower)


def extremum_rule(alg: HostElementwiseAlg) -> OpRule:
    """maximum and minimum on the host: oneDNN's binary max and min drop a NaN of one operand."""

    def lower(ctx: LoweringContext, node: Node) -> None:
        dtype = fake_tensor(node).dtype  # operand_pair checks that both operands have one dtype
        if not dtype.is_floating_point or fake_tensor(node_arg(node, 0, "self")).dtype != dtype:
            raise Unsupported(f"{node.name}: maximum/minimum of dtypes other than one float dtype")
        a, b = operand_pair(ctx, node)
        ctx.emit(StepKind.HOST_ELEMENTWISE, [a, b], [ctx.output(node, FLOAT_OR_INT64)], {"alg": [alg]})

    return OpRule(lower)


def logical_rule(alg: HostElementwiseAlg) -> OpRule:
    def lower(ctx: LoweringContext, node: Node) -> None:
        a, b = (ctx.value(operand, BOOLEAN) for operand in node.args[:2])
        ctx.emit(StepKind.HOST_ELEMENTWISE, [a, b], [ctx.output(node, BOOLEAN)], {"alg": [alg]})

    return OpRule(lower)


def lower_logical_not(ctx: LoweringContext, node: Node) -> None:
    """not x == x xor true."""
    src = ctx.value(node.args[0], BOOLEAN)
    true = ctx.graph.add_constant(torch.tensor(True), TORCH_TO_DTYPE[torch.bool])
    ctx.emit(
        StepKind.HOST_ELEMENTWISE, [src, true], [ctx.output(node, BOOLEAN)], {"alg": [HostElementwiseAlg.LOGICAL_XOR]}
    )


def unless_in_safe_softmax(rule: OpRule) -> OpRule:
    """Inside a softmax's fully-masked-row guard a node lowers to nothing: the softmax step zeroes
    fully masked rows itself."""

    def lower(ctx: LoweringContext, node: Node) -> None:
        if in_safe_softmax(node, lambda _: True) is not None:
            rule.lower(ctx, node)

    return OpRule(lower)


def lower_divide_rounding(ctx: LoweringContext, node: Node) -> None:
    modes = {"floor": HostElementwiseAlg.FLOOR_DIVIDE, "trunc": HostElementwiseAlg.TRUNC_DIVIDE}
    mode = node.kwargs.get("rounding_mode")
    alg = modes.get(mode) if isinstance(mode, str) else None
    if alg is None:
        raise Unsupported(f"division with rounding_mode={mode!r}")
    if fake_tensor(node).dtype != fake_tensor(node_arg(node, 0, "self")).dtype:
        raise Unsupported(f"{node.name}: division promoting its operands")
    a, b = operand_pair(ctx, node)
    out = ctx.output(node, FLOAT_OR_INT64)
    ctx.emit(StepKind.HOST_ELEMENTWISE, [a, b], [out], {"alg": [alg]})


def lower_where(ctx: LoweringContext, node: Node) -> None:
    pattern = match_safe_softmax(node)
    if pattern is not None:
        lower_safe_softmax(ctx, node, pattern)
        return
    condition, when_true, when_false = node.args
    dtype = fake_tensor(node).dtype
    for operand in (when_true, when_false):
        if not isinstance(operand, Node) or fake_tensor(operand).dtype != dtype:
            raise Unsupported(f"{node.name}: where with an operand of another dtype than its result")
    operands = [ctx.value(operand, FLOAT_OR_INT64) for operand in (when_true, when_false)]
    inputs = [ctx.value(condition, BOOLEAN), *operands]
    out = ctx.output(node, FLOAT_OR_INT64)
    ctx.emit(StepKind.HOST_ELEMENTWISE, inputs, [out], {"alg": [HostElementwiseAlg.WHERE]})


COMPARISONS = {
    aten.eq: HostElementwiseAlg.EQ,
    aten.ne: HostElementwiseAlg.NE,
    aten.lt: HostElementwiseAlg.LT,
    aten.le: HostElementwiseAlg.LE,
    aten.gt: HostElementwiseAlg.GT,
    aten.ge: HostElementwiseAlg.GE,
}

INDEXING_RULES: dict[object, OpRule] = {
    aten.argmax.default: arg_reduction_rule(ArgReductionAlg.MAX),
    aten.argmin.default: arg_reduction_rule(ArgReductionAlg.MIN),
    aten.index_select.default: OpRule(lower_index_select, compute=False),
    aten.embedding.default: OpRule(lower_embedding, compute=False),
    aten.index.Tensor: OpRule(lower_index, compute=False),
    aten.index_put.default: OpRule(lower_index_put),
    aten.div.Tensor_mode: OpRule(lower_divide_rounding),
    **{op.Tensor: comparison_rule(alg) for op, alg in COMPARISONS.items()},
    **{op.Scalar: comparison_rule(alg) for op, alg in COMPARISONS.items() if op is not aten.eq},
    aten.eq.Scalar: unless_in_safe_softmax(comparison_rule(HostElementwiseAlg.EQ)),
    aten.logical_not.default: unless_in_safe_softmax(OpRule(lower_logical_not)),
    aten.logical_and.default: logical_rule(HostElementwiseAlg.LOGICAL_AND),
    aten.logical_or.default: logical_rule(HostElementwiseAlg.LOGICAL_OR),
    aten.logical_xor.default: logical_rule(HostElementwiseAlg.LOGICAL_XOR),
    aten.where.self: OpRule(lower_where),
    aten.maximum.default: extremum_rule(HostElementwiseAlg.MAXIMUM),
    aten.minimum.default: extremum_rule(HostElementwiseAlg.MINIMUM),
}
