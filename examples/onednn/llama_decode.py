# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""A Llama-style decoder with a KV cache, exported with a delegate: prefill a prompt, then greedy decoding.

    python -m examples.onednn.llama_decode --steps 64 --threads 2

The decoder is built in code with random weights (no download): RMSNorm, rotary position embeddings,
grouped-query attention, SwiGLU MLPs, an LM head. One `.pte` holds two methods with static shapes,
`prefill` (a prompt of `prompt` tokens) and `decode` (one token). The KV cache lives with the caller:
each method reads the cache so far and returns the keys and values of its own tokens, which the caller
writes into the cache at their positions; the rotary tables and the attention mask (which hides the
cache slots not written yet) are inputs too. So every method is static and its whole body after the
embedding lookup is one delegate call, with no cache-update ops inside.

Each flow (our delegate in fp32 and in bf16, the XNNPACK delegate) generates from the same prompt; it
prints prefill and decode tokens/s and how many of its tokens eager PyTorch's greedy decoding gave too.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

Run = Callable[..., Sequence[torch.Tensor]]  # (tokens, cos, sin, mask, k_cache, v_cache) -> (logits, k, v)


@dataclass(frozen=True)
class DecoderConfig:
    vocab: int = 8192
    dim: int = 512
    layers: int = 4
    heads: int = 8
    kv_heads: int = 4
    hidden: int = 1408
    cache: int = 256  # positions the KV cache holds: prompt + generated tokens
    prompt: int = 32
    rope_theta: float = 10000.0
    eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding (the halves convention): cos and sin are [T, head_dim]."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin


class Attention(nn.Module):
    def __init__(self, config: DecoderConfig) -> None:
        super().__init__()
        self.config = config
        kv_dim = config.kv_heads * config.head_dim
        self.q = nn.Linear(config.dim, config.dim, bias=False)
        self.k = nn.Linear(config.dim, kv_dim, bias=False)
        self.v = nn.Linear(config.dim, kv_dim, bias=False)
        self.o = nn.Linear(config.dim, config.dim, bias=False)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor,
        k_cache: torch.Tensor, v_cache: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
        c, tokens = self.config, x.shape[1]
        group = c.heads // c.kv_heads
        q = rotate(self.q(x).view(1, tokens, c.heads, c.head_dim).transpose(1, 2), cos, sin)
        k = rotate(self.k(x).view(1, tokens, c.kv_heads, c.head_dim).transpose(1, 2), cos, sin)
        v = self.v(x).view(1, tokens, c.kv_heads, c.head_dim).transpose(1, 2)
        keys, values = torch.cat([k_cache, k], 2), torch.cat([v_cache, v], 2)
        # The query heads sharing a key/value head become rows of one matmul: no repeated keys.
        queries = q.reshape(1, c.kv_heads, group * tokens, c.head_dim)
        scores = (queries @ keys.transpose(-1, -2)) * (1.0 / math.sqrt(c.head_dim))
        scores = scores.view(1, c.kv_heads, group, tokens, keys.shape[2]) + mask
        probs = torch.softmax(scores, -1).view(1, c.kv_heads, group * tokens, keys.shape[2])
        out = (probs @ values).view(1, c.heads, tokens, c.head_dim).transpose(1, 2).reshape(1, tokens, c.dim)
        return self.o(out), k, v


class Block(nn.Module):
    def __init__(self, config: DecoderConfig) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(config.dim, config.eps)
        self.attention = Attention(config)
        self.mlp_norm = RMSNorm(config.dim, config.eps)
        self.gate = nn.Linear(config.dim, config.hidden, bias=False)
        self.up = nn.Linear(config.dim, config.hidden, bias=False)
        self.down = nn.Linear(config.hidden, config.dim, bias=False)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor,
        k_cache: torch.Tensor, v_cache: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
        attended, k, v = self.attention(self.attention_norm(x), cos, sin, mask, k_cache, v_cache)
        x = x + attended
        normed = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(normed)) * self.up(normed)), k, v


class Decoder(nn.Module):
    """forward(tokens [1, T], cos/sin [T, head_dim], mask [T, cache + T], k_cache/v_cache
    [layers, 1, kv_heads, cache, head_dim]) -> (logits of the last token [1, vocab], the T tokens' keys
    and values [layers, 1, kv_heads, T, head_dim])."""

    def __init__(self, config: DecoderConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab, config.dim)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers))
        self.norm = RMSNorm(config.dim, config.eps)
        self.head = nn.Linear(config.dim, config.vocab, bias=False)

    def forward(
        self, tokens: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor,
        k_cache: torch.Tensor, v_cache: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
        x = self.embed(tokens)
        keys, values = [], []
        for index, block in enumerate(self.blocks):
            x, k, v = block(x, cos, sin, mask, k_cache[index], v_cache[index])
            keys.append(k)
            values.append(v)
        return self.head(self.norm(x[:, -1])), torch.stack(keys), torch.stack(values)


def build_decoder(config: DecoderConfig, seed: int = 0) -> Decoder:
    torch.manual_seed(seed)
    model = Decoder(config).eval()
    with torch.no_grad():  # RMSNorm weights around 1, not exactly 1
        for module in model.modules():
            if isinstance(module, RMSNorm):
                module.weight.uniform_(0.8, 1.2)
    return model


class KVCache:
    """The caller's side: the cache, the rotary tables and the mask of each call."""

    def __init__(self, config: DecoderConfig) -> None:
        self.config = config
        shape = (config.layers, 1, config.kv_heads, config.cache, config.head_dim)
        self.k, self.v = torch.zeros(shape), torch.zeros(shape)
        half = config.head_dim // 2
        frequencies = config.rope_theta ** (-torch.arange(half, dtype=torch.float64) / half)
        angles = torch.arange(config.cache, dtype=torch.float64)[:, None] * frequencies[None, :]
        angles = torch.cat([angles, angles], -1)
        self.cos, self.sin = angles.cos().float(), angles.sin().float()
        self.filled = 0

    def inputs(self, tokens: torch.Tensor) -> tuple[torch.Tensor, ...]:
        count, start = tokens.shape[1], self.filled
        if start + count > self.config.cache:
            raise ValueError(f"the cache holds {self.config.cache} positions, {start + count} needed")
        mask = torch.full((count, self.config.cache + count), float("-inf"))
        mask[:, :start] = 0.0  # the cache written so far
        mask[:, self.config.cache :] = torch.triu(torch.full((count, count), float("-inf")), 1)  # causal
        window = slice(start, start + count)
        return tokens, self.cos[window], self.sin[window], mask, self.k, self.v

    def append(self, k: torch.Tensor, v: torch.Tensor) -> None:
        count = k.shape[3]
        self.k[:, :, :, self.filled : self.filled + count] = k
        self.v[:, :, :, self.filled : self.filled + count] = v
        self.filled += count


@dataclass
class Generation:
    tokens: list[int]
    decode_s: float  # the `steps` decode calls, cache writes included


def generate(prefill: Run, decode: Run, config: DecoderConfig, prompt: torch.Tensor, steps: int) -> Generation:
    """Greedy decoding: the prompt's next token, then `steps` more, one call each."""
    cache = KVCache(config)
    logits, k, v = prefill(*cache.inputs(prompt))
    cache.append(k, v)
    token = int(logits.argmax(-1))
    tokens = [token]
    start = time.perf_counter()
    for _ in range(steps):
        logits, k, v = decode(*cache.inputs(torch.tensor([[token]])))
        cache.append(k, v)
        token = int(logits.argmax(-1))
        tokens.append(token)
    return Generation(tokens, time.perf_counter() - start)


def prefill_seconds(prefill: Run, config: DecoderConfig, prompt: torch.Tensor, repeats: int = 10) -> float:
    """The median time of one prefill (each into an empty cache): one call is too noisy a sample."""
    times = []
    for _ in range(repeats):
        inputs = KVCache(config).inputs(prompt)
        start = time.perf_counter()
        prefill(*inputs)
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def example_inputs(config: DecoderConfig, tokens: int) -> tuple[torch.Tensor, ...]:
    return KVCache(config).inputs(torch.zeros((1, tokens), dtype=torch.long))


def lower_decoder(model: Decoder, partitioners: list[Any]) -> Any:
    """Methods `prefill` and `decode` lowered with `partitioners` (none: ExecuTorch's kernels); the
    EdgeProgramManager."""
    from executorch.exir import to_edge_transform_and_lower

    config = model.config
    programs = {
        "prefill": torch.export.export(model, example_inputs(config, config.prompt)),
        "decode": torch.export.export(model, example_inputs(config, 1)),
    }
    return to_edge_transform_and_lower(programs, partitioner=partitioners)


def export_program(model: Decoder, partitioners: list[Any]) -> bytes:
    """The `.pte`, its inputs not memory-planned (as ExecuTorch's own LLM export does): each call reads the
    caller's KV cache where it is instead of copying it into the method's memory first."""
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes import MemoryPlanningPass

    config = ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False))
    return lower_decoder(model, partitioners).to_executorch(config).buffer


def load_methods(buffer: bytes) -> tuple[Run, Run, Any]:
    """The program's prefill and decode as callables, and the program (which must outlive them)."""
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(buffer)
    prefill, decode = program.load_method("prefill"), program.load_method("decode")
    return (lambda *args: prefill.execute(list(args))), (lambda *args: decode.execute(list(args))), program


def _partitioners(flow: str) -> list[Any]:
    if flow == "xnnpack":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        return [XnnpackPartitioner()]
    from executorch.backends.onednn import OneDnnPartitioner

    return [OneDnnPartitioner(precision="bf16" if flow == "onednn-bf16" else "fp32")]


FLOWS = ("onednn", "onednn-bf16", "xnnpack")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=64, help="tokens decoded after the prompt's next one")
    parser.add_argument("--flows", default=",".join(FLOWS), help=f"comma-separated: {', '.join(FLOWS)}")
    parser.add_argument("--threads", type=int, default=0, help="torch's and ExecuTorch's threads (0: all cores)")
    args = parser.parse_args(argv)
    config = DecoderConfig()
    if config.prompt + args.steps > config.cache:
        parser.error(f"--steps: at most {config.cache - config.prompt}")
    if args.threads:
        from executorch.extension.pybindings import portable_lib

        torch.set_num_threads(args.threads)
        portable_lib._unsafe_reset_threadpool(args.threads)
    from executorch.backends.onednn import torch_threads

    model = build_decoder(config)
    prompt = torch.randint(0, config.vocab, (1, config.prompt), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        eager = generate(model, model, config, prompt, args.steps)
        eager_prefill_s = prefill_seconds(model, config, prompt)
    print(f"eager PyTorch: prefill {config.prompt / eager_prefill_s:.0f} tokens/s, "
          f"decode {args.steps / eager.decode_s:.1f} tokens/s")  # fmt: skip
    for flow in args.flows.split(","):
        if flow not in FLOWS:
            parser.error(f"unknown flow {flow!r}")
        prefill, decode, _program = load_methods(export_program(model, _partitioners(flow)))
        with torch_threads(1):  # torch's workers off the cores the program runs on (its README, "Known issues")
            generate(prefill, decode, config, prompt, 2)  # warm-up: first-call costs stay out of the rates
            result = generate(prefill, decode, config, prompt, args.steps)
            prefill_s = prefill_seconds(prefill, config, prompt)
        agree = sum(a == b for a, b in zip(result.tokens, eager.tokens))
        print(f"{flow}: prefill {config.prompt / prefill_s:.0f} tokens/s, "
              f"decode {args.steps / result.decode_s:.1f} tokens/s, "
              f"{agree}/{len(eager.tokens)} tokens as eager")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
