# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The KV-cache decoder example (examples/onednn/llama_decode.py) on a small configuration: greedy decoding
through the delegate gives eager PyTorch's tokens for 32 steps, and each method is one delegate call with
nothing left to ExecuTorch (the embedding lookup is a gather inside)."""

from __future__ import annotations

import torch
from executorch.backends.onednn import OneDnnPartitioner
from tester import classify, in_worker

from examples.onednn.llama_decode import DecoderConfig, build_decoder, generate, load_methods, lower_decoder

CONFIG = DecoderConfig(vocab=256, dim=64, layers=2, heads=4, kv_heads=2, hidden=160, cache=48, prompt=8)
STEPS = 32


def _generate_from(buffer: bytes, prompt: torch.Tensor) -> list[int]:
    prefill, decode, _program = load_methods(buffer)
    return generate(prefill, decode, CONFIG, prompt, STEPS).tokens


def test_greedy_decoding_through_the_delegate_gives_eagers_tokens() -> None:
    model = build_decoder(CONFIG)
    prompt = torch.randint(0, CONFIG.vocab, (1, CONFIG.prompt), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        expected = generate(model, model, CONFIG, prompt, STEPS).tokens
    assert len(set(expected)) > 4, f"a degenerate model repeats itself: {expected}"
    edge = lower_decoder(model, [OneDnnPartitioner()])
    for method in ("prefill", "decode"):
        delegates, compute, _layout = classify(edge.exported_program(method).graph)
        assert delegates == 1, f"{method}: {delegates} delegate calls"
        assert compute == [], f"{method}: left to ExecuTorch: {compute}"
    tokens = in_worker(_generate_from, edge.to_executorch().buffer, prompt)
    assert tokens == expected
