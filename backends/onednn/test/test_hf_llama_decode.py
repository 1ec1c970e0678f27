"""The Hugging Face Llama example (examples/onednn/hf_llama_decode.py) on a small configuration: with the
static KV cache inside the program, greedy decoding through the delegate gives eager's tokens for 32
steps, and what ExecuTorch keeps is the cache writes, the embedding and the position and mask arithmetic."""

from __future__ import annotations

import torch
from executorch.backends.onednn import OneDnnPartitioner
from executorch.exir import to_edge_transform_and_lower
from tester import classify, in_worker
from torch import nn

from examples.onednn.hf_llama_decode import FIRST_TOKEN, build_model, decode, eager_tokens

STEPS = 32
LAYERS = 2
# Ops that stay with ExecuTorch: no oneDNN primitive computes them (sin, cos, comparisons, gathers,
# cache writes into mutable buffers) or they compute int64 positions.
KEPT_BY_EXECUTORCH = {
    "aten::embedding", "aten::index_put", "aten::sin", "aten::cos", "aten::le", "aten::where", "aten::add",
    "aten::mul", "aten::arange", "aten::select_copy", "aten::unsqueeze_copy", "aten::expand_copy",
    "aten::copy", "dim_order_ops::_to_dim_order_copy", "aten::scalar_tensor",
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
    _delegates, kept, _layout = classify(edge.exported_program().graph)
    assert set(kept) <= KEPT_BY_EXECUTORCH, kept
    assert kept.count("aten::index_put") == 2 * LAYERS, kept  # each layer's keys and values
    tokens = in_worker(_decode, edge.to_executorch().buffer)
    assert tokens == expected
