# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""examples/onednn/device_check.py's judging side (what runs on the remote machine): outputs compared with
the packing machine's and eager PyTorch's, by precision, and the table that reports them; a newer library
or test executable in place of the bundled one; the decode step it packs as `llama_decode`."""

from __future__ import annotations

import lzma
import os
from pathlib import Path

import numpy as np
import torch

from examples.onednn.device_check import _check, _model, _replace_from, _table
from examples.onednn.llama_decode import DecoderConfig


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


def test_a_newer_library_or_test_replaces_the_bundled_one_compressed_or_not(tmp_path: Path) -> None:
    folder = tmp_path / "lib"
    folder.mkdir()
    (folder / "libx.so").write_bytes(b"old")
    (tmp_path / "libx.so").write_bytes(b"plain")
    with lzma.open(tmp_path / "liby.so.xz", "wb") as stream:
        stream.write(b"compressed")
    assert _replace_from(str(tmp_path / "libx.so"), folder).read_bytes() == b"plain"
    replaced = _replace_from(str(tmp_path / "liby.so.xz"), folder)
    assert replaced == folder / "liby.so" and replaced.read_bytes() == b"compressed"
    assert os.access(replaced, os.X_OK)


def test_the_decode_program_is_one_token_of_the_llama_example() -> None:
    model, inputs = _model("llama_decode")
    assert inputs[0].shape == (1, 1) and inputs[0].dtype == torch.long
    with torch.no_grad():
        logits = model(*inputs)[0]
    assert logits.shape[-1] == DecoderConfig().vocab and torch.isfinite(logits).all()
