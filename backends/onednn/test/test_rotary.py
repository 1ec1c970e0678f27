# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Interleaved rotary embeddings lower to one ROTARY step (_passes/fuse_interleaved_rotary.py) that
gives eager PyTorch's f32 results bit for bit."""

from __future__ import annotations

import pytest
import torch
from executorch.backends.onednn import OneDnnPartitioner
from executorch.backends.onednn.serialization.schema import StepKind
from executorch.examples.models.llama.rope import apply_rotary_emb
from tester import execute, lower, run_and_compare
from torch import nn
from torch.export import Dim


class Rotate(nn.Module):
    """ExecuTorch's Llama rotary embedding of queries and keys, between other steps."""

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        q_rotated, k_rotated = apply_rotary_emb(q * 2.0, k * 3.0, cos, sin)
        return q_rotated + 1.0, k_rotated + 1.0


def _inputs(batch: int, positions: int, heads: int, kv_heads: int, width: int) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(positions * 100 + heads)
    return (
        torch.randn(batch, positions, heads, width),
        torch.randn(batch, positions, kv_heads, width),
        torch.randn(positions, width // 2),
        torch.randn(positions, width // 2),
    )


def _assert_equal_to_eager(outputs: list[torch.Tensor], model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> None:
    expected = model(*inputs)
    for got, want in zip(outputs, expected):
        torch.testing.assert_close(got, want, rtol=0.0, atol=0.0, equal_nan=True)


@pytest.mark.parametrize(
    ("batch", "positions", "heads", "kv_heads", "width"),
    [(1, 1, 32, 8, 64), (1, 7, 8, 2, 64), (2, 5, 4, 4, 32), (1, 3, 1, 1, 128)],
)
def test_rotary_is_one_step_per_tensor_equal_to_eager(
    batch: int, positions: int, heads: int, kv_heads: int, width: int
) -> None:
    inputs = _inputs(batch, positions, heads, kv_heads, width)
    outcome = run_and_compare("rotary", Rotate(), inputs)
    outcome.assert_delegated(exactly_one=True)
    rotary = outcome.lowered.steps(StepKind.ROTARY)
    assert len(rotary) == 2
    kinds = {step.kind for step in outcome.lowered.steps()}
    assert StepKind.CONCAT not in kinds and StepKind.BINARY not in kinds, kinds
    _assert_equal_to_eager(outcome.outputs, Rotate(), inputs)


def test_non_finite_values_propagate_as_in_eager() -> None:
    q, k, cos, sin = _inputs(1, 4, 4, 2, 16)
    q[0, 0, 0, :4] = torch.tensor([float("nan"), float("inf"), float("-inf"), 0.0])
    cos[1, 0], sin[2, 3] = float("inf"), float("nan")
    inputs = (q, k, cos, sin)
    lowered = lower(Rotate(), inputs)
    assert len(lowered.steps(StepKind.ROTARY)) == 2
    _assert_equal_to_eager(execute(lowered.buffer, inputs), Rotate(), inputs)


def test_dynamic_positions_take_every_length() -> None:
    inputs = _inputs(1, 16, 8, 2, 64)
    positions = Dim("positions", min=1, max=16)
    shapes = ({1: positions}, {1: positions}, {0: positions}, {0: positions})
    lowered = lower(Rotate(), inputs, dynamic_shapes=shapes)
    assert len(lowered.steps(StepKind.ROTARY)) == 2
    for length in (1, 5, 16):
        sized = (inputs[0][:, :length], inputs[1][:, :length], inputs[2][:length], inputs[3][:length])
        _assert_equal_to_eager(execute(lowered.buffer, sized), Rotate(), sized)


def test_bf16_rotary_within_tolerance() -> None:
    inputs = _inputs(1, 6, 8, 2, 64)
    outcome = run_and_compare("bf16", Rotate(), inputs, tolerance=2e-2, partitioner=OneDnnPartitioner(precision="bf16"))
    outcome.assert_matches()
    assert len(outcome.lowered.steps(StepKind.ROTARY)) == 2


class NotARotation(nn.Module):
    """The interleaved pattern with the sign of one product flipped: no ROTARY."""

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x0, x1 = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
        real = x0 * cos + x1 * sin
        imag = x0 * sin + x1 * cos
        return torch.stack([real, imag], dim=-1).flatten(-2)


class HalfExposed(nn.Module):
    """A rotary embedding whose real half is an output too: the steps stay, the results right."""

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x0, x1 = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
        real = x0 * cos - x1 * sin
        imag = x0 * sin + x1 * cos
        return torch.stack([real, imag], dim=-1).flatten(-2), real


@pytest.mark.parametrize("model", [NotARotation(), HalfExposed()], ids=["not_a_rotation", "half_exposed"])
def test_other_patterns_keep_their_steps(model: nn.Module) -> None:
    torch.manual_seed(0)
    inputs = (torch.randn(2, 3, 16), torch.randn(3, 8), torch.randn(3, 8))
    outcome = run_and_compare("kept", model, inputs)
    outcome.assert_matches()
    assert not outcome.lowered.steps(StepKind.ROTARY)
