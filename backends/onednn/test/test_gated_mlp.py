# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""SwiGLU and GeGLU MLPs: the gate's activation and the gate multiply become post-ops of the two
projections (fuse_post_ops), so the MLP is three matmuls and nothing else."""

from __future__ import annotations

import pytest
import torch
from executorch.backends.onednn import OneDnnPartitioner
from executorch.backends.onednn.serialization.schema import BinaryAlg, PostOpKind, StepKind
from tester import run_and_compare
from torch import nn
from torch.nn import functional as F


class GatedMlp(nn.Module):
    def __init__(self, dim: int, hidden: int, activation: str) -> None:
        super().__init__()
        self.gate, self.up = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)
        self.activation = {"swiglu": F.silu, "geglu": F.gelu}[activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.activation(self.gate(x)) * self.up(x))


@pytest.mark.parametrize("activation", ["swiglu", "geglu"])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_gated_mlp_is_three_matmuls_with_the_gate_multiply_fused(activation: str, precision: str) -> None:
    model, inputs = GatedMlp(64, 172, activation), (torch.randn(1, 5, 64),)
    tolerance = 1e-4 if precision == "fp32" else 2e-2
    outcome = run_and_compare(activation, model, inputs, tolerance, OneDnnPartitioner(precision=precision))
    outcome.assert_matches()
    outcome.assert_delegated(exactly_one=True)
    steps = outcome.lowered.steps()
    kinds = [step.kind for step in steps if step.kind != StepKind.RESHAPE]
    assert kinds == [StepKind.MATMUL] * 3, kinds
    post_ops = [[op[:2] for op in s.post_ops()] for s in steps]
    assert any((PostOpKind.BINARY, BinaryAlg.MUL) in ops for ops in post_ops), post_ops
