# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Benchmark: our oneDNN delegate against XNNPACK, ONNX Runtime, OpenVINO (when installed), ExecuTorch
without a delegate and eager PyTorch, on the models of `benchmark_models.py`, fp32.

    python -m examples.onednn.benchmark --models resnet18,mlp --runs 20 --threads 2

Export processes (--export-jobs of them, one per core by default, each kept between models) compute
each model's eager fp32 reference and write every flow's artifact (.pte, .onnx, pickled module) to a
work folder, for all models before any is timed: exporting is mostly single-threaded Python, and the
whole suite's artifacts take about 8 GB there until their model is timed. Then, with nothing else
running, each (model, flow) is loaded, timed and checked in a fresh process of its own, forked from one
that has imported torch and the ExecuTorch runtime (thread pools and peak memory do not mix between
runtimes).
Every runtime gets the same thread count: torch.set_num_threads for eager PyTorch (1 in the ExecuTorch
flows, where torch computes nothing but the input copies of ExecuTorch's Python bindings, after which its
OpenMP workers would spin on the runtime's cores), OMP_NUM_THREADS (an OpenMP build), ExecuTorch's threadpool
(XNNPACK), our delegate's pool, ONNX Runtime's intra-op threads; with fewer threads than
usable cores the processes are also pinned to that many cores, which is what bounds a TBB oneDNN (TBB
sizes its pool from the affinity mask) and OpenVINO (no thread option here). A flow that fails for a
model is recorded with its reason and the suite goes on. Writes results.md, results.json and
speedup.png to --out (default results/<date>/).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from examples.onednn.benchmark_flows import BASELINE_LIBRARY_ENV, FLOWS, Flow
from examples.onednn.benchmark_models import ATTENTION, BENCH_MODELS
from examples.onednn.benchmark_processes import (
    ROOT,
    ExportServer,
    RunForker,
    Settings,
    failed,
    measure_call_overhead,
    run_flow,
)
from examples.onednn.benchmark_report import bar_chart, benchmarks_page, markdown

FLAGS = ["avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"]
PACKAGES = ["torch", "executorch", "executorch-onednn", "onnxruntime",
            "onnx", "onnxscript", "transformers", "openvino", "nncf", "numpy"]  # fmt: skip
ARTIFACTS = (".pte", ".onnx", ".pt")


def export_all(
    names: list[str], to_run: dict[str, list[Flow]], exporters: list[ExportServer], work: Path
) -> dict[str, tuple[dict[str, dict[str, Any]], float]]:
    """Exports every model, each exporter taking the next one as soon as it is free; per model its flows'
    export results and the export process's seconds."""
    queue, busy, done = list(names), {}, {}
    while queue or busy:
        for exporter in exporters:
            if exporter not in busy and queue:
                name = queue.pop(0)
                (work / name).mkdir(parents=True, exist_ok=True)
                exporter.submit(name, to_run[name], work / name)
                busy[exporter] = name
        finished = [exporter for exporter, name in busy.items() if exporter.finished(work / name)]
        for exporter in finished:
            name = busy.pop(exporter)
            done[name] = exporter.collect(to_run[name], work / name)
            print(f"[{name}] exported in {done[name][1]:.0f} s", flush=True)
        if not finished:
            time.sleep(0.2)
    return done


def time_model(
    name: str,
    flows: list[Flow],
    skipped: dict[str, str],
    exported: dict[str, dict[str, Any]],
    export_s: float,
    work: Path,
    settings: Settings,
    forker: RunForker,
) -> dict[str, Any]:
    """Runs each exported flow of one model; every flow's entry, the skipped ones with their reason."""
    entries = {flow: failed("setup", reason, "skipped") for flow, reason in skipped.items()}
    for flow in flows:
        if flow.name in skipped:
            continue
        start = time.perf_counter()
        entry = exported[flow.name]
        entries[flow.name] = run_flow(flow, entry, work, settings, forker) if entry["status"] == "ok" else entry
        entries[flow.name]["process_s"] = time.perf_counter() - start  # the run process, imports included
        print(f"[{name}] {flow.name}: {_progress(entries[flow.name])}", flush=True)
    baseline = entries.get("xnnpack", {})
    for flow_name, entry in entries.items():
        if entry["status"] == "ok" and baseline.get("status") == "ok":
            entry["vs_xnnpack"] = baseline["median_ms"] / entry["median_ms"]
        twin = entries.get(f"{flow_name}-baseline", {})
        if entry["status"] == "ok" and twin.get("status") == "ok":  # > 1: this build is faster
            entry["vs_baseline_build"] = twin["median_ms"] / entry["median_ms"]
    ordered = {flow.name: entries[flow.name] for flow in flows}
    return {"key": name, "label": BENCH_MODELS[name].label, "export_process_s": export_s, "flows": ordered}


def _progress(entry: dict[str, Any]) -> str:
    if entry["status"] != "ok":
        return f"{entry['status']} at {entry['stage']}: " + entry["reason"].strip().splitlines()[-1]
    return (
        f"{entry['median_ms']:.2f} ms (p10-p90 {entry['p10_ms']:.2f}-{entry['p90_ms']:.2f}, {entry['runs']} runs), "
        f"error {entry['max_rel_error']:.1e}, load+init {entry['load_ms']:.0f} ms, peak {entry['peak_mib']:.0f} MiB"
    )


# --- machine and versions ------------------------------------------------------------------------------------------
def _lscpu_field(lscpu: str, field: str) -> str:
    return next((line.split(":", 1)[1].strip() for line in lscpu.splitlines() if line.startswith(field + ":")), "")


def _lscpu_int(lscpu: str, field: str) -> int:
    value = _lscpu_field(lscpu, field)
    return int(value) if value.isdigit() else 0


def machine_info() -> dict[str, Any]:
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    flags = next((line.split(":", 1)[1].split() for line in cpuinfo.splitlines() if line.startswith("flags")), [])
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        lscpu = ""
    cpu = _lscpu_field(lscpu, "Model name") or platform.processor() or "unknown"
    return {
        "cpu": cpu,
        "cores": _lscpu_int(lscpu, "Core(s) per socket") * _lscpu_int(lscpu, "Socket(s)") or os.cpu_count(),
        "logical_cpus": os.cpu_count(),
        "threads_available": len(os.sched_getaffinity(0)),
        "flags": {flag: flag in flags for flag in FLAGS},
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


def onednn_version(library: str | None = None) -> str:
    """The oneDNN inside our delegate's runtime (or the runtime library at `library`), asked in a fresh
    process so that this one loads no runtime before the flows fork theirs."""
    env = {**os.environ, "ONEDNN_BACKEND_LIBRARY": library} if library else None
    probe = "from executorch.backends.onednn import onednn_version; print(onednn_version())"
    result = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=False)
    lines = result.stdout.strip().splitlines()
    return lines[-1] if result.returncode == 0 and lines else f"unknown ({result.stderr.strip()[-200:]})"


def versions() -> dict[str, str]:
    found = {}
    for package in PACKAGES:
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            continue
    found["oneDNN"] = onednn_version()
    if os.environ.get(BASELINE_LIBRARY_ENV):
        found["oneDNN (baseline build)"] = onednn_version(os.environ[BASELINE_LIBRARY_ENV])
    return found


# --- command line ----------------------------------------------------------------------------------------------------
def _names(text: str, known: dict[str, Any], what: str) -> list[str]:
    names = list(known) if text == "all" else [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown {what}: {', '.join(unknown)} (known: {', '.join(known)})")
    return names


class _HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The module docstring as written, and every option's default."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=_HelpFormatter)
    parser.add_argument("--models", default="all", help=f"comma-separated, or all: {', '.join(BENCH_MODELS)}")
    parser.add_argument("--flows", default="all", help=f"comma-separated, or all: {', '.join(FLOWS)}")
    cores = len(os.sched_getaffinity(0))
    parser.add_argument("--threads", type=int, default=cores, help="threads for every runtime; default: all cores")
    parser.add_argument("--runs", type=int, default=30, help="timed runs per flow")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs first")
    parser.add_argument("--budget", type=float, default=6.0, help="stop timing a flow after this many s")
    parser.add_argument("--slow-runs", type=int, default=3, help="runs of ExecuTorch without a delegate")
    parser.add_argument("--slow-budget", type=float, default=3.0, help="seconds for those runs (>= 1 run)")
    parser.add_argument(
        "--skip-slow", default="default", help="models to run without the no-delegate flow: comma-separated, "
        "all, none, or default (those where one run takes 15-30 s: " + ", ".join(_slow_by_default()) + ")",
    )  # fmt: skip
    parser.add_argument(
        "--export-jobs", type=int, default=cores, help="models exported at once (all before any flow is timed)"
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per child process")
    parser.add_argument("--out", type=Path, help="results folder; None: results/<date>/")
    parser.add_argument("--work-dir", type=Path, help="keep the artifacts here; None: a temporary folder")
    parser.add_argument("--write-benchmarks-md", type=Path, metavar="PATH", help="also render BENCHMARKS.md")
    parser.add_argument("--from-json", type=Path, metavar="PATH", help="render a results.json; run nothing")
    parser.add_argument(
        "--baseline-library", type=Path, metavar="PATH", help="another build of our runtime library (e.g. the "
        "oneDNN 3.2 one, backends/onednn/setup.md): each oneDNN flow also runs on it, as <flow>-baseline",
    )  # fmt: skip
    return parser.parse_args(argv)


def _slow_by_default() -> list[str]:
    return [name for name, model in BENCH_MODELS.items() if model.slow_without_delegate]


def _skip_slow(text: str) -> set[str]:
    special = {"default": _slow_by_default(), "none": []}
    return set(special[text]) if text in special else set(_names(text, BENCH_MODELS, "models"))


def _skips(flows: list[Flow], model: str, skip_slow: set[str]) -> dict[str, str]:
    """The flows `model` does not run, and why: too slow to wait for, or meant for other models."""
    skips = {flow.name: "not run (--skip-slow)" for flow in flows if flow.slow and model in skip_slow}
    return skips | {
        flow.name: f"not run (for {', '.join(flow.models)} only)"
        for flow in flows
        if flow.models is not None and model not in flow.models
    }


def _reproduce_argv(argv: list[str]) -> list[str]:
    """The arguments that choose what is measured (not where results go)."""
    kept, skip_value = [], False
    for arg in argv:
        option = arg.split("=", 1)[0]
        if skip_value or option in ("--out", "--work-dir", "--write-benchmarks-md", "--from-json"):
            skip_value = not skip_value and "=" not in arg
            continue
        kept.append(arg)
    return kept


def run_suite(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    settings = Settings(args.threads, args.runs, args.warmup, args.budget, args.slow_runs, args.slow_budget,
                        args.timeout)  # fmt: skip
    models = _names(args.models, BENCH_MODELS, "models")
    if args.baseline_library:  # the run processes inherit it
        os.environ[BASELINE_LIBRARY_ENV] = str(args.baseline_library.resolve())
    known = FLOWS if args.baseline_library else {k: v for k, v in FLOWS.items() if not v.baseline}
    flows = [FLOWS[name] for name in _names(args.flows, known, "flows")]
    skip_slow = _skip_slow(args.skip_slow)
    unavailable = {flow.name: reason for flow in flows if (reason := flow.unavailable())}
    for name, reason in unavailable.items():
        print(f"skipping {name}: {reason}", flush=True)
    jobs = max(1, min(args.export_jobs, len(models)))
    start = time.perf_counter()
    results = {}
    with tempfile.TemporaryDirectory(prefix="onednn-bench-") as temporary:
        work = args.work_dir or Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        export_threads = max(1, settings.threads // jobs)
        exporters = [ExportServer(settings, work / f"export{i}.log", export_threads) for i in range(jobs)]
        forker = RunForker(settings)
        try:
            skips = {name: {**unavailable, **_skips(flows, name, skip_slow)} for name in models}
            to_run = {name: [flow for flow in flows if flow.name not in skips[name]] for name in models}
            exported = export_all(models, to_run, exporters, work)
            for exporter in exporters:
                exporter.close()  # nothing else runs while flows are timed
            for name in models:
                results[name] = time_model(name, flows, skips[name], *exported[name], work / name, settings, forker)
                if not args.work_dir:  # every model's artifacts take GBs together: drop each once timed
                    for artifact in (work / name).iterdir():
                        if artifact.suffix in ARTIFACTS:
                            artifact.unlink()
            call_overhead = measure_call_overhead(settings)
        finally:
            for exporter in exporters:
                exporter.close()
    notes = [f"transformers models: attn_implementation={ATTENTION!r}, random weights from their configs."]
    notes += [f"{FLOWS[name].label} skipped: {reason}" for name, reason in unavailable.items()]
    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": machine_info(),
        "versions": versions(),
        "settings": {**asdict(settings), "models": models, "flows": [f.name for f in flows], "argv": argv},
        "total_s": time.perf_counter() - start,
        "notes": notes,
        "models": results,
        "call_overhead": call_overhead,
    }


def write_outputs(results: dict[str, Any], out: Path, benchmarks_md: Path | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    (out / "results.md").write_text(markdown(results))
    bar_chart(results, out / "speedup.png")
    print(f"wrote {out / 'results.md'}, results.json, speedup.png")
    if benchmarks_md:
        command = shlex.join(["scripts/run_benchmark.sh", *_reproduce_argv(results["settings"]["argv"])])
        benchmarks_md.write_text(benchmarks_page(results, command))
        print(f"wrote {benchmarks_md}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.from_json:
        results = json.loads(args.from_json.read_text())
    else:
        results = run_suite(args, argv)
        print(f"suite done in {results['total_s']:.0f} s")
    out = args.out or (args.from_json.parent if args.from_json else ROOT / "results" / results["date"][:10])
    write_outputs(results, out, args.write_benchmarks_md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
