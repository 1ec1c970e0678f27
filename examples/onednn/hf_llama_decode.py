# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""A Hugging Face `transformers` Llama (built from a config, random weights, no download) exported with
its static KV cache inside the program, as transformers' ExecuTorch recipe does, then greedy decoding.

    python -m examples.onednn.hf_llama_decode --steps 64 --threads 2

`TorchExportableModuleForDecoderOnlyLM` exports `forward(input_ids [1, 1], cache_position [1])` with the
cache as mutable buffers: every call writes its token's keys and values into the cache (index_put) and
attends over it. Our delegate takes the compute (projections, RMSNorm, attention, MLPs, LM head), the
embedding lookup, the mask's comparisons and the cache writes; the position arithmetic (int64) and the
rotary tables' sin/cos stay with ExecuTorch. Each flow decodes from the same first token and prints
decode tokens/s and how many of its tokens eager PyTorch's decoding gave too.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
from executorch.backends.onednn import OneDnnPartitioner, torch_threads
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.exir.backend.partitioner import Partitioner
from executorch.runtime import Runtime
from torch import nn

FIRST_TOKEN = 5
CACHE = 160  # positions the static KV cache holds
FLOWS = ("onednn", "onednn-bf16", "xnnpack")


def build_model(layers: int = 4, cache: int = CACHE, seed: int = 0) -> nn.Module:
    """The exportable wrapper around a LlamaForCausalLM of width 512 (8 query heads, 4 key/value heads)."""
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM
    from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        hidden_size=512, intermediate_size=1408, num_hidden_layers=layers, num_attention_heads=8,
        num_key_value_heads=4, vocab_size=8192, max_position_embeddings=2 * cache, attn_implementation="sdpa",
    )  # fmt: skip
    model = LlamaForCausalLM(config).eval()
    model.generation_config = GenerationConfig(
        use_cache=True, cache_implementation="static", cache_config={"batch_size": 1, "max_cache_len": cache}
    )
    return TorchExportableModuleForDecoderOnlyLM(model, batch_size=1, max_cache_len=cache)


def partitioner(flow: str) -> Partitioner:
    if flow == "xnnpack":
        return XnnpackPartitioner()
    return OneDnnPartitioner(precision="bf16" if flow == "onednn-bf16" else "fp32")


def lower(model: nn.Module, flow: str) -> tuple[bytes, int]:
    """The .pte and its delegate calls per token."""
    ep = model.export(input_ids=torch.tensor([[FIRST_TOKEN]]), cache_position=torch.tensor([0]))  # type: ignore[operator]
    edge = to_edge_transform_and_lower(ep, partitioner=[partitioner(flow)])
    graph = edge.exported_program().graph
    calls = sum(node.target is torch.ops.higher_order.executorch_call_delegate for node in graph.nodes)
    return edge.to_executorch().buffer, calls


def eager_tokens(model: nn.Module, steps: int) -> list[int]:
    tokens, token = [], FIRST_TOKEN
    with torch.no_grad():
        for position in range(steps):
            logits = model.model(input_ids=torch.tensor([[token]]), cache_position=torch.tensor([position]))  # type: ignore[operator]
            token = int(logits[0, -1].argmax())
            tokens.append(token)
    return tokens


def decode(buffer: bytes, steps: int) -> tuple[list[int], float]:
    """Greedy tokens from the .pte and the decode tokens/s (every call after the first timed)."""
    program = Runtime.get().load_program(buffer)
    method = program.load_method("forward")
    tokens, token, started = [], FIRST_TOKEN, 0.0
    for position in range(steps):
        if position == 1:
            started = time.perf_counter()
        logits = method.execute([torch.tensor([[token]]), torch.tensor([position])])[0]
        token = int(logits[0, -1].argmax())
        tokens.append(token)
    return tokens, (steps - 1) / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=64, help="tokens to decode (at most the cache length)")
    parser.add_argument("--flows", default=",".join(FLOWS), help=f"comma-separated: {', '.join(FLOWS)}")
    parser.add_argument("--threads", type=int, default=0, help="torch's and ExecuTorch's threads (0: all cores)")
    args = parser.parse_args(argv)
    if not 2 <= args.steps <= CACHE:
        parser.error(f"--steps: 2 to {CACHE}")
    if args.threads:
        from executorch.extension.pybindings import portable_lib

        torch.set_num_threads(args.threads)
        portable_lib._unsafe_reset_threadpool(args.threads)
    expected = eager_tokens(build_model(), args.steps)
    for flow in args.flows.split(","):
        if flow not in FLOWS:
            parser.error(f"unknown flow {flow!r}")
        buffer, calls = lower(build_model(), flow)
        with torch_threads(1):  # torch's workers off the cores the program runs on (its README, "Known issues")
            tokens, per_second = decode(buffer, args.steps)
        same = sum(a == b for a, b in zip(tokens, expected))
        agree = f"{same}/{len(expected)} tokens as eager"
        print(f"{flow}: decode {per_second:.1f} tokens/s, {agree}, {calls} delegate calls per token")
    return 0


if __name__ == "__main__":
    sys.exit(main())
