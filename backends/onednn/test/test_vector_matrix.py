# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""One row times constant weights (a decode step's linear layers, a classifier head at batch 1), in f32
or bf16: the runtime computes it on the host (runtime/VectorMatrix.h) instead of oneDNN's M = 1 matmul,
and applies the fused bias, activation and residual after it. Each case must match eager PyTorch and,
where AVX2 or AVX-512 runs, execute no matmul primitive for the row; a second row keeps oneDNN's
matmul."""

from __future__ import annotations

import platform
import re
from pathlib import Path

import pytest
import torch
from executorch.backends.onednn import OneDnnPartitioner, effective_isa
from support import Record, describe, execute_traced, host_row_kernels_run
from tester import DEFAULT_TOLERANCE, in_worker, lower, mismatch
from torch import nn
from torch.nn import functional as F


class Head(nn.Module):
    """A linear layer, optionally followed by what the partitioner fuses into it as post-ops."""

    def __init__(self, k: int, n: int, bias: bool, after: str) -> None:
        super().__init__()
        self.linear = nn.Linear(k, n, bias=bias)
        self.after = after

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        if self.after == "relu":
            return F.relu(y)
        if self.after == "gelu":
            return F.gelu(y)
        if self.after == "residual":
            return y + residual
        if self.after == "clamp":
            return torch.clamp(y, -0.1, 0.1)
        return y


class ConstantMatmul(nn.Module):
    """x @ W with W a constant [K, N] (no transpose), as a hand-written projection does."""

    def __init__(self, k: int, n: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(k, n) / k**0.5)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return x @ self.weight


CASES = {  # id: (model factory, row shape prefix, K, N)
    "linear_2d": (lambda: Head(64, 100, True, ""), (1,), 64, 100),
    "linear_3d": (lambda: Head(64, 100, True, ""), (1, 1), 64, 100),
    "no_bias_odd_sizes": (lambda: Head(37, 17, False, ""), (1,), 37, 17),
    "relu": (lambda: Head(96, 48, True, "relu"), (1,), 96, 48),
    "gelu": (lambda: Head(128, 260, True, "gelu"), (1, 1), 128, 260),
    "residual": (lambda: Head(80, 64, True, "residual"), (1,), 80, 64),
    "clamp": (lambda: Head(80, 33, True, "clamp"), (1,), 80, 33),
    "classifier_head": (lambda: Head(512, 1000, True, ""), (1,), 512, 1000),
    "constant_matmul": (lambda: ConstantMatmul(200, 72), (1,), 200, 72),
}


def _run(
    name: str, rows: int = 1, partitioner: OneDnnPartitioner | None = None, fill: float | None = None
) -> tuple[list[torch.Tensor], list[torch.Tensor], list[Record]]:
    factory, prefix, k, n = CASES[name]
    torch.manual_seed(0)
    model = factory().eval()
    x = torch.randn(*prefix[:-1], rows, k)
    if fill is not None:
        x[..., k // 2] = fill
    residual = torch.randn(*prefix[:-1], rows, n)
    with torch.no_grad():
        expected = [model(x, residual)]
    lowered = lower(model, (x, residual), partitioner)
    assert lowered.delegate_calls == 1, lowered.describe()
    outputs, trace = execute_traced(lowered.buffer, (x, residual))
    return outputs, expected, trace


def _matmuls(trace: list[Record]) -> list[Record]:
    return [r for r in trace if r.primitive == "matmul"]


@pytest.mark.parametrize("name", CASES)
def test_one_row_matches_eager(name: str) -> None:
    outputs, expected, trace = _run(name)
    problem = mismatch(name, outputs, expected, DEFAULT_TOLERANCE)
    assert problem is None, f"{problem}\n{describe(trace)}"
    if host_row_kernels_run():
        assert not _matmuls(trace), describe(trace)


@pytest.mark.parametrize("fill", [float("nan"), float("inf")])
def test_non_finite_row_gives_what_eager_gives(fill: float) -> None:
    # An infinity in the row gives each column +inf or -inf by its weight's sign; a NaN, NaN everywhere.
    outputs, expected, trace = _run("linear_2d", fill=fill)
    assert not torch.isfinite(expected[0]).any()
    torch.testing.assert_close(outputs[0], expected[0], rtol=1e-4, atol=1e-4, equal_nan=True, msg=describe(trace))


def test_two_rows_keep_the_matmul() -> None:
    outputs, expected, trace = _run("linear_2d", rows=2)
    problem = mismatch("linear_2d", outputs, expected, DEFAULT_TOLERANCE)
    assert problem is None, f"{problem}\n{describe(trace)}"
    assert _matmuls(trace), describe(trace)


def _bf16_compute_runs() -> bool:
    return effective_isa().startswith(("avx512_core_bf16", "avx512_core_amx", "avx2_vnni_2", "avx10"))


@pytest.mark.parametrize("name", ["linear_3d", "gelu", "residual"])
def test_one_bf16_row_runs_on_the_host(name: str) -> None:
    if not _bf16_compute_runs():
        pytest.skip(f"bf16 compute needs AVX512-BF16, AVX2-VNNI-2 or AMX; oneDNN runs {effective_isa()} here")
    outputs, expected, trace = _run(name, partitioner=OneDnnPartitioner(precision="bf16"))
    problem = mismatch(name, outputs, expected, 5e-2)
    assert problem is None, f"{problem}\n{describe(trace)}"
    assert not _matmuls(trace), describe(trace)


def _status_mib(field: str) -> float:
    """A memory field of /proc/self/status (RssAnon, RssFile, ...), in MiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _rows_in_turn(buffer: bytes, inputs: list[torch.Tensor]) -> tuple[list[torch.Tensor], list[float]]:
    """Each input through one loaded program, and the process's anonymous memory (MiB) after each."""
    import executorch.backends.onednn  # noqa: F401  (registers OneDnnBackend in this process)
    from executorch.runtime import Runtime

    method = Runtime.get().load_program(buffer).load_method("forward")
    outputs, memory = [], []
    for x in inputs:
        outputs.append(method.execute([x])[0])
        memory.append(_status_mib("RssAnon"))
    return outputs, memory


class Projection(nn.Module):
    def __init__(self, k: int, n: int) -> None:
        super().__init__()
        self.linear = nn.Linear(k, n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_dynamic_programs_one_row_shares_the_packed_weights_of_its_other_sizes(precision: str) -> None:
    # A prompt of 2 rows, a longer one and a decode step's one row: each right, and the graphs built
    # for them after the first hold no second copy of the weights (a 32 MiB f32 matrix, 16 in bf16).
    if precision == "bf16" and not _bf16_compute_runs():
        pytest.skip(f"bf16 compute needs AVX512-BF16, AVX2-VNNI-2 or AMX; oneDNN runs {effective_isa()} here")
    torch.manual_seed(0)
    model = Projection(1024, 8192).eval()
    rows = torch.export.Dim("rows", min=1, max=64)
    partitioner = OneDnnPartitioner(precision=precision)
    lowered = lower(model, (torch.randn(1, 8, 1024),), partitioner, dynamic_shapes=({1: rows},))
    assert lowered.delegate_calls == 1, lowered.describe()
    inputs = [torch.randn(1, count, 1024) for count in (40, 2, 1, 3, 1)]
    outputs, memory = in_worker(_rows_in_turn, lowered.buffer, inputs)  # type: ignore[misc]
    with torch.no_grad():
        for x, got in zip(inputs, outputs, strict=True):
            tolerance = DEFAULT_TOLERANCE if precision == "fp32" else 5e-2
            problem = mismatch(f"{x.shape[1]} rows", [got], [model(x)], tolerance)
            assert problem is None, problem
    growth, weight_mib = memory[-1] - memory[0], 32 if precision == "fp32" else 16
    assert growth < weight_mib / 2, f"anonymous memory grew by {growth:.1f} MiB after the first size: {memory}"


def _file_pages_after_load(path: str) -> float:
    """RssFile (MiB) gained by loading the program at `path` (mapped by ExecuTorch's loader, and locked)."""
    import executorch.backends.onednn  # noqa: F401  (registers OneDnnBackend in this process)
    from executorch.runtime import Runtime

    before = _status_mib("RssFile")
    method = Runtime.get().load_program(path).load_method("forward")
    gained = _status_mib("RssFile") - before
    method.execute([torch.randn(1, 3, 1024)])
    return gained


def test_a_dynamic_program_hands_back_the_pages_of_the_weights_it_packed(tmp_path: Path) -> None:
    # It keeps them to pack again for a size that wants another layout, but not resident (MADV_PAGEOUT,
    # Linux 5.4): loaded from a file, the 32 MiB matrix is held once, packed, as in a static program.
    if tuple(int(part) for part in re.findall(r"\d+", platform.release())[:2]) < (5, 4):
        pytest.skip(f"MADV_PAGEOUT needs Linux 5.4; this kernel is {platform.release()}")
    rows = torch.export.Dim("rows", min=1, max=64)
    lowered = lower(Projection(1024, 8192), (torch.randn(1, 8, 1024),), dynamic_shapes=({1: rows},))
    path = tmp_path / "projection.pte"
    path.write_bytes(lowered.buffer)
    gained = in_worker(_file_pages_after_load, str(path))
    assert gained < 16, f"the program's pages hold {gained:.1f} MiB after init"
