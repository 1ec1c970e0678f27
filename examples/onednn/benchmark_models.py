# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The benchmark suite: full-size random-weight models, built in code, no downloads.

`BENCH_MODELS[name]` is a `BenchModel`: a label for tables and a factory giving the model in eval mode
with its example inputs (fixed seeds: two calls give identical tensors). The CNNs are plain torch.nn with
the real layer structure of their namesakes; the transformers are Hugging Face `transformers` models
built from a config (random weights), wrapped so that `forward` takes tensors and returns one tensor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from executorch.backends.onednn.cli.zoo import MLP, UNet, _seeded, conv_bn, resnet18
from torch import nn

ModelFactory = Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]

# Attention implementation for the transformers models; "sdpa" exports and lowers with every flow here.
ATTENTION = "sdpa"


# --- ResNet-50 ------------------------------------------------------------------------------------------
class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (strided), 1x1 expand by 4; residual add with a 1x1 projection when shapes change."""

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = 4 * width
        self.body = nn.Sequential(
            conv_bn(cin, width, 1), nn.ReLU(), conv_bn(width, width, 3, stride), nn.ReLU(), conv_bn(width, cout, 1)
        )
        self.shortcut = conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.shortcut(x))


class ResNet50(nn.Module):
    def __init__(self, blocks: tuple[int, ...] = (3, 4, 6, 3), num_classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(conv_bn(3, 64, 7, 2), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        layers: list[nn.Module] = []
        cin = 64
        for stage, count in enumerate(blocks):
            width = 64 * 2**stage
            for index in range(count):
                layers.append(Bottleneck(cin, width, 2 if stage > 0 and index == 0 else 1))
                cin = 4 * width
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


# --- MobileNetV2 / MobileNetV3 / EfficientNet: one inverted-residual block, three configurations ----------
class SqueezeExcite(nn.Module):
    def __init__(self, channels: int, squeezed: int, activation: type[nn.Module], gate: type[nn.Module]) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.reduce, self.act = nn.Conv2d(channels, squeezed, 1), activation()
        self.expand, self.gate = nn.Conv2d(squeezed, channels, 1), gate()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gate(self.expand(self.act(self.reduce(self.pool(x)))))


@dataclass(frozen=True)
class BlockSpec:
    """One inverted-residual block: 1x1 expand (skipped when hidden == cin), depthwise, optional SE, 1x1."""

    cin: int
    hidden: int
    cout: int
    kernel: int
    stride: int
    activation: type[nn.Module]
    squeezed: int = 0  # squeeze-excite width; 0: no squeeze-excite
    se_activation: type[nn.Module] = nn.ReLU
    se_gate: type[nn.Module] = nn.Hardsigmoid


class InvertedResidual(nn.Module):
    def __init__(self, spec: BlockSpec) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        if spec.hidden != spec.cin:
            layers += [conv_bn(spec.cin, spec.hidden, 1), spec.activation()]
        layers += [conv_bn(spec.hidden, spec.hidden, spec.kernel, spec.stride, groups=spec.hidden), spec.activation()]
        if spec.squeezed:
            layers.append(SqueezeExcite(spec.hidden, spec.squeezed, spec.se_activation, spec.se_gate))
        layers.append(conv_bn(spec.hidden, spec.cout, 1))
        self.block = nn.Sequential(*layers)
        self.residual = spec.stride == 1 and spec.cin == spec.cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return x + y if self.residual else y


class InvertedResidualNet(nn.Module):
    """Strided 3x3 stem, inverted-residual blocks, 1x1 head, global pooling, classifier."""

    def __init__(
        self,
        stem: int,
        blocks: list[BlockSpec],
        head: int,
        activation: type[nn.Module],
        classifier: nn.Module,
    ) -> None:
        super().__init__()
        self.stem = nn.Sequential(conv_bn(3, stem, 3, 2), activation())
        self.blocks = nn.Sequential(*(InvertedResidual(spec) for spec in blocks))
        self.head = nn.Sequential(conv_bn(blocks[-1].cout, head, 1), activation())
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = classifier

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.head(self.blocks(self.stem(x)))), 1))


def make_divisible(value: float, divisor: int = 8) -> int:
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def expand_stages(
    stages: list[tuple[int, int, int, int, int]], cin: int, spec: Callable[[int, int, int, int, int], BlockSpec]
) -> list[BlockSpec]:
    """Rows (expand ratio, cout, repeats, first stride, kernel) -> one BlockSpec per block."""
    blocks = []
    for expand, cout, repeats, stride, kernel in stages:
        for index in range(repeats):
            blocks.append(spec(cin, cin * expand, cout, kernel, stride if index == 0 else 1))
            cin = cout
    return blocks


def mobilenet_v2() -> nn.Module:
    stages = [(1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 32, 3, 2, 3), (6, 64, 4, 2, 3), (6, 96, 3, 1, 3)]
    stages += [(6, 160, 3, 2, 3), (6, 320, 1, 1, 3)]
    blocks = expand_stages(stages, 32, lambda cin, hid, cout, k, s: BlockSpec(cin, hid, cout, k, s, nn.ReLU6))
    return InvertedResidualNet(32, blocks, 1280, nn.ReLU6, nn.Linear(1280, 1000))


def mobilenet_v3_small() -> nn.Module:
    relu, hswish = nn.ReLU, nn.Hardswish
    # (cin, kernel, hidden, cout, squeeze-excite, activation, stride), as in the MobileNetV3 paper, table 2
    rows = [
        (16, 3, 16, 16, True, relu, 2),
        (16, 3, 72, 24, False, relu, 2),
        (24, 3, 88, 24, False, relu, 1),
        (24, 5, 96, 40, True, hswish, 2),
        (40, 5, 240, 40, True, hswish, 1),
        (40, 5, 240, 40, True, hswish, 1),
        (40, 5, 120, 48, True, hswish, 1),
        (48, 5, 144, 48, True, hswish, 1),
        (48, 5, 288, 96, True, hswish, 2),
        (96, 5, 576, 96, True, hswish, 1),
        (96, 5, 576, 96, True, hswish, 1),
    ]
    blocks = [
        BlockSpec(cin, hidden, cout, kernel, stride, act, make_divisible(hidden / 4) if se else 0)
        for cin, kernel, hidden, cout, se, act, stride in rows
    ]
    classifier = nn.Sequential(nn.Linear(576, 1024), nn.Hardswish(), nn.Linear(1024, 1000))
    return InvertedResidualNet(16, blocks, 576, nn.Hardswish, classifier)


def efficientnet_b0() -> nn.Module:
    stages = [(1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 40, 2, 2, 5), (6, 80, 3, 2, 3), (6, 112, 3, 1, 5)]
    stages += [(6, 192, 4, 2, 5), (6, 320, 1, 1, 3)]

    def mbconv(cin: int, hidden: int, cout: int, kernel: int, stride: int) -> BlockSpec:
        return BlockSpec(cin, hidden, cout, kernel, stride, nn.SiLU, max(1, cin // 4), nn.SiLU, nn.Sigmoid)

    return InvertedResidualNet(32, expand_stages(stages, 32, mbconv), 1280, nn.SiLU, nn.Linear(1280, 1000))


# --- transformers models ------------------------------------------------------------------------------------
class HiddenStates(nn.Module):
    """Calls a transformers model with positional tensors and returns one output tensor."""

    def __init__(self, model: nn.Module, output: str) -> None:
        super().__init__()
        self.model, self.output = model, output

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return getattr(self.model(*inputs), self.output)


def vit_tiny() -> nn.Module:
    from transformers import ViTConfig, ViTModel

    config = ViTConfig(
        hidden_size=192, num_hidden_layers=12, num_attention_heads=3, intermediate_size=768, image_size=224,
        patch_size=16, attn_implementation=ATTENTION,
    )  # fmt: skip
    return HiddenStates(ViTModel(config, add_pooling_layer=False), "last_hidden_state")


def bert_base() -> nn.Module:
    from transformers import BertConfig, BertModel

    config = BertConfig(attn_implementation=ATTENTION)  # hidden 768, 12 layers, 12 heads, vocab 30522
    return HiddenStates(BertModel(config, add_pooling_layer=False), "last_hidden_state")


def gpt2_small() -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(use_cache=False, attn_implementation=ATTENTION)  # n_embd 768, 12 layers, 12 heads
    return HiddenStates(GPT2LMHeadModel(config), "logits")


def _with_token_ids(build: Callable[[], nn.Module], vocab: int, length: int, seed: int = 0) -> ModelFactory:
    """Like `_seeded`, for models that take one row of token ids (int64) instead of float tensors."""
    build_seeded = _seeded(build, seed=seed)

    def factory() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        model, _ = build_seeded()
        return model, (torch.randint(0, vocab, (1, length), generator=torch.Generator().manual_seed(seed)),)

    return factory


@dataclass(frozen=True)
class BenchModel:
    label: str  # the name shown in tables: what the model is, with its input size
    factory: ModelFactory
    # One run on ExecuTorch's own kernels (no delegate) takes 15-30 s on 2 cores: the suite skips that
    # flow for this model unless asked (benchmark.py --skip-slow none).
    slow_without_delegate: bool = False


BENCH_MODELS: dict[str, BenchModel] = {
    "resnet18": BenchModel("ResNet-18, 1x3x224x224", _seeded(resnet18, (1, 3, 224, 224))),
    "resnet50": BenchModel("ResNet-50, 1x3x224x224", _seeded(ResNet50, (1, 3, 224, 224)), True),
    "mobilenet_v2": BenchModel("MobileNetV2 1.0, 1x3x224x224", _seeded(mobilenet_v2, (1, 3, 224, 224))),
    "mobilenet_v3_small": BenchModel("MobileNetV3-small, 1x3x224x224", _seeded(mobilenet_v3_small, (1, 3, 224, 224))),
    "efficientnet_b0": BenchModel("EfficientNet-B0, 1x3x224x224", _seeded(efficientnet_b0, (1, 3, 224, 224))),
    "vit_tiny": BenchModel(
        "ViT-Tiny/16 (192 wide, 12 layers, 3 heads), 1x3x224x224", _seeded(vit_tiny, (1, 3, 224, 224))
    ),
    "bert_base": BenchModel("BERT-base encoder (12 layers), seq 128", _with_token_ids(bert_base, 30522, 128), True),
    "gpt2_small": BenchModel(
        "GPT-2 small prefill + LM head, 128 tokens", _with_token_ids(gpt2_small, 50257, 128), True
    ),
    "mlp": BenchModel("MLP 1024-4096-1024 GELU, batch 32", _seeded(lambda: MLP(1024, 4096), (32, 1024))),
    "unet": BenchModel("U-Net (base 32, 3 levels), 1x3x128x128", _seeded(lambda: UNet(3, 32, 2), (1, 3, 128, 128))),
}

__all__ = ["BENCH_MODELS", "BenchModel", "ModelFactory"]
