# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""PT2E quantizer for the oneDNN delegate: static int8 convolution, linear and addmm/mm.

Activations are u8, asymmetric, per tensor; weights are s8, symmetric, per output channel (or, with
`per_channel=False`, one scale per weight tensor); biases stay fp32. A convolution or linear followed
by a residual add and/or an activation (relu, ReLU6, GELU, SiLU, hardswish) is one pattern: only its
result and the add's other operand are quantized, so that the lowering fuses the add, the activation
and the requantization into the int8 primitive as post-ops.
"""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e import HistogramObserver, MinMaxObserver, PerChannelMinMaxObserver
from torchao.quantization.pt2e.quantizer import QuantizationAnnotation, QuantizationSpec, Quantizer
from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY

aten = torch.ops.aten

ACTIVATION = QuantizationSpec(
    dtype=torch.uint8,
    quant_min=0,
    quant_max=255,
    qscheme=torch.per_tensor_affine,
    observer_or_fake_quant_ctr=HistogramObserver.with_args(eps=2**-12),
)


def weight_spec(output_axis: int) -> QuantizationSpec:
    """s8, symmetric, one scale per output channel; [-127, 127] (the lowering checks the range)."""
    return QuantizationSpec(
        dtype=torch.int8,
        quant_min=-127,
        quant_max=127,
        qscheme=torch.per_channel_symmetric,
        ch_axis=output_axis,
        observer_or_fake_quant_ctr=PerChannelMinMaxObserver.with_args(ch_axis=output_axis, eps=2**-12),
    )


WEIGHT = weight_spec(0)
# addmm/mm take [K, N] weights (Hugging Face's Conv1D layers in GPT-2): one scale per column.
WEIGHT_BY_COLUMN = weight_spec(1)
WEIGHT_PER_TENSOR = QuantizationSpec(
    dtype=torch.int8,
    quant_min=-127,
    quant_max=127,
    qscheme=torch.per_tensor_symmetric,
    observer_or_fake_quant_ctr=MinMaxObserver.with_args(eps=2**-12, qscheme=torch.per_tensor_symmetric),
)

# Ops annotated as int8: argument indices of their activation and weight, and the weight's spec.
MATRIX_OPS = {
    aten.conv1d.default: (0, 1, WEIGHT),
    aten.conv2d.default: (0, 1, WEIGHT),
    aten.linear.default: (0, 1, WEIGHT),
    aten.addmm.default: (1, 2, WEIGHT_BY_COLUMN),
    aten.mm.default: (0, 1, WEIGHT_BY_COLUMN),
    aten.matmul.default: (0, 1, WEIGHT_BY_COLUMN),  # `x @ w` as exported, before it becomes mm
}
# Activations that become an eltwise post-op of the int8 primitive (nn.ReLU6 exports as hardtanh).
ACTIVATIONS = {
    aten.relu.default,
    aten.relu_.default,
    aten.relu6.default,
    aten.hardtanh.default,
    aten.hardtanh_.default,
    aten.gelu.default,
    aten.silu.default,
    aten.hardswish.default,
}


class OneDnnQuantizer(Quantizer):
    """Annotates conv1d/conv2d/linear/addmm/mm/matmul with a stored weight, each optionally followed by a
    residual add and an activation, for static int8."""

    def __init__(self, per_channel: bool = True) -> None:
        super().__init__()
        self.per_channel = per_channel

    def annotate(self, model: GraphModule) -> GraphModule:
        for node in model.graph.nodes:
            if node.op != "call_function" or node.target not in MATRIX_OPS or Q_ANNOTATION_KEY in node.meta:
                continue
            x_index, weight_index, weight_spec = MATRIX_OPS[node.target]
            x, weight = node.args[x_index], node.args[weight_index]
            if not isinstance(x, Node) or not _is_parameter(model, weight, 2 if weight_spec.ch_axis == 1 else None):
                continue
            if node.target == aten.addmm.default and any(s != 1 for s in (*node.args[3:], *node.kwargs.values())):
                continue  # beta or alpha scales the product or the bias
            residual = _residual_add_user(node)
            activation = _single_activation_user(residual or node)
            if not self.per_channel:
                weight_spec = WEIGHT_PER_TENSOR
            node.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(
                input_qspec_map={x: ACTIVATION, weight: weight_spec},
                output_qspec=None if residual or activation else ACTIVATION,
                _annotated=True,
            )
            if residual is not None:
                other = residual.args[1] if residual.args[0] is node else residual.args[0]
                residual.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(
                    input_qspec_map={other: ACTIVATION},  # type: ignore[dict-item]
                    output_qspec=None if activation else ACTIVATION,
                    _annotated=True,
                )
            if activation is not None:
                activation.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=ACTIVATION, _annotated=True)
        return model

    def validate(self, model: GraphModule) -> None:
        pass


def _is_parameter(model: GraphModule, node: object, rank: int | None) -> bool:
    """A weight stored in the model, of the given rank (mm of two activations, like attention scores,
    stays fp32; so does a batched weight, whose columns are not the output channels)."""
    if not isinstance(node, Node) or node.op != "get_attr":
        return False
    tensor = _attribute(model, str(node.target))
    return isinstance(tensor, torch.Tensor) and (rank is None or tensor.dim() == rank)


def _attribute(model: GraphModule, path: str) -> object:
    value: object = model
    for name in path.split("."):
        value = getattr(value, name, None)
    return value


def _residual_add_user(node: Node) -> Node | None:
    """The residual add that is this node's only user, not yet annotated, adding another tensor: the
    product, the add and a following activation stay in fp32 inside one int8 primitive (post-ops), and only
    the add's other operand and the pattern's result are quantized."""
    users = list(node.users)
    if len(users) != 1 or users[0].op != "call_function" or users[0].target != aten.add.Tensor:
        return None
    add = users[0]
    if Q_ANNOTATION_KEY in add.meta or len(add.args) != 2 or add.kwargs.get("alpha", 1) != 1:
        return None
    if not all(isinstance(a, Node) for a in add.args) or add.args[0] is add.args[1]:
        return None
    return add


def _single_activation_user(node: Node) -> Node | None:
    users = list(node.users)
    if len(users) == 1 and users[0].op == "call_function" and users[0].target in ACTIVATIONS:
        return users[0]
    return None
