# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""ExecuTorch's `llama::custom_sdpa` over a KV cache (what export_llm writes with
`model.use_sdpa_with_kv_cache=True`): one CACHED_ATTENTION step whose start position is read at run time,
against the custom op's own kernel at several positions of one loaded program."""

from __future__ import annotations

import pytest
import torch
from executorch.backends.onednn.serialization.payload import deserialize
from executorch.backends.onednn.serialization.schema import MAX_ATTENTION_VALUE_WIDTH, StepKind
from tester import execute_each, lower
from torch import nn

pytest.importorskip("executorch.extension.llm.custom_ops.custom_ops")


class CachedAttention(nn.Module):
    def __init__(self, causal: bool = True, scale: float | None = None, mask: bool = False) -> None:
        super().__init__()
        self.causal, self.scale, self.mask = causal, scale, mask

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        mask = torch.zeros(q.shape[1], k.shape[1]) if self.mask else None
        # As export_llm's attention: the queries come from a delegated op, the start from input_pos[0].
        start = pos[0].item()
        return torch.ops.llama.custom_sdpa(q * 1.0, k, v, start, mask, 0.0, self.causal, self.scale) + 0.0


def caches(length: int, kv_heads: int, width: int, value_width: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(length * 31 + width)
    return (
        torch.randn(1, length, kv_heads, width, generator=generator),
        torch.randn(1, length, kv_heads, value_width, generator=generator),
    )


CASES = {
    # name: (queries, heads, kv_heads, cache length, width, value width, causal, scale, starts)
    "prompt_at_0": (5, 4, 2, 16, 32, 32, True, None, [0, 3, 11]),
    "one_token_grouped": (1, 8, 2, 40, 16, 16, True, None, [0, 17, 39]),
    "keys_past_one_chunk": (3, 2, 2, 200, 64, 64, True, 0.3, [0, 70, 150, 197]),
    "widths_off_the_vector_lanes": (4, 3, 1, 20, 12, 12, True, None, [0, 9, 16]),
    "not_causal": (4, 2, 1, 24, 16, 16, False, None, [0, 5, 20]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_custom_sdpa_is_one_step_matching_the_custom_op_at_every_start(name: str) -> None:
    queries, heads, kv_heads, length, width, value_width, causal, scale, starts = CASES[name]
    model = CachedAttention(causal, scale)
    k, v = caches(length, kv_heads, width, value_width)
    q = torch.randn(1, queries, heads, width, generator=torch.Generator().manual_seed(7))
    lowered = lower(model, (q, k, v, torch.tensor([starts[0]])))
    assert lowered.delegate_calls == 1 and lowered.undelegated_compute == [], lowered.undelegated_compute
    steps = [step.kind for data in lowered_payloads(lowered) for step in data.steps]
    assert steps.count(StepKind.CACHED_ATTENTION) == 1

    assert_each_start_matches(model, lowered.buffer, [(q, k, v, torch.tensor([start])) for start in starts], 1e-5)


def test_a_start_that_does_not_fit_the_cache_fails_that_call_only() -> None:
    k, v = caches(16, 2, 16, 16)
    q = torch.randn(1, 3, 2, 16)
    lowered = lower(CachedAttention(), (q, k, v, torch.tensor([0])))
    results = execute_each(lowered.buffer, [(q, k, v, torch.tensor([start])) for start in (14, -1, 13)])
    assert isinstance(results[0], str) and isinstance(results[1], str)
    assert not isinstance(results[2], str)
    torch.testing.assert_close(results[2][0], CachedAttention()(q, k, v, torch.tensor([13])), rtol=1e-5, atol=1e-5)


def test_a_nan_in_the_visible_cache_makes_the_rows_that_see_it_nan() -> None:
    k, v = caches(16, 1, 16, 16)
    k[0, 4] = float("nan")
    q = torch.randn(1, 6, 2, 16)
    lowered = lower(CachedAttention(), (q, k, v, torch.tensor([0])))
    (result,) = execute_each(lowered.buffer, [(q, k, v, torch.tensor([0]))])
    assert not isinstance(result, str), result
    rows_nan = result[0].isnan().any(dim=-1).any(dim=-1)[0]
    assert rows_nan.tolist() == [False] * 4 + [True] * 2  # queries 4 and 5 see key 4


class ProjectedQueries(nn.Module):
    """Queries from a linear layer, which computes in bf16 under precision="bf16"."""

    def __init__(self) -> None:
        super().__init__()
        self.project = nn.Linear(32, 4 * 16)

    def forward(self, x: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        q = self.project(x).reshape(1, x.shape[1], 4, 16)
        return torch.ops.llama.custom_sdpa(q, k, v, pos[0].item(), None, 0.0, True)


def test_bf16_queries_attend_in_f32_within_bf16_rounding() -> None:
    from executorch.backends.onednn import OneDnnPartitioner

    torch.manual_seed(3)
    model = ProjectedQueries().eval()
    k, v = caches(24, 2, 16, 16)
    x = torch.randn(1, 5, 32)
    lowered = lower(model, (x, k, v, torch.tensor([0])), partitioner=OneDnnPartitioner(precision="bf16"))
    assert lowered.delegate_calls == 1 and lowered.undelegated_compute == [], lowered.undelegated_compute
    assert_each_start_matches(model, lowered.buffer, [(x, k, v, torch.tensor([start])) for start in (0, 19)], 2e-2)


def test_custom_sdpa_with_a_mask_stays_with_executorch() -> None:
    k, v = caches(16, 2, 16, 16)
    q = torch.randn(1, 3, 2, 16)
    lowered = lower(CachedAttention(causal=False, mask=True), (q, k, v, torch.tensor([0])))
    assert "llama::custom_sdpa" in lowered.undelegated_compute


def test_values_wider_than_the_kernel_takes_stay_with_executorch() -> None:
    width = MAX_ATTENTION_VALUE_WIDTH + 16
    k, v = caches(8, 1, width, width)  # custom_sdpa takes keys as wide as its values
    q = torch.randn(1, 2, 1, width)
    lowered = lower(CachedAttention(), (q, k, v, torch.tensor([0])))
    assert "llama::custom_sdpa" in lowered.undelegated_compute


def assert_each_start_matches(
    model: nn.Module, buffer: bytes, input_sets: list[tuple[torch.Tensor, ...]], tolerance: float
) -> None:
    """One loaded program run on each set in turn (the start is the last input), against eager."""
    for inputs, result in zip(input_sets, execute_each(buffer, input_sets), strict=True):
        assert not isinstance(result, str), result
        expected = model(*inputs)
        error = float((result[0] - expected).abs().max() / expected.abs().max())
        assert error < tolerance, f"start {int(inputs[-1])}: relative error {error:.3g}"


def lowered_payloads(lowered: object) -> list[object]:
    from executorch.exir._serialize._program import deserialize_pte_binary

    program = deserialize_pte_binary(lowered.buffer).program  # type: ignore[attr-defined]
    return [deserialize(data.data) for data in program.backend_delegate_data]
