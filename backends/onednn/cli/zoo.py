# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The built-in model zoo: small random-weight networks in plain torch.nn, no downloads.

Each `MODELS` entry builds a model in eval mode with its example inputs; weights and inputs come from
fixed seeds, so two calls give identical tensors. Test-sized models export and run in seconds on two
cores; `resnet18` has the real ResNet-18 layer structure at 1x3x224x224 for jobs and benchmarks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch
from torch import nn
from torch.nn import functional as F

M = TypeVar("M", bound=nn.Module)
ModelFactory = Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]


def randomize_batch_norms(model: M) -> M:
    """Give batch norms non-trivial statistics, so folding them is actually exercised."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                channels = module.num_features
                module.running_mean.copy_(torch.randn(channels) * 0.1)
                module.running_var.copy_(torch.rand(channels) * 0.5 + 0.75)
                module.weight.copy_(torch.rand(channels) * 0.5 + 0.75)
                module.bias.copy_(torch.randn(channels) * 0.1)
    return model


def _seeded(build: Callable[[], nn.Module], *shapes: tuple[int, ...], seed: int = 0) -> ModelFactory:
    def factory() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        generator_state = torch.random.get_rng_state()
        try:
            torch.manual_seed(seed)
            model = build()
            with torch.no_grad():
                randomize_batch_norms(model)
            inputs = tuple(torch.randn(*shape) for shape in shapes)
        finally:
            torch.random.set_rng_state(generator_state)
        return model.eval(), inputs

    return factory


def conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)
    )


# --- ResNet -----------------------------------------------------------------------------------------
class BasicBlock(nn.Module):
    """Two 3x3 conv+bn, residual add; a strided block takes a 1x1 conv+bn shortcut."""

    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = conv_bn(cin, cout, 3, stride)
        self.conv2 = conv_bn(cout, cout, 3)
        self.shortcut = conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.conv1(x))
        return F.relu(self.conv2(y) + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, widths: list[int], blocks: list[int], num_classes: int, stem_width: int) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, stem_width, 7, 2, 3, bias=False),
            nn.BatchNorm2d(stem_width),
            nn.ReLU(),
            nn.MaxPool2d(3, 2, 1),
        )
        layers: list[nn.Module] = []
        cin = stem_width
        for stage, (width, count) in enumerate(zip(widths, blocks)):
            for index in range(count):
                stride = 2 if stage > 0 and index == 0 else 1
                layers.append(BasicBlock(cin, width, stride))
                cin = width
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(self.pool(x), 1))


def small_resnet() -> nn.Module:
    return ResNet(widths=[16, 32], blocks=[1, 1], num_classes=10, stem_width=16)


def resnet18() -> nn.Module:
    return ResNet(widths=[64, 128, 256, 512], blocks=[2, 2, 2, 2], num_classes=1000, stem_width=64)


# --- MobileNetV2 --------------------------------------------------------------------------------------
class InvertedResidual(nn.Module):
    """1x1 expand, 3x3 depthwise, 1x1 linear projection; residual when shapes allow."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int, activation: type[nn.Module]) -> None:
        super().__init__()
        hidden = cin * expand
        self.block = nn.Sequential(
            conv_bn(cin, hidden, 1),
            activation(),
            conv_bn(hidden, hidden, 3, stride, groups=hidden),
            activation(),
            conv_bn(hidden, cout, 1),
        )
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return x + y if self.residual else y


class MobileNetV2(nn.Module):
    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(conv_bn(3, 16, 3, 2), nn.ReLU6())
        self.blocks = nn.Sequential(
            InvertedResidual(16, 16, 1, 1, nn.ReLU6),
            InvertedResidual(16, 24, 2, 4, nn.ReLU6),
            InvertedResidual(24, 24, 1, 4, nn.ReLU6),
            InvertedResidual(24, 32, 2, 4, nn.Hardswish),
            InvertedResidual(32, 32, 1, 4, nn.Hardswish),
        )
        self.head = nn.Sequential(conv_bn(32, 64, 1), nn.Hardswish())
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(64, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.head(self.blocks(self.stem(x)))
        return self.classifier(torch.flatten(self.pool(x), 1))


# --- MLP ----------------------------------------------------------------------------------------------
class MLP(nn.Module):
    def __init__(self, features: int = 64, hidden: int = 256) -> None:
        super().__init__()
        self.fc1 = nn.Linear(features, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


# --- Transformer encoder ------------------------------------------------------------------------------
class TransformerEncoder(nn.Module):
    """One post-norm encoder layer (batch first) followed by a final layer norm."""

    def __init__(self, d_model: int = 64, heads: int = 4, feedforward: int = 128) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(
            d_model, heads, feedforward, dropout=0.0, activation="gelu", batch_first=True
        )
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.layer(x))


# --- U-Net --------------------------------------------------------------------------------------------
def double_conv(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(), nn.Conv2d(cout, cout, 3, padding=1), nn.ReLU())


class UNet(nn.Module):
    """Three levels down by max pooling; up by conv_transpose, bilinear and nearest in turn, with skips."""

    def __init__(self, channels: int = 3, base: int = 8, classes: int = 2) -> None:
        super().__init__()
        b = base
        self.enc1, self.enc2, self.enc3 = double_conv(channels, b), double_conv(b, 2 * b), double_conv(2 * b, 4 * b)
        self.bottleneck = double_conv(4 * b, 8 * b)
        self.up3 = nn.ConvTranspose2d(8 * b, 4 * b, 2, stride=2)
        self.dec3 = double_conv(8 * b, 4 * b)
        self.up2 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.dec2 = double_conv(4 * b + 2 * b, 2 * b)
        self.up1 = nn.Upsample(scale_factor=2, mode="nearest")
        self.dec1 = double_conv(2 * b + b, b)
        self.out = nn.Conv2d(b, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        e3 = self.enc3(F.max_pool2d(e2, 2))
        y = self.bottleneck(F.max_pool2d(e3, 2))
        y = self.dec3(torch.cat([self.up3(y), e3], dim=1))
        y = self.dec2(torch.cat([self.up2(y), e2], dim=1))
        y = self.dec1(torch.cat([self.up1(y), e1], dim=1))
        return self.out(y)


MODELS: dict[str, ModelFactory] = {
    "resnet_small": _seeded(small_resnet, (1, 3, 32, 32)),
    "mobilenet_v2_small": _seeded(MobileNetV2, (1, 3, 32, 32)),
    "mlp": _seeded(MLP, (8, 64)),
    "transformer_encoder": _seeded(TransformerEncoder, (2, 16, 64)),
    "unet_small": _seeded(UNet, (1, 3, 32, 32)),
    "resnet18": _seeded(resnet18, (1, 3, 224, 224)),
}
# The models test runs cover; `resnet18` is for jobs and benchmarks (and one end-to-end test).
TEST_MODELS = [name for name in MODELS if name != "resnet18"]

__all__ = ["MODELS", "TEST_MODELS", "ModelFactory"]
