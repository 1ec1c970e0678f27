# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""RMSNorm lowers to one RMS_NORM step (_passes/fuse_rms_norm.py) and matches eager PyTorch."""

from __future__ import annotations

import pytest
import torch
from executorch.backends.onednn import OneDnnPartitioner
from executorch.backends.onednn.serialization.schema import NO_VALUE, StepKind
from tester import run_and_compare
from torch import nn


class LlamaStyle(nn.Module):
    """As examples/onednn/llama_decode.py writes it."""

    def __init__(self, dim: int, weighted: bool = True) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim)) if weighted else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normalized = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)
        return normalized if self.weight is None else normalized * self.weight


class HuggingFaceStyle(nn.Module):
    """As transformers' LlamaRMSNorm writes it: the weight first, casts around the normalization."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = x.to(torch.float32)
        variance = hidden.pow(2).mean(-1, keepdim=True)
        hidden = hidden * torch.rsqrt(variance + 1e-6)
        return self.weight * hidden.to(x.dtype)


class Block(nn.Module):
    """RMSNorm between two linear layers, its input read by a residual add too."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm, self.up, self.down = LlamaStyle(dim), nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(self.norm(x))))


CASES = {
    "llama_style": (LlamaStyle(37), (torch.randn(2, 5, 37),)),
    "without_weight": (LlamaStyle(64, weighted=False), (torch.randn(3, 64),)),
    "hugging_face_style": (HuggingFaceStyle(48), (torch.randn(1, 7, 48),)),
    "in_a_block": (Block(32), (torch.randn(4, 32),)),
}


@pytest.mark.parametrize("name", CASES)
def test_rms_norm_is_one_step_matching_eager(name: str) -> None:
    model, inputs = CASES[name]
    outcome = run_and_compare(name, model, inputs)
    outcome.assert_matches()
    outcome.assert_delegated(exactly_one=True)
    (step,) = outcome.lowered.steps(StepKind.RMS_NORM)
    assert (step.inputs[1] == NO_VALUE) == (name == "without_weight")


def test_bf16_rms_norm_within_tolerance() -> None:
    model, inputs = CASES["in_a_block"]
    outcome = run_and_compare("bf16", model, inputs, tolerance=2e-2, partitioner=OneDnnPartitioner(precision="bf16"))
    outcome.assert_matches()
    assert len(outcome.lowered.steps(StepKind.RMS_NORM)) == 1


def test_an_intermediate_read_elsewhere_keeps_the_steps() -> None:
    """The mean square is an output too: nothing is fused, the result stays right."""

    class Exposed(nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            mean_square = x.pow(2).mean(-1, keepdim=True)
            return x * torch.rsqrt(mean_square + 1e-5), mean_square

    outcome = run_and_compare("exposed", Exposed(), (torch.randn(3, 16),))
    outcome.assert_matches()
    assert not outcome.lowered.steps(StepKind.RMS_NORM)
