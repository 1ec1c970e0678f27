# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Linear layers with quantized weights (export_llm's `quantization.qmode` 8da4w, 8da8w, 4w and int8):
one COMPRESSED_MATMUL step each, its weights kept as quantized. torchao's affine quantization:

    W = dequantize_affine(Wq, [1, G], scales, zero_points, int8, qmin, qmax)    Wq constant [N, K]
    linear(x, W, bias)                 ->  COMPRESSED_MATMUL(x, Wq, scales, bias[, zero_points])

export_llm's own weight-only int8 module (qmode=int8) casts the weights and scales the result per
output channel; the cast lowers to nothing, the scaling multiply is folded into the step's scales
afterwards (_passes/fold_arithmetic.py: fold_channel_scales):

    linear(x, Wq.to(float32)) * s      ->  COMPRESSED_MATMUL(x, Wq, ones [N, 1]) * s
                                       ->  COMPRESSED_MATMUL(x, Wq, s [N, 1])

and with the activations quantized per row at run time (8da4w):

    s, z = choose_qparams_affine(x, ASYMMETRIC, [1, .., 1, K], int8, -128, 127)
    x' = dequantize_affine(quantize_affine(x, [1, .., K], s, z, ...), [1, .., K], s, z, ...)
    linear(x', W, bias)                ->  COMPRESSED_MATMUL(x, ...; quantize_rows=1)

ExecuTorch's quantized embeddings (export_llm's `quantization.embedding_quantize` 4,G or 8,G) are a
GATHER of the compressed rows, dequantized as they are copied:

    embedding_4bit / embedding_byte(Wq, scales, zero_points, qmin, qmax, indices)
                                       ->  GATHER(Wq, indices, scales[, zero_points]; group_size)

Weights of range [-8, 7] are stored as S4 (two per byte), others as S8. The activation chain's nodes
lower to nothing: the step quantizes the rows itself, as torchao's ops do (runtime/Int4VectorMatrix.h).
The ops are matched by name, so that importing the delegate does not import torchao.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch._subclasses.fake_tensor import is_fake
from torch.fx import Node

from ..serialization.schema import DType, StepKind
from .context import LoweringContext, Unsupported, aten_op
from .rules import OpRule

DEQUANTIZE = "torchao::dequantize_affine"
QUANTIZE = "torchao::quantize_affine"
CHOOSE_QPARAMS = "torchao::choose_qparams_affine"
WEIGHT_RANGES = {(-8, 7): DType.S4, (-128, 127): DType.S8, (-127, 127): DType.S8}
CASTS = frozenset({"dim_order_ops::_to_dim_order_copy", "aten::_to_copy"})
ROW_RANGE = (-128, 127)


def op_name(node: object) -> str | None:
    if not isinstance(node, Node) or node.op != "call_function":
        return None
    op = aten_op(node.target)
    return op.name() if isinstance(op, torch._ops.OpOverload) else None


def is_affine(node: object, name: str) -> bool:
    return op_name(node) == name


def _arg(node: Node, index: int, name: str, default: object = None) -> object:
    return node.args[index] if len(node.args) > index else node.kwargs.get(name, default)


# --- compressed weights ----------------------------------------------------------------------------
@dataclass(frozen=True)
class CompressedWeights:
    dtype: DType  # S4 or S8
    group: int  # along K
    values: torch.Tensor  # int8 [N, K]
    scales: torch.Tensor  # f32 [N, K / group]
    zero_points: torch.Tensor | None  # int [N, K / group]; None when all zero


def int8_weights_cast(node: object) -> Node | None:
    """The int8 [N, K] tensor `node` casts to floats, when every user is a linear reading the result as
    its weights (export_llm's qmode=int8: `F.linear(x, weight.to(x.dtype)) * scales`), else None."""
    if not isinstance(node, Node) or op_name(node) not in CASTS or not node.users:
        return None
    source, result = node.args[0], node.meta.get("val")
    value = source.meta.get("val") if isinstance(source, Node) else None
    if not isinstance(value, torch.Tensor) or value.dtype != torch.int8 or value.dim() != 2:
        return None
    if not isinstance(result, torch.Tensor) or result.dtype not in (torch.float32, torch.bfloat16):
        return None
    if node.kwargs.get("dim_order") not in (None, [0, 1]):
        return None
    linear = torch.ops.aten.linear.default
    if any(aten_op(user.target) != linear or user.args[1] is not node or user.args[0] is node for user in node.users):
        return None
    return source if isinstance(source, Node) else None


def reads_through_cast(ctx: LoweringContext, node: Node) -> bool:
    """Whether `node` is a cast of constant int8 weights that its linear layers read compressed."""
    source = int8_weights_cast(node)
    return source is not None and ctx.constant_node_data(source) is not None


def compressed_weight(ctx: LoweringContext, w: object) -> CompressedWeights | None:
    """A dequantize_affine of constant weights grouped along K, a cast of constant int8 weights (one
    group a row, scales of one: the result's scaling is folded in later), or None."""
    cast_source = int8_weights_cast(w)
    if cast_source is not None:
        values = ctx.constant_node_data(cast_source)
        if values is None:
            return None
        return CompressedWeights(DType.S8, values.shape[1], values, torch.ones(values.shape[0], 1), None)
    if not is_affine(w, DEQUANTIZE):
        return None
    names = ("input", "block_size", "scale", "zero_point")
    data, block, scales, zero_points = (_arg(w, index, name) for index, name in enumerate(names))
    input_dtype = _arg(w, 4, "input_dtype")
    quant_range = (_arg(w, 5, "quant_min"), _arg(w, 6, "quant_max"))
    output_dtype = w.kwargs.get("output_dtype", torch.float32)
    tensors = [ctx.constant_node_data(n) for n in (data, scales)]
    zeros = None if zero_points is None else ctx.constant_node_data(zero_points)
    if any(t is None for t in tensors) or (zero_points is not None and zeros is None):
        return None
    values, group_scales = tensors
    if input_dtype != torch.int8 or values.dtype != torch.int8 or values.dim() != 2 or quant_range not in WEIGHT_RANGES:
        raise Unsupported(f"{w.name}: weights of {input_dtype} in {list(quant_range)} (int8 or int4 values only)")
    n, k = values.shape
    if not isinstance(block, (list, tuple)) or len(block) != 2 or block[0] != 1 or k % block[1]:
        raise Unsupported(f"{w.name}: block size {block} is not one group of a row dividing {k}")
    group = int(block[1])
    if group_scales.dtype != torch.float32 or tuple(group_scales.shape) != (n, k // group):
        raise Unsupported(f"{w.name}: scales of {group_scales.dtype} {tuple(group_scales.shape)}, not f32 [N, K/G]")
    if output_dtype not in (torch.float32, torch.bfloat16):
        raise Unsupported(f"{w.name}: dequantized to {output_dtype}")
    dtype = WEIGHT_RANGES[quant_range]
    if dtype == DType.S4 and (k % 2 or group % 2):
        raise Unsupported(f"{w.name}: 4-bit weights need an even row length and group size")
    # The partitioner's checks see fake constants; the values are checked when lowering for real.
    real = not is_fake(values)
    if dtype == DType.S4 and real and bool(((values < -8) | (values > 7)).any()):
        dtype = DType.S8  # values beyond the declared range: dequantize_affine does not clamp them
    if zeros is not None:
        if zeros.dtype not in (torch.int8, torch.int32) or tuple(zeros.shape) != (n, k // group):
            raise Unsupported(f"{w.name}: zero points of {zeros.dtype} {tuple(zeros.shape)}")
        if not is_fake(zeros) and bool(((zeros < -128) | (zeros > 127)).any()):
            raise Unsupported(f"{w.name}: zero points beyond int8")
        if not is_fake(zeros) and not bool(zeros.any()):
            zeros = None  # symmetric: the kernels then skip them
    return CompressedWeights(dtype, group, values, group_scales, zeros)


def pack_int4(values: torch.Tensor) -> torch.Tensor:
    """[N, K] values in [-8, 7] as [N, K/2] bytes, element 2i in the low nibble of byte i."""
    nibbles = values.to(torch.uint8) & 0x0F
    return nibbles[:, 0::2] | (nibbles[:, 1::2] << 4)


# --- the activation chain --------------------------------------------------------------------------
def quantized_rows_source(x: object) -> Node | None:
    """The activation `a` of an 8da4w chain ending in `x`: dequantize_affine(quantize_affine(a, ...)) with
    the parameters choose_qparams_affine picked for each row of `a` (asymmetric int8, torchao's default
    eps), or None."""
    if not is_affine(x, DEQUANTIZE) or not is_affine(x.args[0], QUANTIZE):
        return None
    quantize = x.args[0]
    source, _block, scale, zero_point = quantize.args[:4]
    if not all(isinstance(n, Node) for n in (source, scale, zero_point)) or scale.args[0] is not zero_point.args[0]:
        return None
    choose = scale.args[0]
    if not is_affine(choose, CHOOSE_QPARAMS) or choose.args[0] is not source:
        return None
    if (scale.args[1], zero_point.args[1]) != (0, 1):
        return None
    value = source.meta.get("val")
    if not isinstance(value, torch.Tensor) or value.dtype != torch.float32:
        return None  # torchao picks bf16 scales for bf16 rows; the runtime computes them in f32
    row = [1] * (value.dim() - 1) + [value.shape[-1]]
    int8_rows = (torch.int8, *ROW_RANGE)
    if str(choose.args[1]).split(".")[-1] != "ASYMMETRIC" or tuple(choose.args[3:6]) != int8_rows:
        return None
    if any(argument is not None for argument in choose.args[6:8]):  # eps, scale dtype
        return None
    if tuple(quantize.args[4:7]) != int8_rows or tuple(x.args[2:7]) != (scale, zero_point, *int8_rows):
        return None
    if any(list(node.args[index]) != row for node, index in ((choose, 2), (quantize, 1), (x, 1))):
        return None
    return None if x.kwargs.get("output_dtype", torch.float32) != torch.float32 else source


def emit_compressed_linear(ctx: LoweringContext, node: Node, a: object, w: object, bias: object) -> bool:
    """linear(a, dequantize_affine(constant weights)) as one COMPRESSED_MATMUL; False when `w` is not
    compressed weights."""
    weights = compressed_weight(ctx, w)
    if weights is None:
        return False
    dtype, values, zeros = weights.dtype, weights.values, weights.zero_points
    source = quantized_rows_source(a)
    src = ctx.value(source if source is not None else a)
    if ctx.dtype(src) not in (DType.F32, DType.BF16):
        raise Unsupported(f"{node.name}: activations of {ctx.dtype(src).name}")
    if ctx.dims(src)[-1] != values.shape[1]:
        raise Unsupported(f"{node.name}: rows of {ctx.dims(src)[-1]} against weights of {values.shape[1]}")
    stored = ctx.graph.add_value(dtype, tuple(values.shape))
    ctx.graph.constant_data[stored] = pack_int4(values) if dtype == DType.S4 else values.contiguous()
    inputs = [src, stored, ctx.graph.add_constant(weights.scales, DType.F32), ctx.optional_value(bias)]
    if zeros is not None:
        inputs.append(ctx.graph.add_constant(zeros.to(torch.int8), DType.S8))
    ints = {"group_size": [weights.group], "quantize_rows": [int(source is not None)]}
    ctx.emit(StepKind.COMPRESSED_MATMUL, inputs, [ctx.output(node)], ints)
    return True


# --- the rules: the chain and the weights lower to nothing, their linear reads through them -------------
def _linear_reads_compressed(user: Node, through: Node) -> bool:
    return (
        aten_op(user.target) == torch.ops.aten.linear.default
        and is_affine(user.args[1], DEQUANTIZE)
        and (user.args[1] is through or user.args[0] is through)
    )


def lower_dequantize_affine(ctx: LoweringContext, node: Node) -> None:
    """Weights: read by the linear layers using them. An activation's: the last link of an 8da4w chain."""
    for user in node.users:
        if not _linear_reads_compressed(user, node):
            raise Unsupported(f"{user.name} would need {node.name}'s dequantized values")
        if user.args[0] is node and quantized_rows_source(node) is None:
            raise Unsupported(f"{node.name}: not torchao's per-row int8 activation quantization")
    if compressed_weight(ctx, node) is None and quantized_rows_source(node) is None:
        raise Unsupported(f"{node.name}: neither constant weights nor a per-row int8 activation")


def lower_chain_link(ctx: LoweringContext, node: Node) -> None:
    """choose_qparams_affine and quantize_affine: taken when every use ends in an 8da4w linear."""
    frontier, ends = [node], set()
    for _ in range(3):  # choose_qparams -> getitem -> quantize_affine -> dequantize_affine
        frontier = [user for link in frontier for user in link.users if not is_affine(link, DEQUANTIZE)]
        ends |= {user for user in frontier if is_affine(user, DEQUANTIZE)}
    if not ends or any(quantized_rows_source(end) is None for end in ends):
        raise Unsupported(f"{node.name}: not part of torchao's per-row int8 activation quantization")


def every_user_taken(node: Node, supported: Callable[[Node], bool]) -> str | None:
    if not all(supported(user) for user in node.users):
        return f"{node.name}: a user left outside the delegate would need its values"
    return None


# --- quantized embeddings ----------------------------------------------------------------------------
EMBEDDINGS = {  # op name -> bits
    "quantized_decomposed::embedding_4bit": 4,
    "quantized_decomposed::embedding_4bit.dtype": 4,
    "quantized_decomposed::embedding_byte": 8,
    "quantized_decomposed::embedding_byte.dtype": 8,
}


def lower_quantized_embedding(ctx: LoweringContext, node: Node) -> None:
    bits = EMBEDDINGS[op_name(node) or ""]
    weight, scales, zero_points, quant_min, quant_max, indices = node.args[:6]
    data, group_scales = ctx.constant_node_data(weight), ctx.constant_node_data(scales)
    zeros = None if zero_points is None else ctx.constant_node_data(zero_points)
    if data is None or group_scales is None or (zero_points is not None and zeros is None):
        raise Unsupported(f"{node.name}: quantized embedding weights must be constant")
    if node.kwargs.get("dtype", torch.float32) not in (None, torch.float32) or group_scales.dtype != torch.float32:
        raise Unsupported(f"{node.name}: scales or result other than f32")
    rows, stored = data.shape
    dim = stored * 2 if bits == 4 else stored
    columns = group_scales.shape[1] if group_scales.dim() == 2 else 1
    if (
        group_scales.shape[0] != rows
        or dim % columns
        or (bits, quant_min, quant_max) not in ((4, -8, 7), (8, -128, 127))
    ):
        raise Unsupported(
            f"{node.name}: {bits}-bit rows in [{quant_min}, {quant_max}] with scales {tuple(group_scales.shape)}"
        )
    if (
        bits == 4
    ):  # ExecuTorch packs the even value in the high nibble, offset by 8: ours is two's complement, low first
        unpacked = torch.stack((data.div(16, rounding_mode="trunc"), data.remainder(16)), -1).reshape(rows, dim)
        values = pack_int4((unpacked.to(torch.int16) - 8).to(torch.int8))
    elif data.dtype == torch.int8:
        values = data
    else:
        raise Unsupported(f"{node.name}: 8-bit rows of {data.dtype}")
    stored_id = ctx.graph.add_value(DType.S4 if bits == 4 else DType.S8, (rows, dim))
    ctx.graph.constant_data[stored_id] = values.contiguous()
    inputs = [
        stored_id,
        ctx.value(indices, {torch.int64}),
        ctx.graph.add_constant(group_scales.reshape(rows, columns), DType.F32),
    ]
    if zeros is not None:
        inputs.append(ctx.graph.add_constant(zeros.float().reshape(rows, columns), DType.F32))
    ctx.emit(StepKind.GATHER, inputs, [ctx.output(node)], {"axis": [0], "group_size": [dim // columns]})


AFFINE_RULES: dict[object, OpRule] = {
    **dict.fromkeys(EMBEDDINGS, OpRule(lower_quantized_embedding, compute=False)),
    DEQUANTIZE: OpRule(lower_dequantize_affine, users_ok=every_user_taken),
    QUANTIZE: OpRule(lower_chain_link, users_ok=every_user_taken, pattern_member=True),
    CHOOSE_QPARAMS: OpRule(lower_chain_link, users_ok=every_user_taken, pattern_member=True),
}
