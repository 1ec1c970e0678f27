# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The benchmark harness (examples/onednn/benchmark.py) end to end on its two smallest models: concurrent
export processes, forked run processes, the report. Speed is not asserted here (the benchmark's table
is where it is read); what is checked is that every flow ran, agrees with eager PyTorch, that the
per-call overhead was measured, and that a flow whose run fails is recorded with its reason while the
others go on."""

from __future__ import annotations

from pathlib import Path

import torch

from examples.onednn import benchmark
from examples.onednn.benchmark_flows import FLOWS
from examples.onednn.benchmark_processes import RunForker, Settings, run_flow
from examples.onednn.benchmark_report import markdown

RUNS = 3


def test_two_models_exported_at_once_then_timed(tmp_path: Path) -> None:
    argv = ["--models", "mlp,unet", "--flows", "onednn,xnnpack,eager", "--threads", "1", "--export-jobs", "2",
            "--runs", str(RUNS), "--warmup", "1", "--budget", "5", "--work-dir", str(tmp_path)]  # fmt: skip
    results = benchmark.run_suite(benchmark.parse_args(argv), argv)

    assert list(results["models"]) == ["mlp", "unet"]
    for name, model in results["models"].items():
        assert model["export_process_s"] > 0
        for flow, entry in model["flows"].items():
            assert entry["status"] == "ok", (name, flow, entry.get("reason"))
            assert entry["runs"] == len(entry["samples_ms"]) == RUNS
            assert entry["max_rel_error"] <= 1e-4, (name, flow)
            assert entry["peak_mib"] > 0 and entry["load_ms"] > 0
            assert entry["torch_threads"] == 1
        assert model["flows"]["onednn"]["vs_xnnpack"] > 0
        assert model["flows"]["onednn"]["delegate_calls"] >= 1
    overhead = results["call_overhead"]
    assert overhead["status"] == "ok", overhead.get("reason")
    assert set(overhead["us_per_call"]) == {"onednn", "xnnpack", "no-delegate"}
    assert all(us > 0 for us in overhead["us_per_call"].values())
    assert set(overhead["delegate_us"]) == {"onednn", "xnnpack"}
    table = markdown(results)
    assert "MLP 1024-4096-1024" in table and "U-Net" in table and "## Per-call overhead" in table


def test_a_run_that_fails_is_reported(tmp_path: Path) -> None:
    torch.save((torch.randn(2, 4),), tmp_path / "inputs.pt")
    torch.save([torch.randn(2, 4)], tmp_path / "reference.pt")
    (tmp_path / "onednn.pte").write_bytes(b"not a program" * 8)
    settings = Settings(threads=1, runs=2, warmup=1, budget_s=1.0, slow_runs=1, slow_budget_s=1.0, timeout_s=120.0)

    entry = run_flow(FLOWS["onednn"], {"status": "ok", "export_s": 0.5}, tmp_path, settings, RunForker(settings))

    assert entry["status"] == "failed" and entry["stage"] == "run"
    assert entry["export_s"] == 0.5  # what the export found is kept
    assert "Error" in entry["reason"]


def test_llm_benchmark_compares_each_prompt_with_the_logits_of_its_last_token() -> None:
    """llm_benchmark's errors: a prompt of L tokens against the reference at position L - 1, the
    teacher-forced steps position by position over the first sequence."""
    from examples.onednn.llm_benchmark import error_numbers

    expected = torch.randn(2, 4, 10, generator=torch.Generator().manual_seed(0))
    decode_rows = list(expected[0])
    prefill_rows = [list(expected[s][1:]) for s in range(2)]  # prompts of 2, 3, 4 tokens
    exact = error_numbers(decode_rows, prefill_rows, expected)
    assert exact == {
        "error_mean": 0.0,
        "error_max": 0.0,
        "top1_agreement": 1.0,
        "prefill_error_max": 0.0,
        "prefill_error_rms": 0.0,
    }
    prefill_rows[1][2] = expected[1][3] + expected[1][3].norm() / 10**0.5 * 0.6  # the 4-token prompt
    moved = error_numbers(decode_rows, prefill_rows, expected)
    offset = expected[1][3].norm() / 10**0.5 * 0.6
    assert abs(moved["prefill_error_rms"] - float(offset * 10**0.5 / expected[1][3].norm()) / 6) < 1e-6
    assert abs(moved["prefill_error_max"] - float(offset / expected[1][3].abs().max()) / 6) < 1e-6
    assert moved["error_mean"] == 0.0


def test_llm_benchmark_measures_prompt_logits_against_the_eager_models(tmp_path: Path) -> None:
    from examples.onednn.llm_benchmark import from_eager

    eager = torch.randn(2, 3, 10, generator=torch.Generator().manual_seed(1))
    torch.save(eager, tmp_path / "eager.pt")
    torch.save(eager, tmp_path / "same.pt")
    assert from_eager(tmp_path / "same.pt", tmp_path / "eager.pt") == {"from_eager_max": 0.0, "from_eager_rms": 0.0}
    scaled = eager.clone()
    scaled[1, 2] *= 1.5  # one prompt of six, half its logits' size off
    torch.save(scaled, tmp_path / "scaled.pt")
    moved = from_eager(tmp_path / "scaled.pt", tmp_path / "eager.pt")
    assert abs(moved["from_eager_max"] - 0.5 / 6) < 1e-6 and abs(moved["from_eager_rms"] - 0.5 / 6) < 1e-6
