# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""examples/onednn/device_check.py's judging side (what runs on the remote machine): outputs compared with
the packing machine's and eager PyTorch's, by precision, and the table that reports them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from examples.onednn.device_check import _check, _table


def _bundle(tmp_path: Path, local: np.ndarray, eager: np.ndarray) -> Path:
    (tmp_path / "programs").mkdir()
    for flow in ("onednn", "onednn-bf16"):
        local.astype(np.float32).tofile(tmp_path / "programs" / f"m.{flow}.local.f32")
    eager.astype(np.float32).tofile(tmp_path / "programs" / "m.eager.f32")
    return tmp_path


def test_outputs_are_judged_against_here_and_eager_by_precision(tmp_path: Path) -> None:
    reference = np.linspace(-1, 1, 64)
    bundle = _bundle(tmp_path, reference, reference)
    outputs = tmp_path / "out.f32"
    (reference + 1e-2).astype(np.float32).tofile(outputs)
    fp32 = _check(bundle, {"model": "m", "flow": "onednn", "stem": "m.onednn"}, outputs)
    bf16 = _check(bundle, {"model": "m", "flow": "onednn-bf16", "stem": "m.onednn-bf16"}, outputs)
    assert not fp32["outputs_ok"] and bf16["outputs_ok"]
    assert abs(bf16["error_vs_local"] - 1e-2) < 1e-6 and abs(bf16["error_vs_eager"] - 1e-2) < 1e-6

    reference[:32].astype(np.float32).tofile(outputs)  # a truncated output is a mismatch, not a crash
    truncated = _check(bundle, {"model": "m", "flow": "onednn-bf16", "stem": "m.onednn-bf16"}, outputs)
    assert truncated["error_vs_local"] == float("inf") and not truncated["outputs_ok"]


def test_the_table_keeps_the_fastest_round_and_any_mismatch_or_failure() -> None:
    row = {"model": "m", "flow": "onednn", "stem": "m.onednn", "threads": 2, "library": "3.13.1"}
    rounds = [
        {**row, "build": "ours", "median_ms": 2.0, "error_vs_local": 0.0, "error_vs_eager": 0.0, "outputs_ok": True},
        {**row, "build": "ours", "median_ms": 1.5, "error_vs_local": 1.0, "error_vs_eager": 0.0, "outputs_ok": False},
        {**row, "build": "baseline", "error": ["execute failed: error 0x1"]},
    ]
    report = {"cpu": "cpu", "cores": 2, "isa_flags": ["avx2"], "packed_on": "here", "results": rounds}
    lines = _table(report).splitlines()
    assert "| m | onednn | ours (3.13.1) | 2 | 1.500 | 1.0e+00 | 0.0e+00 | MISMATCH |" in lines
    assert any(line.startswith("| m | onednn | baseline | 2 | failed: ") for line in lines)
