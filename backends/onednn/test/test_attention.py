# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Decomposed scaled_dot_product_attention, including PyTorch's guard for fully masked rows."""

from __future__ import annotations

import math

import pytest
import torch
from tester import run_and_compare
from torch import nn
from torch.nn import functional as F


class Attention(nn.Module):
    def __init__(self, is_causal: bool = False) -> None:
        super().__init__()
        self.is_causal = is_causal

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.is_causal)


class MaskedAttention(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _qkv(target: int = 7, source: int = 9, heads: int = 3, width: int = 16) -> tuple[torch.Tensor, ...]:
    return tuple(torch.randn(2, heads, n, width) for n in (target, source, source))


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
def test_attention_is_one_delegate_call_and_matches_eager(is_causal: bool) -> None:
    outcome = run_and_compare("sdpa", Attention(is_causal), _qkv(target=9))
    outcome.assert_delegated(exactly_one=True)
    outcome.assert_matches()


def test_fully_masked_rows_give_zeros_like_pytorch() -> None:
    q, k, v = _qkv()
    mask = torch.zeros(7, 9)
    mask[2, :] = -math.inf  # a row with nothing to attend to
    mask[4, 5:] = -math.inf
    outcome = run_and_compare("masked_sdpa", MaskedAttention(), (q, k, v, mask))
    outcome.assert_delegated(exactly_one=True)
    outcome.assert_matches()
    (result,) = outcome.outputs
    assert torch.equal(result[:, :, 2], torch.zeros_like(result[:, :, 2])), "fully masked row is not zero"


class WhereSelect(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.where(x > 0, x, y).relu()


def test_where_outside_the_softmax_guard_is_a_host_select() -> None:
    outcome = run_and_compare("where_select", WhereSelect(), (torch.randn(4, 5), torch.randn(4, 5)), tolerance=0.0)
    outcome.assert_delegated(exactly_one=True)
    assert {"aten::where", "aten::gt", "aten::relu"} <= outcome.lowered.delegated_ops, outcome.lowered.describe()
    outcome.assert_matches()


class GroupedQueryAttention(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def test_grouped_query_attention_is_one_delegate_call() -> None:
    # 6 query heads share 2 key/value heads: the expanded keys and values are copies made inside.
    q, k, v = torch.randn(1, 6, 5, 16), torch.randn(1, 2, 5, 16), torch.randn(1, 2, 5, 16)
    outcome = run_and_compare("gqa_sdpa", GroupedQueryAttention(), (q, k, v))
    outcome.assert_delegated(exactly_one=True, allow_layout=False)
    outcome.assert_matches()
