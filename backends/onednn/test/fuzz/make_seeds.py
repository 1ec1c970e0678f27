# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Writes the fuzzer's seed corpus: the OneDnnBackend payloads of a few small exported models.

Each model goes through the real export path (torch.export -> OneDnnPartitioner ->
to_edge_transform_and_lower), and every lowered backend module's `processed_bytes` becomes one seed
file, `<model>_<n>.odnn`. Payloads name their constants (weights) by key only; the fuzz harness
(fuzz_payload.cpp) serves every constant a payload names from a named data map it builds itself, so
the seeds carry no weights and stay small.

    python backends/onednn/test/fuzz/make_seeds.py [OUTPUT_DIR] [--only NAME ...]

OUTPUT_DIR defaults to backends/onednn/test/fuzz/seeds. Existing files of the same name are
overwritten; others are left alone.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.export import Dim

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "seeds"


class ConvNet(nn.Module):
    """conv + batch norm + relu + max pool, a grouped conv, a transposed conv, adaptive avg pool, linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.grouped = nn.Conv2d(8, 8, 3, padding=1, groups=4)
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.fc = nn.Linear(4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        x = F.hardswish(self.grouped(x)) + x
        x = self.up(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


class Mlp(nn.Module):
    """Linear + GELU + Linear + log-softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(self.fc2(F.gelu(self.fc1(x))), dim=-1)


class AttentionBlock(nn.Module):
    """Pre-norm self-attention (layer norm, q/k/v projections, scaled dot product attention) and an
    RMS-normed SiLU feed-forward, with residuals."""

    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.RMSNorm(dim, eps=1e-6)
        self.ff = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, s, d))
        return x + F.silu(self.ff(self.norm2(x)))


class IndexOps(nn.Module):
    """Embedding lookup (GATHER), argmax (ARG_REDUCTION), where/comparison (HOST_ELEMENTWISE)."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(32, 8)
        self.fc = nn.Linear(8, 8)

    def forward(self, tokens: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.fc(self.embedding(tokens)) + x
        h = torch.where(h > 0, h, h * 0.5)
        return h, h.argmax(dim=-1)


class UNetBits(nn.Module):
    """pad, nearest upsampling, concat, mean reduction, clamp."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(F.pad(x, (1, 1, 1, 1)))
        y = F.interpolate(y, scale_factor=2, mode="nearest")
        z = torch.cat([y, F.interpolate(x, scale_factor=2, mode="bilinear")], dim=1)
        return torch.clamp(z - z.mean(dim=(2, 3), keepdim=True), -1.0, 1.0)


class DynamicMlp(nn.Module):
    """A token MLP over a dynamic sequence length, with a slice that follows the length."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 8)
        self.norm = nn.LayerNorm(8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.norm(x + self.fc2(F.relu(self.fc1(x))))
        return y, y[:, -1:, :] * 2.0


class MiscOps(nn.Module):
    """Standalone batch norm, sum/amax reductions, uneven adaptive pooling, index_put, host and oneDNN
    elementwise ops, a permute and a slice."""

    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm2d(4)
        self.bn.running_mean.uniform_(-0.5, 0.5)
        self.bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x: torch.Tensor, index: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = self.bn(x + 1.0)
        pooled = F.adaptive_avg_pool2d(y, 3)  # 7x7 -> 3x3: uneven windows
        reduced = y.sum(dim=1) + y.amax(dim=1)
        rows = torch.floor(torch.exp(-y.abs()) * 4.0) + torch.sqrt(y * y + 1.0) + torch.tanh(y)
        put = torch.index_put(x.reshape(4, 49), (index,), values, accumulate=True)
        return pooled, reduced, rows.permute(0, 2, 3, 1)[:, 1:5], put


class Int8Cnn(nn.Module):
    """conv/relu pairs, a residual add, a linear head: static int8 through OneDnnQuantizer (PT2E)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.block = nn.Conv2d(8, 8, 3, padding=1)
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.stem(x))
        y = torch.relu(self.block(y)) + y
        return self.head(y.mean((2, 3)))


class CachedAttention(nn.Module):
    """export_llm's llama::custom_sdpa over a KV cache (CACHED_ATTENTION, its start an int64 input)."""

    def __init__(self) -> None:
        super().__init__()
        self.project = nn.Linear(16, 32)

    def forward(self, x: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        q = self.project(x).reshape(1, x.shape[1], 2, 16)
        return torch.ops.llama.custom_sdpa(q, k, v, pos[0].item(), None, 0.0, True)


def _cached_attention() -> tuple[nn.Module, tuple[torch.Tensor, ...], object, dict[str, object]]:
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  (registers llama::custom_sdpa)

    inputs = (torch.randn(1, 3, 16), torch.randn(1, 8, 1, 16), torch.randn(1, 8, 1, 16), torch.tensor([2]))
    return CachedAttention(), inputs, None, {}


def _static_int8(model: nn.Module, example: tuple[torch.Tensor, ...]) -> nn.Module:
    """prepare_pt2e with OneDnnQuantizer, calibrate on a few random batches, convert_pt2e."""
    from executorch.backends.onednn.quantizer import OneDnnQuantizer
    from torchao.quantization.pt2e import allow_exported_model_train_eval
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    prepared = prepare_pt2e(torch.export.export(model.eval(), example).module(), OneDnnQuantizer())
    with torch.no_grad():
        for batch in [example] + [tuple(torch.randn_like(x) for x in example) for _ in range(3)]:
            prepared(*batch)
    converted = convert_pt2e(prepared)
    allow_exported_model_train_eval(converted)
    return converted


def _partitioner(**options: object) -> object:
    from executorch.backends.onednn import OneDnnPartitioner

    return OneDnnPartitioner(**options)  # type: ignore[arg-type]


# name -> (model, example inputs, dynamic_shapes, partitioner options)
Model = tuple[nn.Module, tuple[torch.Tensor, ...], object, dict[str, object]]


def _models() -> dict[str, Callable[[], Model]]:
    seq = Dim("seq", min=1, max=32)
    return {
        "convnet": lambda: (ConvNet(), (torch.randn(1, 3, 8, 8),), None, {}),
        "mlp": lambda: (Mlp(), (torch.randn(2, 16),), None, {}),
        "attention": lambda: (AttentionBlock(), (torch.randn(1, 6, 16),), None, {}),
        "index_ops": lambda: (
            IndexOps(),
            (torch.randint(0, 32, (2, 5)), torch.randn(2, 5, 8)),
            None,
            {},
        ),
        "unet_bits": lambda: (UNetBits(), (torch.randn(1, 4, 6, 6),), None, {}),
        "dynamic_mlp": lambda: (DynamicMlp(), (torch.randn(1, 5, 8),), {"x": {1: seq}}, {}),
        "mlp_dynamic_int8": lambda: (Mlp(), (torch.randn(2, 16),), None, {"dynamic_int8": True}),
        "mlp_bf16": lambda: (Mlp(), (torch.randn(2, 16),), None, {"precision": "bf16"}),
        "misc_ops": lambda: (
            MiscOps(),
            (torch.randn(1, 4, 7, 7), torch.tensor([0, 2, 2]), torch.randn(3, 49)),
            None,
            {},
        ),
        "int8_cnn": lambda: (
            _static_int8(Int8Cnn(), (torch.randn(1, 3, 8, 8),)),
            (torch.randn(1, 3, 8, 8),),
            None,
            {},
        ),
        "cached_attention": _cached_attention,
        # Constant records that end with their weights' CRC-32 (the harness serves weights that match).
        "mlp_weight_checksums": lambda: (Mlp(), (torch.randn(2, 16),), None, {"weight_checksums": True}),
    }


def payloads(name: str, make: Callable[[], Model]) -> list[bytes]:
    import executorch.exir as exir
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    torch.manual_seed(0)
    model, inputs, dynamic_shapes, options = make()
    model.eval()  # a converted PT2E module's eval() returns None
    exported = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes)  # type: ignore[arg-type]
    edge = exir.to_edge_transform_and_lower(exported, partitioner=[_partitioner(**options)])
    module = edge.exported_program().graph_module
    found = [child.processed_bytes for _, child in module.named_children() if isinstance(child, LoweredBackendModule)]
    if not found:
        raise RuntimeError(f"{name}: nothing was delegated to OneDnnBackend")
    return found


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", nargs="?", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--only", nargs="+", default=None, help="model names (default: all)")
    args = parser.parse_args(argv)
    models = _models()
    names = args.only or list(models)
    args.output.mkdir(parents=True, exist_ok=True)
    total = 0
    for name in names:
        try:
            found = payloads(name, models[name])
        except TypeError as error:  # a partitioner option this version does not have
            print(f"{name}: skipped ({error})")
            continue
        for index, payload in enumerate(found):
            path = args.output / f"{name}_{index}.odnn"
            path.write_bytes(payload)
            total += len(payload)
            print(f"{path}: {len(payload)} bytes")
    print(f"{total} bytes in all")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
