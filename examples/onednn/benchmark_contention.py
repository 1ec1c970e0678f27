# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Latency of our delegate while other processes compete for the cores, per build or setting.

    python -m examples.onednn.benchmark_contention --models mlp,vit_tiny --threads 2 \
        --variant ours --variant baseline:ONEDNN_BACKEND_LIBRARY=/path/to/libexecutorch_backend_onednn.so

Each model is exported once with the delegate (fp32). Then per variant (a name and environment variables
for its process: another runtime library, another setting) and per load (none, then `--competitors`
processes each spinning on a core), a fresh process loads the .pte, warms up and times `--runs` calls.
A runtime whose threads wait for each other at a barrier after every primitive loses a whole time slice
whenever the scheduler takes one of them away; this shows how much of that each variant pays. Prints a
markdown table (median, p90 and max ms) and writes JSON with --out.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TIMER = r"""
import json, statistics, sys, time
import torch
import executorch.backends.onednn as onednn
from executorch.runtime import Runtime
path, runs, warmup, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(1)  # see torch_threads(): only ExecuTorch computes here
onednn.set_num_threads(threads)
inputs = torch.load(path + ".inputs.pt")
program = Runtime.get().load_program(path)
method = program.load_method("forward")
for _ in range(warmup):
    method.execute(inputs)
times = []
for _ in range(runs):
    start = time.perf_counter()
    method.execute(inputs)
    times.append((time.perf_counter() - start) * 1e3)
print(json.dumps({"times_ms": times, "onednn": onednn.onednn_version()}))
"""


def _spin() -> None:
    while True:
        pass


def export(name: str, work: Path) -> Path:
    import torch
    from executorch.backends.onednn import OneDnnPartitioner
    from executorch.exir import to_edge_transform_and_lower

    from examples.onednn.benchmark_models import BENCH_MODELS

    model, inputs = BENCH_MODELS[name].factory()
    path = work / f"{name}.pte"
    program = to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=[OneDnnPartitioner()])
    path.write_bytes(program.to_executorch().buffer)
    torch.save(list(inputs), str(path) + ".inputs.pt")
    return path


def time_variant(path: Path, env: dict[str, str], args: argparse.Namespace, competitors: int) -> dict[str, Any]:
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(competitors)]
    for spinner in spinners:
        spinner.start()
    time.sleep(0.2 if competitors else 0)
    try:
        result = subprocess.run(
            [sys.executable, "-c", TIMER, str(path), str(args.runs), str(args.warmup), str(args.threads)],
            env={**os.environ, **env}, capture_output=True, text=True, timeout=args.timeout, check=False,
        )  # fmt: skip
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.join()
    if result.returncode != 0:
        return {"error": result.stderr.strip()[-500:]}
    report = json.loads(result.stdout.strip().splitlines()[-1])
    times = sorted(report["times_ms"])
    return {
        "onednn": report["onednn"],
        "median_ms": statistics.median(times),
        "p90_ms": times[int(0.9 * (len(times) - 1))],
        "max_ms": times[-1],
        "times_ms": report["times_ms"],
    }


def parse_variant(text: str) -> tuple[str, dict[str, str]]:
    name, _, assignments = text.partition(":")
    env = dict(item.split("=", 1) for item in assignments.split(",") if item)
    return name, env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="mlp,vit_tiny,resnet18", help="comma-separated benchmark models")
    parser.add_argument("--variant", action="append", default=[], help="NAME[:VAR=VALUE,...]; default: ours")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--competitors", type=int, default=len(os.sched_getaffinity(0)), help="spinning processes")
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)
    variants = [parse_variant(text) for text in args.variant or ["ours"]]
    results: list[dict[str, Any]] = []
    print("| model | variant | competing processes | median ms | p90 ms | max ms | oneDNN |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="onednn-contention-") as work:
        for model in args.models.split(","):
            path = export(model, Path(work))
            for name, env in variants:
                for competitors in (0, args.competitors):
                    entry = time_variant(path, env, args, competitors)
                    results.append({"model": model, "variant": name, "competitors": competitors, **entry})
                    if "error" in entry:
                        print(f"| {model} | {name} | {competitors} | failed: {entry['error'][-120:]} | | | |")
                    else:
                        cells = [f"{entry[k]:.2f}" for k in ("median_ms", "p90_ms", "max_ms")]
                        print(f"| {model} | {name} | {competitors} | {' | '.join(cells)} | {entry['onednn']} |")
                    sys.stdout.flush()
    if args.out:
        args.out.write_text(json.dumps({"threads": args.threads, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
