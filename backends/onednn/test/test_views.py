# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Layout-only ops as free views: a permute (or a reshape its strides allow) of strided memory is
metadata only; matmul reads such a view in place when oneDNN keeps its fast kernel for those strides,
and every other consumer gets one plain copy, shared.

Each case is lowered once and run with oneDNN's verbose trace on. The payload still holds the
REORDER steps with a permutation; the trace must show that exactly the copies the case allows ran (a
head merge reshape, a conversion for a consumer that takes plain only, a graph output), and the
outputs must match eager PyTorch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from executorch.backends.onednn.serialization.schema import StepKind
from support import Fn, Record, describe, execute_traced
from tester import DEFAULT_TOLERANCE, flatten_outputs, lower, mismatch
from torch import nn


class Attention(nn.Module):
    """Multi-head self-attention as ExecuTorch sees BERT's or ViT's: view, permute, matmul, softmax."""

    def __init__(self, dim: int = 32, heads: int = 4, transpose_k_early: bool = False) -> None:
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
        self.transpose_k_early = transpose_k_early

    def split(self, t: torch.Tensor) -> torch.Tensor:
        b, s, d = t.shape
        return t.view(b, s, self.heads, d // self.heads).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, v = self.split(self.q(x)), self.split(self.v(x))
        if self.transpose_k_early:  # GPT-2 style: K permuted straight to [B, H, D, S]
            kt = self.k(x).view(b, s, self.heads, d // self.heads).permute(0, 2, 3, 1)
        else:
            kt = self.split(self.k(x)).transpose(-2, -1)
        scores = torch.softmax(q @ kt * (d // self.heads) ** -0.5, dim=-1)
        return self.o((scores @ v).transpose(1, 2).reshape(b, s, d))


@dataclass(frozen=True)
class Case:
    name: str
    model: Callable[[], nn.Module]
    shapes: tuple[tuple[int, ...], ...]
    # Reorders execute() may run, as (src tag, dst tag) with '*' for a tag that depends on the CPU.
    reorders: tuple[tuple[str, str], ...]


# oneDNN 3.2's brgemm matmul reads a transposed (last two dims) src or weights in place, but not a
# head-split [H, S, D] view of [S, H, D] bytes: that view is copied once, where the matmul reads it,
# and the head merge is one copy too (its reshape merges dims the strides keep apart).
HEAD_SPLIT_COPIES = (("bac", "abc"), ("cab", "abc"), ("bac", "abc"), ("acbd", "abcd"))

CASES = [
    Case("attention_head_split_and_merge", lambda: Attention(), ((1, 10, 32),), HEAD_SPLIT_COPIES),
    Case("attention_k_permuted_to_bhds", lambda: Attention(transpose_k_early=True), ((1, 10, 32),), HEAD_SPLIT_COPIES),
    Case(
        "k_transpose_of_graph_input_feeds_matmul",
        lambda: Fn(lambda m, q, k: q @ k.transpose(-2, -1)),
        ((3, 5, 8), (3, 7, 8)),
        (),
    ),
    Case(
        "permute_of_graph_input_feeds_linear",
        lambda: Fn(lambda m, x: m.parts.fc(x.permute(0, 2, 1)), fc=nn.Linear(6, 16)),
        ((2, 6, 12),),
        (),
    ),
    # Eltwise and layer norm take plain input: one conversion, shared by both consumers.
    Case(
        "permute_feeds_consumers_that_take_plain",
        lambda: Fn(
            lambda m, x: (torch.relu(x.permute(0, 2, 1)), m.parts.ln(x.permute(0, 2, 1))),
            ln=nn.LayerNorm(6),
        ),
        ((2, 6, 12),),
        (("acb", "abc"),),
    ),
    Case(
        "permute_is_also_a_graph_output",
        lambda: Fn(lambda m, x, w: then(x.transpose(1, 2), lambda p: (p, p @ w))),
        ((2, 6, 12), (6, 5)),
        (("acb", "abc"),),
    ),
    Case(
        "permute_then_reshape_the_strides_allow",
        lambda: Fn(lambda m, x, w: x.transpose(-1, -2).reshape(4, 5, 8) @ w),
        ((1, 4, 8, 5), (8, 3)),
        (),
    ),
    Case(
        "permute_then_reshape_that_needs_a_copy",
        lambda: Fn(lambda m, x, w: x.permute(0, 2, 1, 3).reshape(2, 20, 8) @ w),
        ((2, 5, 4, 8), (8, 3)),
        (("acbd", "abcd"),),
    ),
    Case(
        "permute_of_a_permute",
        lambda: Fn(lambda m, x, y: x.permute(0, 2, 1).transpose(1, 2).permute(0, 2, 1) @ y),
        ((2, 6, 12), (2, 6, 4)),
        (),
    ),
    # A permute that moves only size-1 dims (a decoding step's head split, T = 1) is plain memory: it
    # once reached oneDNN's binary as an "acbd" src with odd strides, which it computed wrong.
    Case(
        "permute_of_size_one_dims_feeds_a_broadcasting_binary",
        lambda: Fn(lambda m, x, c: x.view(1, 1, 2, 16).transpose(1, 2) * c),
        ((1, 1, 32), (1, 16)),
        (),
    ),
    Case("attention_of_one_token", lambda: Attention(), ((1, 1, 32),), ()),
    # A blocked convolution output is permuted by one reorder into the permute's plain output (not
    # blocked -> plain -> permuted plain), however many consumers read it.
    Case(
        "permute_of_a_blocked_conv_output",
        lambda: Fn(
            lambda m, x: then(m.parts.c(x).permute(0, 2, 3, 1), lambda p: (torch.sigmoid(p), m.parts.fc(p))),
            c=nn.Conv2d(8, 16, 3, padding=1),
            fc=nn.Linear(16, 8),
        ),
        ((1, 8, 6, 6),),
        (("*", "acdb"),),
    ),
]


def then(value: object, fn: Callable[[object], object]) -> object:
    return fn(value)


def matches(record: Record, allowed: tuple[str, str]) -> bool:
    tags = dict(record.layouts)
    return all(want in ("*", tags.get(arg)) for arg, want in zip(("src", "dst"), allowed))


def run_traced(name: str, model: nn.Module, shapes: tuple[tuple[int, ...], ...], attribute: str) -> list[Record]:
    """Lowers `model` (one delegate call, with a REORDER step carrying `attribute`), runs it against eager
    PyTorch and returns the trace of its execute()."""
    torch.manual_seed(0)
    model = model.eval()
    inputs = tuple(torch.randn(shape) for shape in shapes)
    lowered = lower(model, inputs)
    assert lowered.delegate_calls == 1 and not lowered.undelegated_compute, lowered.describe()
    (graph,) = lowered.payloads()
    assert any(s.kind == StepKind.REORDER and attribute in s.ints for s in graph.steps), f"no {attribute} step"
    outputs, trace = execute_traced(lowered.buffer, inputs)
    with torch.no_grad():
        expected = flatten_outputs(model(*inputs))
    problem = mismatch(name, outputs, expected, DEFAULT_TOLERANCE)
    assert problem is None, f"{problem}\n{describe(trace)}"
    return trace


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_layout_only_ops_run_as_views(case: Case) -> None:
    trace = run_traced(case.name, case.model(), case.shapes, "permutation")

    reorders = [r for r in trace if r.primitive == "reorder"]
    unexpected = list(reorders)
    for allowed in case.reorders:
        found = next((r for r in unexpected if matches(r, allowed)), None)
        assert found is not None, f"expected a reorder {allowed[0]} -> {allowed[1]}\n{describe(trace)}"
        unexpected.remove(found)
    assert not unexpected, f"copies a view should have avoided: {[str(r) for r in unexpected]}\n{describe(trace)}"


@pytest.mark.parametrize(
    ("fn", "shapes", "copies"),
    [
        (lambda m, x, w: x[1] @ w, ((3, 4, 8), (8, 5)), 0),  # a whole row of a graph input
        (lambda m, x, w: torch.relu(x)[:, 1:3].reshape(1, 16) @ w, ((1, 4, 8), (16, 5)), 0),  # rows of a result
        (lambda m, x, w: x[:, 1:3] @ w, ((2, 4, 8), (8, 5)), 1),  # rows of each batch: not contiguous
    ],
    ids=["select_of_a_graph_input", "rows_of_a_step_result", "rows_of_every_batch"],
)
def test_a_slice_whose_bytes_are_contiguous_is_a_view(
    fn: Callable[..., object], shapes: tuple[tuple[int, ...], ...], copies: int
) -> None:
    trace = run_traced("slice", Fn(fn), shapes, "offsets")
    reorders = [r for r in trace if r.primitive == "reorder"]
    assert len(reorders) == copies, describe(trace)


@pytest.mark.parametrize(
    ("fn", "pieces"),
    [
        # A rotary embedding's pairs: 4-byte pieces side by side.
        (lambda m, a, b: torch.stack([a * 2, b + 1], dim=-1).flatten(-2), 2),
        # Three inputs of two values each (8-byte pieces), along a middle axis of size 1.
        (lambda m, a, b, c: torch.cat([a * 2, b + 1, c - 1], dim=2), 3),
    ],
    ids=["rotary_pairs", "three_small_pieces"],
)
def test_a_concat_of_small_pieces_interleaves_on_the_host(fn: Callable[..., torch.Tensor], pieces: int) -> None:
    """Pieces of at most 64 bytes go side by side in a host loop, not oneDNN's concat (which copies
    them an element at a time); the bytes are the same."""
    shape = (1, 6, 1, 2) if pieces == 3 else (2, 6, 4, 8)
    inputs = tuple(torch.randn(shape) for _ in range(pieces))
    model = Fn(fn)
    lowered = lower(model, inputs)
    assert lowered.delegate_calls == 1 and not lowered.undelegated_compute, lowered.describe()
    assert any(step.kind == StepKind.CONCAT for step in lowered.steps())
    outputs, trace = execute_traced(lowered.buffer, inputs)
    assert not [r for r in trace if r.primitive == "concat"], describe(trace)
    with torch.no_grad():
        expected = flatten_outputs(model(*inputs))
    assert [torch.equal(a, e) for a, e in zip(outputs, expected)] == [True] * len(expected)
