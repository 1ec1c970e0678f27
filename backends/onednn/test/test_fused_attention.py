# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The ATTENTION step (_passes/fuse_attention.py): attention lowers to one step and matches
torch.nn.functional.scaled_dot_product_attention over masks, causality, grouped-query heads, odd and
long lengths, and bf16. (test_attention.py covers the decomposition around it.)"""

from __future__ import annotations

import math

import pytest
import torch
from executorch.backends.onednn import OneDnnPartitioner
from executorch.backends.onednn._passes import fuse_attention
from executorch.backends.onednn.serialization.payload import Graph, Step
from executorch.backends.onednn.serialization.schema import NO_VALUE, BinaryAlg, DType, EltwiseAlg, StepKind
from tester import run_and_compare
from torch import nn
from torch.nn import functional as F


class Attention(nn.Module):
    def __init__(self, causal: bool = False, gqa: bool = False, scale: float | None = None) -> None:
        super().__init__()
        self.causal, self.gqa, self.scale = causal, gqa, scale

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *mask: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask[0] if mask else None, is_causal=self.causal, enable_gqa=self.gqa, scale=self.scale
        )


def qkv(batch: int, heads: int, kv_heads: int, queries: int, keys: int, width: int = 16) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(queries * 131 + keys)
    return (
        torch.randn(batch, heads, queries, width, generator=generator),
        torch.randn(batch, kv_heads, keys, width, generator=generator),
        torch.randn(batch, kv_heads, keys, width // 2, generator=generator),
    )


def fully_masked_row(queries: int, keys: int) -> torch.Tensor:
    mask = torch.randn(1, 1, queries, keys)
    mask[..., 3, :] = -math.inf
    mask[..., 4, 2:] = -math.inf
    return mask


CASES = {
    "plain": (Attention(), qkv(2, 4, 4, 33, 40)),
    "three_dims": (Attention(), tuple(t[:, 0] for t in qkv(2, 1, 1, 33, 40))),
    "causal": (Attention(causal=True), qkv(1, 4, 4, 37, 37)),
    "causal_fewer_queries": (Attention(causal=True), qkv(1, 4, 4, 5, 37)),
    "grouped_query": (Attention(gqa=True), qkv(1, 8, 2, 9, 20)),
    "grouped_query_causal": (Attention(causal=True, gqa=True), qkv(1, 8, 2, 20, 20)),
    "scale": (Attention(scale=0.3), qkv(1, 2, 2, 9, 9)),
    "mask_rows_and_keys": (Attention(), (*qkv(2, 4, 4, 33, 40), torch.randn(33, 40))),
    "mask_fully_masked_row": (Attention(), (*qkv(2, 4, 4, 33, 40), fully_masked_row(33, 40))),
    "one_query": (Attention(), (*qkv(1, 4, 4, 1, 40), torch.randn(1, 1, 1, 40))),
    "long_causal_in_query_blocks": (Attention(causal=True), qkv(1, 4, 4, 1100, 1100, 32)),
}


@pytest.mark.parametrize("name", CASES)
def test_attention_is_one_step_matching_eager(name: str) -> None:
    model, inputs = CASES[name]
    outcome = run_and_compare(name, model, inputs)
    outcome.assert_matches()
    outcome.assert_delegated(exactly_one=True)
    steps = outcome.lowered.steps(StepKind.ATTENTION)
    assert len(steps) == 1, outcome.lowered.describe()
    assert steps[0].ints["causal"] == [int(model.causal)]


def test_a_constant_causal_mask_becomes_the_attribute() -> None:
    class CausalByMask(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("mask", torch.zeros(12, 12).masked_fill(~torch.ones(12, 12).bool().tril(), -math.inf))

        def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask)

    outcome = run_and_compare("causal_by_mask", CausalByMask(), qkv(1, 2, 2, 12, 12))
    outcome.assert_matches()
    (step,) = outcome.lowered.steps(StepKind.ATTENTION)
    assert step.ints["causal"] == [1] and step.inputs[3] == NO_VALUE


@pytest.mark.parametrize("name", ["causal", "grouped_query", "mask_fully_masked_row"])
def test_bf16_attention_within_tolerance(name: str) -> None:
    model, inputs = CASES[name]
    outcome = run_and_compare(name, model, inputs, tolerance=2e-2, partitioner=OneDnnPartitioner(precision="bf16"))
    outcome.assert_matches()
    assert len(outcome.lowered.steps(StepKind.ATTENTION)) == 1


def test_hand_written_attention_with_a_plain_softmax_keeps_nan_rows() -> None:
    """A plain softmax gives NaN for a row masked entirely; the fused step must too."""

    class HandWritten(nn.Module):
        def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return torch.softmax(q @ k.transpose(-1, -2) * 0.25 + mask, -1) @ v

    inputs = (*qkv(1, 2, 2, 6, 8), fully_masked_row(6, 8))
    outcome = run_and_compare("hand_written", HandWritten(), inputs)
    (step,) = outcome.lowered.steps(StepKind.ATTENTION)
    assert step.ints["zero_fully_masked_rows"] == [0]
    expected, (output,) = outcome.expected[0], outcome.outputs
    assert torch.equal(output.isnan(), expected.isnan()) and output.isnan().any()
    assert torch.allclose(output.nan_to_num(), expected.nan_to_num(), atol=1e-5)


def test_a_mask_varying_per_head_across_a_flattened_batch_stays_unfused() -> None:
    """Scores flattened to [batch * heads, L, S] cannot take a per-head mask: the steps stay as they were."""
    outcome = run_and_compare("per_head_mask", Attention(), (*qkv(2, 4, 4, 9, 9), torch.randn(2, 4, 9, 9)))
    outcome.assert_matches()
    assert not outcome.lowered.steps(StepKind.ATTENTION)


# --- the pass on hand-made graphs --------------------------------------------------------------------------
def scores_graph(mask_dims: tuple[int, ...] | None, reshaped: bool, view: tuple[int, ...] = (2, 2, 6, 7)) -> Graph:
    """q [4, 6, 8] @ kᵀ [4, 8, 7] * 0.5 [viewed as `view`] [+ mask] -> softmax -> [viewed back] @ v."""
    graph = Graph()
    q, kt, v = (
        graph.add_value(DType.F32, (4, 6, 8)),
        graph.add_value(DType.F32, (4, 8, 7)),
        graph.add_value(DType.F32, (4, 7, 5)),
    )
    graph.inputs = [q, kt, v]
    scores = graph.add_value(DType.F32, (4, 6, 7))
    graph.add_step(
        Step(
            StepKind.MATMUL,
            [q, kt, NO_VALUE],
            [scores],
            {"transpose_b": [0], "post_ops": [0, EltwiseAlg.LINEAR]},
            {"post_op_params": [0.5, 0.0]},
        )
    )
    seen = scores
    if reshaped:
        seen = graph.add_value(DType.F32, view)
        graph.add_step(Step(StepKind.RESHAPE, [scores], [seen]))
    if mask_dims is not None:
        mask = graph.add_value(DType.F32, mask_dims)
        graph.inputs.append(mask)
        masked = graph.add_value(DType.F32, graph.values[seen].dims)
        graph.add_step(Step(StepKind.BINARY, [seen, mask], [masked], {"alg": [BinaryAlg.ADD]}))
        seen = masked
    probabilities = graph.add_value(DType.F32, graph.values[seen].dims)
    graph.add_step(
        Step(StepKind.SOFTMAX, [seen], [probabilities], {"axis": [len(graph.values[seen].dims) - 1], "log": [0]})
    )
    if reshaped:
        flat = graph.add_value(DType.F32, (4, 6, 7))
        graph.add_step(Step(StepKind.RESHAPE, [probabilities], [flat]))
        probabilities = flat
    out = graph.add_value(DType.F32, (4, 6, 5))
    graph.add_step(Step(StepKind.MATMUL, [probabilities, v, NO_VALUE], [out], {"transpose_b": [0]}))
    graph.outputs = [out]
    return graph


@pytest.mark.parametrize(
    ("mask_dims", "reshaped", "fused"),
    [
        (None, False, True),
        (None, True, True),
        ((6, 7), True, True),
        ((1, 1, 6, 7), True, True),
        ((2, 1, 6, 7), True, False),  # varies along the batch that the flattened scores mix with heads
        ((4, 6, 7), False, True),
        ((6, 1), False, False),  # the runtime takes masks spanning every key only
        ((1, 1, 1, 1, 7), True, True),  # one row for every query (a decode step's mask), any rank
    ],
)
def test_the_pass_fuses_only_what_the_step_computes_the_same(
    mask_dims: tuple[int, ...] | None, reshaped: bool, fused: bool
) -> None:
    graph = fuse_attention(scores_graph(mask_dims, reshaped))
    last = graph.steps[-1]
    assert (last.kind == StepKind.ATTENTION) == fused
    if fused:
        assert last.ints["keys_transposed"] == [1] and last.floats["scale"] == [0.5]
        assert (last.inputs[3] == NO_VALUE) == (mask_dims is None)


def test_a_softmax_over_regrouped_rows_is_not_fused() -> None:
    graph = fuse_attention(scores_graph(None, True, view=(4, 42)))
    assert graph.steps[-1].kind == StepKind.MATMUL


def test_a_scores_value_read_twice_is_not_fused() -> None:
    graph = scores_graph(None, False)
    graph.outputs.append(graph.steps[0].outputs[0])
    assert fuse_attention(graph).steps[-1].kind == StepKind.MATMUL


def _keys_from_a_transposing_copy(graph: Graph, also_read: bool) -> int:
    """Makes the graph's kᵀ input [4, 8, 7] the copy of keys [1, 4, 7, 8] swapping their last two dims,
    reshaped; the keys' value id."""
    kt = graph.inputs[1]
    keys = graph.add_value(DType.F32, (1, 4, 7, 8))
    copied = graph.add_value(DType.F32, (1, 4, 8, 7))
    graph.inputs[1] = keys
    graph.steps[:0] = [
        Step(StepKind.REORDER, [keys], [copied], {"permutation": [0, 1, 3, 2]}),
        Step(StepKind.RESHAPE, [copied], [kt]),
    ]
    if also_read:
        graph.outputs.append(copied)
    return keys


@pytest.mark.parametrize("also_read", [False, True])
def test_keys_transposed_by_a_copy_are_read_where_they_were(also_read: bool) -> None:
    graph = scores_graph(None, False)
    keys = _keys_from_a_transposing_copy(graph, also_read)
    fused = fuse_attention(graph)
    attention = fused.steps[-1]
    assert attention.kind == StepKind.ATTENTION
    if also_read:  # the copy is a graph output too: it stays, and the step reads it
        assert attention.ints["keys_transposed"] == [1]
        assert fused.steps[0].kind == StepKind.REORDER
        return
    assert attention.ints["keys_transposed"] == [0]
    reshape = fused.steps[0]
    assert reshape.kind == StepKind.RESHAPE and reshape.inputs == [keys]
    assert reshape.outputs == [attention.inputs[1]] and fused.values[attention.inputs[1]].dims == (4, 7, 8)
