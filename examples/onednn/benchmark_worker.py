# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The benchmark's child processes. `benchmark.py` starts them; they talk through files in a work folder.

    python -m examples.onednn.benchmark_worker serve-exports      # per model (spec path on stdin):
                                                                  #   reference outputs + artifacts
    python -m examples.onednn.benchmark_worker run SPEC.json      # one (model, flow): load, time, check
                                                                  #   (the suite forks `run_child` instead)

Peak memory of a flow is measured in its own `run` process: after the runtime is imported and the inputs
and reference outputs are loaded, the kernel's peak-RSS counter (VmHWM) is reset through
/proc/self/clear_refs and the current RSS is taken as the baseline; the flow's peak is VmHWM at the end
(after load, init and every run) minus that baseline. So it counts what loading the artifact (mapped file
pages included), initializing the runtime and running the model keep resident at their worst, and not the
interpreter, the imported libraries or the test data.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from examples.onednn.benchmark_flows import FLOWS, Inputs, RunFn
from examples.onednn.benchmark_models import BENCH_MODELS


def _write_json(path: Path, data: dict[str, Any]) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(data, indent=1))
    temporary.replace(path)  # a reader never sees half a file


def _error_text(error: BaseException, head: int = 14, tail: int = 8) -> str:
    """The traceback for the JSON report; a deep one (a recursion) keeps its first and last frames."""
    frames = traceback.format_exception(error)
    if len(frames) > head + tail:
        frames = [*frames[:head], f"  ... {len(frames) - head - tail} frames left out ...\n", *frames[-tail:]]
    return "".join(frames).strip()


# --- export process ------------------------------------------------------------------------------------------
def export_main(spec: dict[str, Any]) -> None:
    work = Path(spec["dir"])
    torch.set_num_threads(spec["threads"])
    model, inputs = BENCH_MODELS[spec["model"]].factory()
    with torch.no_grad():
        out = model(*inputs)
    torch.save(inputs, work / "inputs.pt")
    torch.save([out] if isinstance(out, torch.Tensor) else list(out), work / "reference.pt")

    report: dict[str, Any] = {}
    for name in spec["flows"]:
        flow = FLOWS[name]
        start = time.perf_counter()
        try:
            facts = flow.export(model, inputs, work / f"{name}{flow.suffix}")
            report[name] = {"ok": True, "export_s": time.perf_counter() - start, **facts}
        except Exception as error:
            report[name] = {"ok": False, "export_s": time.perf_counter() - start, "error": _error_text(error)}
        gc.collect()
        _write_json(work / "export.json", report)  # after every flow: a crash later keeps what was done


# --- run process ---------------------------------------------------------------------------------------------
def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _reset_peak_rss() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # "5": reset the peak RSS to the current RSS
        return True
    except OSError:
        return False


def _time_runs(run: RunFn, warmup: int, runs: int, budget_s: float) -> tuple[list[torch.Tensor], float, list[float]]:
    """The first run's outputs and time, then `warmup - 1` untimed runs, then up to `runs` timed runs until
    `budget_s` seconds are spent on them. With `warmup == 0` the first run is also the first sample."""
    start = time.perf_counter()
    outputs = run()
    first_ms = (time.perf_counter() - start) * 1e3
    samples = [] if warmup else [first_ms]
    for _ in range(warmup - 1):
        run()
    spent = sum(samples) / 1e3
    while len(samples) < runs and (not samples or spent < budget_s):
        start = time.perf_counter()
        run()
        elapsed = time.perf_counter() - start
        samples.append(elapsed * 1e3)
        spent += elapsed
    return outputs, first_ms, samples


def max_relative_error(outputs: list[torch.Tensor], reference: list[torch.Tensor]) -> float:
    if len(outputs) != len(reference):
        raise ValueError(f"{len(outputs)} outputs, eager PyTorch gives {len(reference)}")
    errors = []
    for index, (out, ref) in enumerate(zip(outputs, reference)):
        if out.shape != ref.shape:
            raise ValueError(f"output {index} has shape {tuple(out.shape)}, eager gives {tuple(ref.shape)}")
        difference = float((out.double() - ref.double()).abs().max())
        errors.append(difference / max(1e-30, float(ref.double().abs().max())))
    return max(errors)


def _percentile(sorted_samples: list[float], fraction: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    position = fraction * (len(sorted_samples) - 1)
    low = int(position)
    high = min(low + 1, len(sorted_samples) - 1)
    return sorted_samples[low] + (sorted_samples[high] - sorted_samples[low]) * (position - low)


def summarize(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    keys = {"p10_ms": 0.10, "q1_ms": 0.25, "q3_ms": 0.75, "p90_ms": 0.90}
    return {
        "median_ms": statistics.median(ordered),
        "mean_ms": statistics.fmean(ordered),
        "min_ms": ordered[0],
        **{key: _percentile(ordered, fraction) for key, fraction in keys.items()},
    }


def run_main(spec: dict[str, Any]) -> None:
    flow = FLOWS[spec["flow"]]
    work = Path(spec["dir"])
    flow.setup(spec["threads"])
    for module in spec.get("imports", []):  # what unpickling the artifact needs, e.g. a transformers model
        importlib.import_module(module)
    inputs: Inputs = torch.load(work / "inputs.pt")
    reference: list[torch.Tensor] = torch.load(work / "reference.pt")
    gc.collect()
    peak_reset = _reset_peak_rss()
    baseline_kib = _status_kib("VmRSS") if peak_reset else _status_kib("VmHWM")

    start = time.perf_counter()
    run = flow.load(work / f"{flow.name}{flow.suffix}", inputs, spec["threads"])
    load_ms = (time.perf_counter() - start) * 1e3
    outputs, first_ms, samples = _time_runs(run, spec["warmup"], spec["runs"], spec["budget_s"])
    peak_kib = _status_kib("VmHWM")

    result = {
        "ok": True,
        "load_ms": load_ms,
        "first_run_ms": first_ms,
        "runs": len(samples),
        "samples_ms": samples,
        **summarize(samples),
        "max_rel_error": max_relative_error(outputs, reference),
        "peak_mib": (peak_kib - baseline_kib) / 1024,
        "baseline_mib": baseline_kib / 1024,
        "memory_method": "VmHWM reset by clear_refs, minus VmRSS" if peak_reset else "VmHWM minus VmHWM after imports",
        "torch_threads": torch.get_num_threads(),
    }
    _write_json(Path(spec["result"]), result)


def run_child(spec_path: str, stderr_path: str, cpus: list[int] | None) -> None:
    """A run process forked by `benchmark_processes.RunForker`: pinned to `cpus` (None: all), its stdout
    discarded and its stderr in a file, whose tail is the report when it crashes."""
    if cpus:
        os.sched_setaffinity(0, cpus)
    with open(os.devnull, "w") as devnull, open(stderr_path, "w") as stderr:
        os.dup2(devnull.fileno(), 1)
        os.dup2(stderr.fileno(), 2)
    run_spec(json.loads(Path(spec_path).read_text()))


def run_spec(spec: dict[str, Any]) -> None:
    try:
        run_main(spec)
    except Exception as error:
        _write_json(Path(spec["result"]), {"ok": False, "error": _error_text(error)})
        raise


def serve_exports() -> None:
    """Exports one model per line of stdin (a spec file's path), then writes `export.done` in its folder,
    holding the seconds that took.

    One long-lived export process saves re-importing the exporters for every model; the parent starts a
    new one when it dies or hangs."""
    for line in sys.stdin:
        start = time.perf_counter()
        spec = json.loads(Path(line.strip()).read_text())
        work = Path(spec["dir"])
        try:
            export_main(spec)
        except Exception as error:  # building or running the eager model: no flow can go on
            _write_json(work / "model-error.json", {"error": _error_text(error)})
        gc.collect()
        seconds = work / "export.seconds"
        seconds.write_text(f"{time.perf_counter() - start:.3f}")
        seconds.replace(work / "export.done")  # whole, or not there yet


def main(argv: list[str]) -> int:
    if argv == ["serve-exports"]:
        serve_exports()
        return 0
    _, spec_path = argv  # run SPEC.json
    run_spec(json.loads(Path(spec_path).read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
