# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""A linear layer of 32, 48 or 64 f32 rows with 4 MB of weights or more runs transposed where oneDNN
runs its AVX-512 kernel (runtime/TransposedLinear.cpp: y^T = W x^T, y kept with strides [1, rows]).
Each case must match eager PyTorch whatever reads the result (the next such layer, a softmax, a layer
norm, an add, a reshape, the caller), keep NaN and infinities through a fused ReLU, and show the
transposed problem in oneDNN's trace exactly where the rule says: other row counts, bf16 and CPUs
below AVX-512 keep the plain product."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from executorch.backends.onednn import OneDnnPartitioner, effective_isa
from support import Record, describe, execute_traced
from tester import DEFAULT_TOLERANCE, lower, mismatch
from torch import nn
from torch.nn import functional as F

WIDTH = 1024  # 1024 x 1024 f32 weights: 4 MB, the rule's least


def _avx512_runs() -> bool:
    return effective_isa().startswith(("avx512", "avx10"))


class Layer(nn.Module):
    """A linear layer, what the partitioner fuses into it, then what reads its result."""

    def __init__(self, bias: bool, after: str, reader: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.linear = nn.Linear(WIDTH, WIDTH, bias=bias)
        self.after = after
        self.reader = reader

    def forward(self, x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        if self.after == "relu":
            y = F.relu(y)
        elif self.after == "gelu":
            y = F.gelu(y)
        elif self.after == "clamp":
            y = torch.clamp(y, -0.5, 0.5)
        return self.reader(y, other)


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(WIDTH, 2 * WIDTH)
        self.down = nn.Linear(2 * WIDTH, WIDTH)

    def forward(self, x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))


READERS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "caller": lambda y, other: y,
    "softmax": lambda y, other: torch.softmax(y, -1),
    "layer_norm": lambda y, other: F.layer_norm(y, (WIDTH,)),
    "add_of_an_input": lambda y, other: other - y,
    "reshape_and_sum": lambda y, other: y.reshape(y.shape[0], 32, WIDTH // 32).sum(1),
}


def _run(model: nn.Module, rows: int, fill: bool = False) -> tuple[list[torch.Tensor], torch.Tensor, list[Record]]:
    torch.manual_seed(1)
    model = model.eval()
    x = torch.randn(rows, WIDTH)
    if fill:
        x[1, 7], x[2, 9], x[3, 11] = float("nan"), float("inf"), float("-inf")
    inputs = (x, torch.randn(rows, WIDTH))
    with torch.no_grad():
        expected = model(*inputs)
    lowered = lower(model, inputs)
    assert lowered.delegate_calls == 1 and not lowered.undelegated_compute, lowered.describe()
    outputs, trace = execute_traced(lowered.buffer, inputs)
    return outputs, expected, trace


def _transposed(trace: list[Record], rows: int) -> list[Record]:
    """The matmuls of the transposed form: [1, N, K] times [1, K, rows]."""
    return [
        r for r in trace if r.primitive == "matmul" and r.problem.startswith("1x") and r.problem.endswith(f"x{rows}")
    ]


@pytest.mark.parametrize("rows", [16, 32, 40, 48, 64])
def test_an_mlp_matches_eager_and_runs_transposed_where_the_rule_says(rows: int) -> None:
    torch.manual_seed(0)
    outputs, expected, trace = _run(Mlp(), rows)
    problem = mismatch(f"{rows} rows", outputs, [expected], DEFAULT_TOLERANCE)
    assert problem is None, f"{problem}\n{describe(trace)}"
    transposed = _transposed(trace, rows)
    if _avx512_runs() and rows in (32, 48, 64):
        # Both layers, and the second reads the first's transposed result without a copy.
        assert len(transposed) == 2, describe(trace)
        assert sum(r.primitive == "reorder" and "x" in r.problem for r in trace) == 1, describe(trace)
    else:
        assert not transposed, describe(trace)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("after", ["", "relu", "gelu", "clamp"])
def test_fused_bias_and_activations_match_eager(after: str, bias: bool) -> None:
    torch.manual_seed(0)
    outputs, expected, trace = _run(Layer(bias, after, READERS["caller"]), 32)
    problem = mismatch(f"{after or 'no activation'}, bias {bias}", outputs, [expected], DEFAULT_TOLERANCE)
    assert problem is None, f"{problem}\n{describe(trace)}"
    assert bool(_transposed(trace, 32)) == _avx512_runs(), describe(trace)


@pytest.mark.parametrize("reader", sorted(READERS))
def test_whatever_reads_the_transposed_result_gets_the_right_values(reader: str) -> None:
    torch.manual_seed(0)
    outputs, expected, trace = _run(Layer(True, "", READERS[reader]), 48)
    problem = mismatch(reader, outputs, [expected], DEFAULT_TOLERANCE)
    assert problem is None, f"{problem}\n{describe(trace)}"
    assert bool(_transposed(trace, 48)) == _avx512_runs(), describe(trace)


def test_nan_and_infinities_pass_a_fused_relu_as_in_eager() -> None:
    torch.manual_seed(0)
    outputs, expected, trace = _run(Layer(True, "relu", READERS["caller"]), 32, fill=True)
    got = outputs[0]
    for kind in (torch.isnan, torch.isposinf, torch.isneginf):
        assert torch.equal(kind(got), kind(expected)), f"{kind.__name__} differs\n{describe(trace)}"
    assert torch.isnan(expected).any() and torch.isinf(expected).any()
    finite = torch.isfinite(expected)
    torch.testing.assert_close(got[finite], expected[finite], rtol=1e-4, atol=1e-4)


def test_bf16_keeps_the_plain_product() -> None:
    if not effective_isa().startswith(("avx512_core_bf16", "avx512_core_amx", "avx2_vnni_2", "avx10")):
        pytest.skip(f"bf16 compute needs AVX512-BF16, AVX2-VNNI-2 or AMX; oneDNN runs {effective_isa()} here")
    torch.manual_seed(1)
    model = Mlp().eval()
    inputs = (torch.randn(32, WIDTH), torch.randn(32, WIDTH))
    with torch.no_grad():
        expected = model(*inputs)
    lowered = lower(model, inputs, OneDnnPartitioner(precision="bf16"))
    outputs, trace = execute_traced(lowered.buffer, inputs)
    problem = mismatch("bf16", outputs, [expected], 5e-2)
    assert problem is None, f"{problem}\n{describe(trace)}"
    assert not _transposed(trace, 32), describe(trace)
