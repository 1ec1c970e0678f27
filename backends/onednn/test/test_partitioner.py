# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""What OneDnnPartitioner claims, what it refuses and why, and that refused nodes still run correctly."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from executorch.backends.onednn import OneDnnPartitioner
from executorch.exir import to_edge_transform_and_lower
from tester import lower, run_and_compare
from torch import nn
from torch.nn import functional as F


class Fn(nn.Module):
    def __init__(self, fn: Callable[..., object], **modules: nn.Module) -> None:
        super().__init__()
        self.fn = fn
        self.parts = nn.ModuleDict(modules)

    def forward(self, *xs: torch.Tensor) -> object:
        return self.fn(self, *xs)


@dataclass(frozen=True)
class Refusal:
    id: str
    model: Callable[[], nn.Module]
    inputs: Callable[[], tuple[torch.Tensor, ...]]
    # The op left to ExecuTorch ('aten::avg_pool2d') and a phrase its rejection reason must contain.
    op: str
    reason: str
    # Delegated compute around the refused node: the program is split, not abandoned.
    min_delegates: int = 1


def randn(*shapes: tuple[int, ...]) -> Callable[[], tuple[torch.Tensor, ...]]:
    return lambda: tuple(torch.randn(s, generator=torch.Generator().manual_seed(i)) for i, s in enumerate(shapes))


def around(op: Callable[..., torch.Tensor], **modules: nn.Module) -> Callable[[], nn.Module]:
    """relu -> op -> tanh: the refused op sits between two delegated ones."""
    return lambda: Fn(lambda m, *xs: torch.tanh(op(m, *(torch.relu(x) for x in xs))), **modules)


class TableAtPosition(nn.Module):
    """A table read at a position taken from tensor data (`.item()`), as export_llm's rotary tables are
    at the decode position: no input dim gives the runtime that position."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("table", torch.randn(16, 8, generator=torch.Generator().manual_seed(0)))

    def forward(self, x: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        start = position.item()
        torch._check(start >= 0)
        torch._check(start <= 15)
        return torch.tanh(torch.relu(x) + self.table[start : start + 1])


IMG = (1, 3, 8, 8)
REFUSALS = [
    Refusal(
        "avg_pool2d_divisor_override",
        around(lambda m, x: F.avg_pool2d(x, 2, divisor_override=3)),
        randn(IMG),
        "aten::avg_pool2d",
        "divisor_override",
        min_delegates=2,
    ),
    Refusal(
        "conv_with_runtime_weights",
        around(lambda m, x, w: F.conv2d(x, w)),
        randn(IMG, (4, 3, 3, 3)),
        "aten::convolution",
        "weights must be constant",
        min_delegates=1,
    ),
    Refusal(
        "bilinear_align_corners_large",
        around(lambda m, x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True)),
        randn((1, 2, 8, 200)),
        "aten::upsample_bilinear2d",
        "align_corners=True",
        min_delegates=2,
    ),
    Refusal(
        "layer_norm_over_two_dims",
        around(lambda m, x: m.parts.norm(x), norm=nn.LayerNorm((5, 16))),
        randn((2, 5, 16)),
        "aten::native_layer_norm",
        "more than the last dim",
        min_delegates=2,
    ),
    Refusal(
        "clamp_with_tensor_bounds",
        around(lambda m, x, lo: torch.clamp(x, min=lo)),
        randn((4, 8), (4, 8)),
        "aten::clamp",
        "no oneDNN rule",  # clamp.Tensor, a different overload from the scalar-bounds clamp
        min_delegates=2,
    ),
    Refusal(
        "max_pool_indices_used",
        lambda: Fn(lambda m, x: F.max_pool2d(torch.relu(x), 2, return_indices=True)),
        randn(IMG),
        "aten::max_pool2d_with_indices",
        "only its first output",
    ),
    Refusal(
        "int64_arithmetic",
        lambda: Fn(lambda m, x, idx: torch.relu(x) + (idx * 3).to(torch.float32)),
        lambda: (torch.randn(4, 8), torch.arange(32).reshape(4, 8)),
        "aten::mul",
        "dtype torch.int64",
    ),
    Refusal(
        "slice_at_a_position_read_from_data",
        TableAtPosition,
        lambda: (torch.randn(1, 8), torch.tensor([3])),
        "aten::slice_copy",
        "a position read from tensor data",
    ),
    Refusal(
        "selu_scale",
        around(lambda m, x: F.selu(x)),
        randn((4, 8)),
        "aten::elu",
        "scale",
        min_delegates=2,
    ),
]


def rejection_for(rejections: dict[str, str], op: str) -> list[str]:
    """Reasons given for nodes running `op` (node names are derived from the op's name)."""
    stem = op.split("::")[1].lstrip("_")
    return [reason for name, reason in rejections.items() if stem in name]


@pytest.mark.parametrize("case", REFUSALS, ids=[c.id for c in REFUSALS])
def test_refused_node_stays_outside_and_program_still_matches_eager(case: Refusal) -> None:
    outcome = run_and_compare(case.id, case.model(), case.inputs())
    lowered = outcome.lowered
    outside = lowered.undelegated_compute + lowered.undelegated_layout
    assert case.op in outside, f"{case.id}: expected {case.op} left to ExecuTorch; {lowered.describe()}"
    reasons = rejection_for(lowered.partitioner.rejections, case.op)
    assert any(case.reason in r for r in reasons), (
        f"{case.id}: no rejection of {case.op} mentions {case.reason!r}; rejections {lowered.partitioner.rejections}"
    )
    assert lowered.delegate_calls >= case.min_delegates, (
        f"{case.id}: expected the ops around the refused node delegated; {lowered.describe()}"
    )
    outcome.assert_matches()


def test_claims_a_conv_net_whole_with_no_rejections() -> None:
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
    lowered = lower(model, (torch.randn(1, 3, 8, 8),))
    assert lowered.delegate_calls == 1 and not lowered.undelegated_compute, lowered.describe()
    assert lowered.partitioner.rejections == {}, lowered.partitioner.rejections


def test_rejection_names_the_missing_rule_for_unknown_ops() -> None:
    lowered = lower(Fn(lambda m, x: torch.cumsum(torch.relu(x), 1)), (torch.randn(3, 4),))
    reasons = rejection_for(lowered.partitioner.rejections, "aten::cumsum")
    assert reasons and all("no oneDNN rule" in r and "cumsum" in r for r in reasons), lowered.partitioner.rejections


def test_views_alone_are_not_delegated() -> None:
    # ExecuTorch's memory planning makes view_copy free; a delegate call would cost a copy.
    outcome = run_and_compare("views_only", Fn(lambda m, x: x.reshape(4, 6).view(24)), (torch.randn(2, 3, 4),))
    assert outcome.delegate_calls == 0, f"a graph of only views was delegated: {outcome.lowered.describe()}"
    assert outcome.lowered.partitioner.rejections == {}, "views are supported, just not worth a delegate call"
    outcome.assert_matches()


@pytest.mark.parametrize(
    "name, fn",
    [
        ("permute", lambda m, x: x.reshape(4, 6).permute(1, 0).unsqueeze(0).flatten()),
        ("transpose", lambda m, x: x.transpose(0, 2)),
        ("slice", lambda m, x: x[:, 1:3]),
        ("select", lambda m, x: x[1]),
        ("split", lambda m, x: torch.split(x, [1, 2], dim=1)),
        ("expand", lambda m, x: x[:, :1].expand(2, 5, 4)),
        ("squeeze", lambda m, x: x.unsqueeze(0).squeeze(0)),
        ("identity", lambda m, x: x.clone()),
    ],
)
def test_data_movement_alone_is_delegated(name: str, fn: Callable[..., object]) -> None:
    outcome = run_and_compare(f"move_{name}", Fn(fn), (torch.randn(2, 3, 4),))
    assert outcome.delegate_calls == 1, outcome.lowered.describe()
    assert not outcome.lowered.undelegated_layout, outcome.lowered.describe()
    outcome.assert_matches()


def test_partitioner_can_be_reused_and_reports_the_last_program() -> None:
    partitioner = OneDnnPartitioner()
    lower(Fn(lambda m, x: torch.cumsum(x, 0)), (torch.randn(3, 4),), partitioner)
    assert partitioner.rejections
    lowered = lower(nn.Sequential(nn.Linear(4, 4), nn.ReLU()), (torch.randn(3, 4),), partitioner)
    assert partitioner.rejections == {}, f"stale rejections from an earlier program: {partitioner.rejections}"
    assert lowered.delegate_calls == 1, lowered.describe()


class TimesLiftedConstant(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.tensor(3.0)  # a lifted tensor constant, taken by the delegate


def test_lowering_leaves_the_users_exported_program_runnable() -> None:
    x = torch.randn(2, 4)
    ep = torch.export.export(TimesLiftedConstant(), (x,))
    edge = to_edge_transform_and_lower(ep, partitioner=[OneDnnPartitioner()])
    assert any("call_delegate" in str(node.target) for node in edge.exported_program().graph.nodes)
    torch.testing.assert_close(ep.module()(x), x * 3)
