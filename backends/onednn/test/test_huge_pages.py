# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The backend option "huge_pages": constants that a program's steps read whole on every call where the
program holds them (4-bit weights in the one-row and several-row matmuls) are copied at load into one
block the kernel is asked to back with 2 MiB pages (README, "Huge pages for streamed weights").

What a user could lose: a step reading the old bytes after they were let go (a crash or stale
numbers), a graph built later for a new size missing the moved copy, or a table read a few rows a call
(an embedding) copied for nothing. So the results under every setting are compared bit for bit, a
dynamic program runs its sizes in turns, and the block is looked for in the process's own mappings."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
import torch
from executorch.backends.onednn import set_huge_pages
from executorch.backends.onednn.serialization.schema import StepKind
from support import _load_under
from tester import in_worker, lower
from torch import nn
from torch.export import Dim

IN_FEATURES, OUT_FEATURES = 1024, 2048  # 1 MiB of int4 weights and 128 KiB of scales a layer
_THP_MODE = pathlib.Path("/sys/kernel/mm/transparent_hugepage/enabled")
# The runtime asks for huge pages only where the kernel would grant them (runtime/HostMemory.h).
HUGE_PAGES_GRANTED = _THP_MODE.exists() and "[never]" not in _THP_MODE.read_text()
NO_HUGE_PAGES = "the kernel has no transparent huge pages, or their mode is [never]"


def quantized_layers(embedding_rows: int = 0) -> nn.Module:
    """Two 8da4w linear layers, as export_llm quantizes them, after an embedding when asked."""
    from torchao.quantization.granularity import PerGroup
    from torchao.quantization.quant_api import Int8DynamicActivationIntxWeightConfig, quantize_

    torch.manual_seed(0)
    layers = nn.Sequential(nn.Linear(IN_FEATURES, OUT_FEATURES), nn.ReLU(), nn.Linear(OUT_FEATURES, IN_FEATURES))
    quantize_(layers, Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4, weight_granularity=PerGroup(32)))
    if embedding_rows == 0:
        return layers.eval()
    return nn.Sequential(nn.Embedding(embedding_rows, IN_FEATURES), layers).eval()


def madvised_huge_bytes() -> int:
    """Bytes of this process's mappings flagged for transparent huge pages (VmFlags "hg")."""
    total, size = 0, 0
    for line in pathlib.Path("/proc/self/smaps").read_text().splitlines():
        if line.startswith("Size:"):
            size = int(line.split()[1]) * 1024
        elif line.startswith("VmFlags:") and "hg" in line.split()[1:]:
            total += size
    return total


def _run_under(buffer: bytes, use: str, inputs: list[list[torch.Tensor]]) -> tuple[list[torch.Tensor], int]:
    """Runs in the worker: each input list through one loaded program, and the bytes the load asked
    huge pages for."""
    before = madvised_huge_bytes()
    program, method = _load_under(buffer, set_huge_pages, use, "large")
    asked = madvised_huge_bytes() - before
    outputs = [method.execute(each)[0].clone() for each in inputs]
    del method, program
    return outputs, asked


def run_under(buffer: bytes, use: str, inputs: list[list[torch.Tensor]]) -> tuple[list[torch.Tensor], int]:
    result: Any = in_worker(_run_under, buffer, use, inputs)
    return result


@pytest.mark.skipif(not HUGE_PAGES_GRANTED, reason=NO_HUGE_PAGES)
def test_streamed_weights_move_into_huge_pages_and_compute_the_same_bits() -> None:
    model = quantized_layers()
    rows = [[torch.randn(1, IN_FEATURES)], [torch.randn(1, IN_FEATURES) * 50]]
    lowered = lower(model, tuple(rows[0]))
    assert lowered.delegate_calls == 1 and not lowered.undelegated_compute, lowered.describe()
    in_place, not_asked = run_under(lowered.buffer, "never", rows)
    moved, asked = run_under(lowered.buffer, "always", rows)
    # Both layers' weights and scales: 2.25 MiB, one block.
    assert not_asked == 0 and asked >= 2 * (IN_FEATURES * OUT_FEATURES // 2 + IN_FEATURES * OUT_FEATURES // 16)
    for expected, actual in zip(in_place, moved):
        assert torch.equal(actual, expected)
    with torch.no_grad():
        eager = model(rows[0][0])
    assert float((moved[0] - eager).abs().max() / eager.abs().max()) < 1e-2


@pytest.mark.skipif(not HUGE_PAGES_GRANTED, reason=NO_HUGE_PAGES)
def test_a_delegate_streaming_less_than_16_mib_keeps_its_weights_where_the_program_holds_them() -> None:
    lowered = lower(quantized_layers(), (torch.randn(1, IN_FEATURES),))
    _outputs, asked = run_under(lowered.buffer, "large", [[torch.randn(1, IN_FEATURES)]])
    assert asked == 0


@pytest.mark.skipif(not HUGE_PAGES_GRANTED, reason=NO_HUGE_PAGES)
def test_graphs_built_for_new_sizes_read_the_moved_weights() -> None:
    model = quantized_layers()
    example = (torch.randn(4, IN_FEATURES),)
    lowered = lower(model, example, dynamic_shapes=({0: Dim("rows", min=1, max=16)},))
    sizes = [1, 7, 1, 16, 3, 7]
    inputs = [[torch.randn(size, IN_FEATURES)] for size in sizes]
    in_place, _ = run_under(lowered.buffer, "never", inputs)
    moved, asked = run_under(lowered.buffer, "always", inputs)
    assert asked > 0
    for size, expected, actual in zip(sizes, in_place, moved):
        assert actual.shape == (size, IN_FEATURES) and torch.equal(actual, expected), size


@pytest.mark.skipif(not HUGE_PAGES_GRANTED, reason=NO_HUGE_PAGES)
def test_an_embedding_table_is_not_copied() -> None:
    rows = 4096  # a 16 MiB f32 table, read a row a token
    model = quantized_layers(embedding_rows=rows)
    tokens = torch.tensor([[5]])
    lowered = lower(model, (tokens,))
    assert StepKind.GATHER in [step.kind for step in lowered.steps()], lowered.describe()
    outputs, asked = run_under(lowered.buffer, "always", [[tokens], [torch.tensor([[rows - 1]])]])
    assert 0 < asked < rows * IN_FEATURES * 4
    with torch.no_grad():
        expected = model(torch.tensor([[rows - 1]]))
    assert float((outputs[1] - expected).abs().max() / expected.abs().max()) < 1e-2


def test_set_huge_pages_refuses_an_unknown_setting() -> None:
    with pytest.raises(ValueError, match="set_huge_pages expects one of"):
        set_huge_pages("sometimes")
