# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The benchmark harness (examples/onednn/benchmark.py) end to end on its two smallest models: concurrent
export processes, forked run processes, the report; the A/B timing by turns (benchmark_pair.py); and the
runtimes taking turns in one process (benchmark_rounds.py).
Speed is not asserted here (the benchmark's table is where it is read); what is checked is that every
flow ran, agrees with eager PyTorch, that the per-call overhead was measured, and that a flow whose run
fails is recorded with its reason while the others go on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
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


def test_the_bf16_model_flow_runs_a_bf16_copy_and_measures_its_error_against_fp32(tmp_path: Path) -> None:
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)).eval()
    inputs = (torch.randn(4, 16),)
    torch.save(inputs, tmp_path / "inputs.pt")
    with torch.no_grad():
        torch.save([model(*inputs)], tmp_path / "reference.pt")
    flow = FLOWS["onednn-bf16-model"]
    facts = flow.export(model, inputs, tmp_path / f"{flow.name}{flow.suffix}")
    assert next(model.parameters()).dtype == torch.float32, "the suite's other flows get the fp32 model"
    settings = Settings(threads=1, runs=2, warmup=1, budget_s=1.0, slow_runs=1, slow_budget_s=1.0, timeout_s=120.0)

    entry = run_flow(flow, {"status": "ok", **facts}, tmp_path, settings, RunForker(settings))

    assert entry["status"] == "ok", entry.get("reason")
    assert entry["delegate_calls"] == 1
    assert 0 < entry["max_rel_error"] <= 2e-2  # bf16's rounding, measured against the fp32 reference


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


# --- benchmark_pair: two programs timed by turns -----------------------------------------------------
def test_pair_benchmark_times_two_settings_of_one_program_by_turns(tmp_path: Path) -> None:
    """One program loaded twice, its 3x3 convolution direct on side A and by Winograd on side B: both
    timed, the pairs' ratio inside its interval, the outputs within Winograd's round-off."""
    from tester import lower
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.ReLU()).eval()
    inputs = (torch.randn(1, 16, 16, 16),)
    (tmp_path / "model.pte").write_bytes(lower(model, inputs).buffer)
    torch.save(inputs, tmp_path / "inputs.pt")
    out = tmp_path / "pair.json"
    argv = [str(tmp_path / "model.pte"), str(tmp_path / "model.pte"), "--a", "winograd=never", "--b",
            "winograd=always", "--pairs", "20", "--threads", "1", "--json", str(out)]  # fmt: skip
    run = subprocess.run(
        [sys.executable, "-m", "examples.onednn.benchmark_pair", *argv],
        cwd=Path(__file__).resolve().parents[3],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "A/B by pairs" in run.stdout
    result = json.loads(out.read_text())
    assert result["pairs"] == 20 and result["a_ms"] > 0 and result["b_ms"] > 0
    low, high = result["interval"]
    assert low <= result["a_over_b"] <= high
    assert result["output_difference"] <= 2e-5


def test_pair_benchmark_interval_is_the_medians_order_statistics() -> None:
    from examples.onednn.benchmark_pair import median_interval

    median, low, high = median_interval([float(v) for v in range(101, 0, -1)])
    assert (median, low, high) == (51.0, 41.0, 62.0)  # 101 values: ranks 50 -+ 9.85, floor and ceiling


def test_pair_benchmark_refuses_unknown_options_and_missing_inputs(tmp_path: Path) -> None:
    from examples.onednn.benchmark_pair import main, parse_options

    assert parse_options("winograd=never,int4_products=exact") == {"winograd": "never", "int4_products": "exact"}
    with pytest.raises(ValueError, match="expected name=value"):
        parse_options("threads=4")
    (tmp_path / "a.pte").write_bytes(b"")
    with pytest.raises(SystemExit):
        main([str(tmp_path / "a.pte"), str(tmp_path / "a.pte")])  # no inputs.pt beside it


# --- benchmark_rounds: the runtimes taking turns in one process --------------------------------------
def test_rounds_benchmark_times_each_flow_in_turn_and_checks_its_outputs(tmp_path: Path) -> None:
    from torch import nn

    from examples.onednn.benchmark_rounds import main

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 8, 1)).eval()
    inputs = (torch.randn(1, 8, 12, 12),)
    model_dir = tmp_path / "tiny"
    model_dir.mkdir()
    torch.save(inputs, model_dir / "inputs.pt")
    with torch.no_grad():
        torch.save([model(*inputs)], model_dir / "reference.pt")
    for flow in ("onednn", "xnnpack"):
        FLOWS[flow].export(model, inputs, model_dir / f"{flow}.pte")
    out = tmp_path / "rounds.json"

    results = main(["--work-dir", str(tmp_path), "--models", "tiny", "--flows", "onednn,xnnpack", "--rounds", "3",
                    "--calls", "2", "--threads", "1", "--json", str(out)])  # fmt: skip

    assert json.loads(out.read_text()) == results
    tiny = results["tiny"]
    assert list(tiny["flows"]) == ["onednn", "xnnpack"]
    for entry in tiny["flows"].values():
        assert len(entry["round_ms"]) == 3 and all(ms > 0 for ms in entry["round_ms"])
        assert entry["max_rel_error"] <= 1e-5
    ratio = tiny["first_vs_best_other"]
    assert ratio["flow"] == "onednn" and len(ratio["per_round"]) == 3
    assert ratio["min"] <= ratio["median"] <= ratio["max"]
    xnnpack, ours = tiny["flows"]["xnnpack"]["round_ms"], tiny["flows"]["onednn"]["round_ms"]
    assert ratio["per_round"] == [theirs / mine for theirs, mine in zip(xnnpack, ours, strict=True)]


def test_rounds_benchmark_refuses_eager_and_missing_artifacts(tmp_path: Path) -> None:
    from examples.onednn.benchmark_rounds import main

    with pytest.raises(SystemExit):
        main(["--work-dir", str(tmp_path), "--models", "mlp", "--flows", "onednn,eager"])
    (tmp_path / "mlp").mkdir()
    torch.save((torch.randn(2, 4),), tmp_path / "mlp" / "inputs.pt")
    with pytest.raises(FileNotFoundError, match=r"onednn\.pte does not exist"):
        main(["--work-dir", str(tmp_path), "--models", "mlp", "--flows", "onednn", "--threads", "1"])
