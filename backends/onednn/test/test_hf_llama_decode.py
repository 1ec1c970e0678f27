# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The Hugging Face Llama example (examples/onednn/hf_llama_decode.py) on a small configuration: with the
static KV cache inside the program, greedy decoding through the delegate gives eager's tokens for 32
steps in at most two delegate calls per token (the cache writes are INDEX_PUT steps inside the delegate),
and what ExecuTorch keeps is the rotary sin/cos and the int64 position arithmetic."""

from __future__ import annotations

import torch
from executorch.backends.onednn import OneDnnPartitioner
from executorch.exir import to_edge_transform_and_lower
from tester import classify, in_worker
from torch import nn

from examples.onednn.hf_llama_decode import FIRST_TOKEN, build_model, decode, eager_tokens

STEPS = 32
LAYERS = 2
MAX_DELEGATE_CALLS = 2
# Ops that stay with ExecuTorch: no oneDNN primitive computes sin and cos, the positions are int64
# arithmetic, and `copy` writes the mutated cache buffers back.
KEPT_BY_EXECUTORCH = {
    "aten::sin", "aten::cos", "aten::add", "aten::mul", "aten::arange", "aten::copy",
    "dim_order_ops::_to_dim_order_copy", "aten::scalar_tensor",
}  # fmt: skip


def _small_model() -> nn.Module:
    return build_model(layers=LAYERS, cache=STEPS + 8)


def _decode(buffer: bytes) -> list[int]:
    return decode(buffer, STEPS)[0]


def test_greedy_decoding_with_the_cache_in_the_program_gives_eagers_tokens() -> None:
    expected = eager_tokens(_small_model(), STEPS)
    assert len(set(expected)) > 4, f"a degenerate model repeats itself: {expected}"
    model = _small_model()
    ep = model.export(input_ids=torch.tensor([[FIRST_TOKEN]]), cache_position=torch.tensor([0]))  # type: ignore[operator]
    edge = to_edge_transform_and_lower(ep, partitioner=[OneDnnPartitioner()])
    delegates, kept, _layout = classify(edge.exported_program().graph)
    assert delegates <= MAX_DELEGATE_CALLS, delegates
    assert set(kept) <= KEPT_BY_EXECUTORCH, kept
    tokens = in_worker(_decode, edge.to_executorch().buffer)
    assert tokens == expected
