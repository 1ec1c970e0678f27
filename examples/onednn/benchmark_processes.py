# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The benchmark's child processes, seen from the parent: long-lived export processes (one per model
exported at once, each restarted when it dies or hangs) and one fresh process per (model, flow) run,
forked from a preloaded server. All get the same thread settings."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from examples.onednn.benchmark_flows import BASELINE_LIBRARY_ENV, Flow

ROOT = Path(__file__).resolve().parents[2]
WORKER = [sys.executable, "-m", "examples.onednn.benchmark_worker"]


@dataclass(frozen=True)
class Settings:
    threads: int
    runs: int
    warmup: int
    budget_s: float  # most seconds of timed runs per flow
    slow_runs: int  # ExecuTorch without a delegate: at most this many runs, the first one included
    slow_budget_s: float
    timeout_s: float  # per child process, beyond its timing budget


def _child_env(threads: int) -> dict[str, str]:
    """Same threads everywhere: OMP_NUM_THREADS before anything loads (torch, an OpenMP oneDNN)."""
    # FutureWarning: torch's pytree deprecations flood stderr, whose tail is a crash's report.
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONWARNINGS": "ignore::FutureWarning"}


def _pinned_cpus(threads: int) -> list[int] | None:
    """With fewer threads than usable cores, the cores a run is pinned to (bounds TBB's pool, OpenVINO's)."""
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[:threads] if threads < len(cpus) else None


def _describe_exit(returncode: int, stderr: str) -> str:
    tail = "\n".join(stderr.strip().splitlines()[-20:])
    if returncode < 0:
        return f"{tail}\nprocess killed by {signal.Signals(-returncode).name}".strip()
    return tail or f"exit status {returncode}"


def failed(stage: str, reason: str, status: str = "failed") -> dict[str, Any]:
    return {"status": status, "stage": stage, "reason": reason}


class ExportServer:
    """Exports models one at a time in a child process that keeps its imports between models. Exporting is
    mostly single-threaded Python, so the suite runs one server per core, each on its share of threads
    and unpinned, and times flows only once all of them are done."""

    def __init__(self, settings: Settings, log: Path, threads: int) -> None:
        self.settings, self.log_path, self.threads = settings, log, threads
        self.process: subprocess.Popen[str] | None = None
        self.log: IO[str] | None = None
        self.submitted = self.deadline = 0.0

    def _ensure_started(self) -> subprocess.Popen[str]:
        if self.process is None or self.process.poll() is not None:
            if self.log is not None:
                self.log.close()
            self.log = self.log_path.open("a")
            self.process = subprocess.Popen(
                [*WORKER, "serve-exports"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self.log,
                text=True, cwd=ROOT, env=_child_env(self.threads),
            )  # fmt: skip
        return self.process

    def submit(self, model: str, flows: list[Flow], work: Path) -> None:
        """Starts writing the reference outputs and artifacts of `model` to `work`; `collect` waits for them."""
        spec_path = work / "export.spec.json"
        spec = {"model": model, "flows": [f.name for f in flows], "dir": str(work), "threads": self.threads}
        spec_path.write_text(json.dumps(spec))
        process = self._ensure_started()
        assert process.stdin is not None
        process.stdin.write(f"{spec_path}\n")
        process.stdin.flush()
        self.submitted = time.monotonic()
        self.deadline = self.submitted + self.settings.timeout_s

    def finished(self, work: Path) -> bool:
        """Whether `collect` would return at once: the model is exported, or never will be."""
        process = self.process
        return (
            (work / "export.done").exists()
            or process is None
            or process.poll() is not None
            or (time.monotonic() > self.deadline)
        )

    def collect(self, flows: list[Flow], work: Path) -> tuple[dict[str, dict[str, Any]], float]:
        """Per flow its export facts or its failure, and the seconds the export process spent on the model."""
        done = work / "export.done"
        crash = self._wait(done)
        seconds = float(done.read_text() or 0) if crash is None else time.monotonic() - self.submitted
        return _export_results(flows, work, crash), seconds

    def _wait(self, done: Path) -> str | None:
        """None once `done` exists, else why it never will (the process died or ran out of time)."""
        process = self.process
        assert process is not None, "collect() before submit()"
        while not done.exists():
            if process.poll() is not None:
                return _describe_exit(process.returncode, self.log_path.read_text()[-8000:])
            if time.monotonic() > self.deadline:
                self.close()
                return f"TimeoutError: export not done within {self.settings.timeout_s:g} s (process killed)"
            time.sleep(0.2)
        return None

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self.log is not None:
            self.log.close()
        self.process = None


def _export_results(flows: list[Flow], work: Path, crash: str | None) -> dict[str, dict[str, Any]]:
    model_error = work / "model-error.json"
    if model_error.exists() or not (work / "reference.pt").exists():
        reason = json.loads(model_error.read_text())["error"] if model_error.exists() else crash or "no reference"
        return {f.name: failed("model", f"building or running the eager model failed:\n{reason}") for f in flows}
    report_path = work / "export.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    results = {}
    for flow in flows:
        entry = dict(report.get(flow.name, {}))
        if not entry:
            results[flow.name] = failed("export", f"export process died before finishing this flow:\n{crash}")
        elif not entry.pop("ok"):
            results[flow.name] = {**failed("export", entry.pop("error")), **entry}
        else:
            results[flow.name] = {"status": "ok", **entry}
    return results


# Every run process starts as a fork of one process that has imported these: `import executorch.runtime`
# alone takes 3 s (it pulls in all of exir), which was half of each run process and 5 minutes of the
# suite. Forked before any thread pool or runtime exists; each flow imports its own runtime after the fork.
RUN_PRELOAD = ["torch", "executorch.runtime", "examples.onednn.benchmark_worker"]


class RunForker:
    """Starts each (model, flow) run as a fresh process forked from a preloaded server."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        os.environ.update(_child_env(settings.threads))  # the fork server, started on first use, passes them on
        self.pin = _pinned_cpus(settings.threads)
        self.context = multiprocessing.get_context("forkserver")
        self.context.set_forkserver_preload(RUN_PRELOAD)

    def run(self, spec_path: Path, stderr_path: Path, timeout: float, library: str | None = None) -> str | None:
        """None when the run process exited cleanly, else why it did not. With `library`, the process loads
        our delegate's runtime from there: a fresh interpreter (spawned, not forked: the fork server has
        imported the installed one)."""
        from examples.onednn.benchmark_worker import run_child

        context = self.context if library is None else multiprocessing.get_context("spawn")
        process = context.Process(target=run_child, args=(str(spec_path), str(stderr_path), self.pin))
        saved = os.environ.get("ONEDNN_BACKEND_LIBRARY")
        if library is not None:
            os.environ["ONEDNN_BACKEND_LIBRARY"] = library
        try:
            process.start()
        finally:
            if library is not None:
                os.environ.pop("ONEDNN_BACKEND_LIBRARY")
                if saved is not None:
                    os.environ["ONEDNN_BACKEND_LIBRARY"] = saved
        process.join(timeout)
        if process.is_alive():
            process.kill()
            process.join()
            return f"TimeoutError: no result within {timeout:g} s (process killed)"
        if process.exitcode == 0:
            return None
        stderr = stderr_path.read_text(errors="replace")[-8000:] if stderr_path.exists() else ""
        return _describe_exit(process.exitcode or 0, stderr)


def run_flow(flow: Flow, exported: dict[str, Any], work: Path, settings: Settings, forker: RunForker) -> dict[str, Any]:
    """Loads, times and checks one exported flow in a fresh process; its numbers or its failure."""
    if flow.slow:
        runs, warmup, budget = settings.slow_runs, 0, settings.slow_budget_s
    else:
        runs, warmup, budget = settings.runs, settings.warmup, settings.budget_s
    result_path, spec_path = work / f"{flow.name}.result.json", work / f"{flow.name}.spec.json"
    spec = {
        "flow": flow.name, "dir": str(work), "threads": settings.threads, "runs": runs, "warmup": warmup,
        "budget_s": budget, "result": str(result_path), "imports": exported.get("imports", []),
    }  # fmt: skip
    spec_path.write_text(json.dumps(spec))
    library = os.environ[BASELINE_LIBRARY_ENV] if flow.baseline else None
    crash = forker.run(spec_path, work / f"{flow.name}.stderr", settings.timeout_s + budget, library)
    result = json.loads(result_path.read_text()) if result_path.exists() else {"ok": False, "error": crash}
    if not result.pop("ok"):
        return {**exported, **failed("run", result.get("error") or crash or "no result")}
    return {**exported, **result}


def measure_call_overhead(settings: Settings) -> dict[str, Any]:
    """benchmark_overhead.py in a fresh process, pinned like the runs: its numbers or why it failed."""
    command = [sys.executable, "-m", "examples.onednn.benchmark_overhead", "--threads", str(settings.threads)]
    pin = _pinned_cpus(settings.threads)
    if pin:
        command += ["--cpus", ",".join(map(str, pin))]
    env = _child_env(settings.threads)
    try:
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=settings.timeout_s)
    except subprocess.TimeoutExpired:
        return failed("run", f"TimeoutError: no result within {settings.timeout_s:g} s")
    if done.returncode != 0:
        return failed("run", _describe_exit(done.returncode, done.stderr))
    return {"status": "ok", **json.loads(done.stdout.strip().splitlines()[-1])}


__all__ = ["ExportServer", "RunForker", "Settings", "failed", "measure_call_overhead", "run_flow"]
