# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""A/B timing of two builds of the runtime on the same `.pte` files.

    python -m examples.onednn.benchmark_runtimes --baseline old/libexecutorch_backend_onednn.so \\
        --candidate build/backends/onednn/libexecutorch_backend_onednn.so --models mobilenet_v2,resnet50

Exports each model of `benchmark_models.py` once per precision with the installed AOT side, then runs
`--rounds` rounds; each round times every program in a fresh process per build (ONEDNN_BACKEND_LIBRARY),
alternating the builds, so slow phases of a noisy machine hit both. Prints, per program, the median
ms of each round and the fastest round for each build.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

PRECISIONS = ("fp32", "bf16")


def export(models: list[str], work: Path) -> None:
    from executorch.backends.onednn import OneDnnPartitioner
    from executorch.exir import to_edge_transform_and_lower

    from examples.onednn.benchmark_models import BENCH_MODELS

    for name in models:
        model, inputs = BENCH_MODELS[name].factory()
        torch.save(inputs, work / f"{name}.inputs")
        for precision in PRECISIONS:
            partitioner = OneDnnPartitioner(precision="bf16") if precision == "bf16" else OneDnnPartitioner()
            edge = to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=[partitioner])
            (work / f"{name}.{precision}.pte").write_bytes(edge.to_executorch().buffer)


def time_programs(models: list[str], work: Path, threads: int, budget: float) -> None:
    """In this process (whose ONEDNN_BACKEND_LIBRARY picks the build): one line per program."""
    from executorch.backends.onednn._runtime import load_runtime, set_num_threads

    torch.set_num_threads(1)  # torch_threads(): torch's workers stay off the cores the runtime computes on
    load_runtime()
    set_num_threads(threads)
    from executorch.runtime import Runtime

    for name in models:
        inputs = list(torch.load(work / f"{name}.inputs"))
        for precision in PRECISIONS:
            program = Runtime.get().load_program(work / f"{name}.{precision}.pte")
            method = program.load_method("forward")
            for _ in range(10):
                method.execute(inputs)
            times: list[float] = []
            deadline = time.perf_counter() + budget
            while len(times) < 200 and time.perf_counter() < deadline:
                start = time.perf_counter()
                method.execute(inputs)
                times.append((time.perf_counter() - start) * 1e3)
            print(f"{name}.{precision} {statistics.median(times):.3f}", flush=True)
            del method, program  # the method first: it reads the program's data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, required=True, help="the runtime library to compare against")
    parser.add_argument("--candidate", type=Path, required=True, help="the runtime library under test")
    parser.add_argument("--models", default="mobilenet_v2,mobilenet_v3_small,resnet50,unet")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--budget", type=float, default=3.0, help="seconds of timed runs per program")
    parser.add_argument("--work-dir", type=Path, default=Path("results/runtimes"))
    parser.add_argument("--time-only", action="store_true", help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    models = args.models.split(",")
    args.work_dir.mkdir(parents=True, exist_ok=True)
    if args.time_only:
        time_programs(models, args.work_dir, args.threads, args.budget)
        return
    export(models, args.work_dir)
    rounds: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for build, library in (("baseline", args.baseline), ("candidate", args.candidate)):
            env = {**os.environ, "ONEDNN_BACKEND_LIBRARY": str(library.resolve())}
            child = [sys.executable, "-m", "examples.onednn.benchmark_runtimes", *sys.argv[1:], "--time-only"]
            output = subprocess.run(child, env=env, check=True, capture_output=True, text=True).stdout
            for line in output.splitlines():
                program, ms = line.split()
                rounds.setdefault((program, build), []).append(float(ms))
    print("| program | baseline, fastest / all rounds (ms) | candidate, fastest / all rounds (ms) |")
    print("|---|---|---|")
    for program in dict.fromkeys(program for program, _ in rounds):
        cells = [rounds[(program, build)] for build in ("baseline", "candidate")]
        summaries = [f"{min(c):.2f} / {', '.join(f'{v:.2f}' for v in c)}" for c in cells]
        print(f"| {program} | " + " | ".join(summaries) + " |")


if __name__ == "__main__":
    main()
