"""PT2E quantizer for the oneDNN delegate: static int8 convolution and linear.

Activations are u8, asymmetric, per tensor; weights are s8, symmetric, per output channel; biases stay
fp32. A convolution or linear followed by a relu is one pattern (the relu's output is quantized), so
that the lowering fuses the relu and the requantization into the int8 primitive.
"""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e import HistogramObserver, PerChannelMinMaxObserver
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
# s8 weights use [-127, 127] (symmetric); the lowering checks the range it is given.
WEIGHT = QuantizationSpec(
    dtype=torch.int8,
    quant_min=-127,
    quant_max=127,
    qscheme=torch.per_channel_symmetric,
    ch_axis=0,
    observer_or_fake_quant_ctr=PerChannelMinMaxObserver.with_args(eps=2**-12),
)

# Ops annotated as int8, with the argument index of their weight.
MATRIX_OPS = {
    aten.conv1d.default: 1,
    aten.conv2d.default: 1,
    aten.linear.default: 1,
}
RELUS = {aten.relu.default, aten.relu_.default}


class OneDnnQuantizer(Quantizer):
    """Annotates conv1d/conv2d/linear (each optionally followed by relu) for static int8."""

    def annotate(self, model: GraphModule) -> GraphModule:
        for node in model.graph.nodes:
            if node.op != "call_function" or node.target not in MATRIX_OPS or Q_ANNOTATION_KEY in node.meta:
                continue
            x, weight = node.args[0], node.args[MATRIX_OPS[node.target]]
            if not isinstance(x, Node) or not isinstance(weight, Node):
                continue
            relu = _single_relu_user(node)
            node.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(
                input_qspec_map={x: ACTIVATION, weight: WEIGHT},
                output_qspec=None if relu is not None else ACTIVATION,
                _annotated=True,
            )
            if relu is not None:
                relu.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=ACTIVATION, _annotated=True)
        return model

    def validate(self, model: GraphModule) -> None:
        pass


def _single_relu_user(node: Node) -> Node | None:
    users = list(node.users)
    if len(users) == 1 and users[0].op == "call_function" and users[0].target in RELUS:
        return users[0]
    return None
