# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The runtimes taking turns in one process, round after round, on the benchmark's artifacts.

    python -m examples.onednn.benchmark --models mobilenet_v2 --flows onednn,xnnpack,onnxruntime --work-dir W
    python -m examples.onednn.benchmark_rounds --work-dir W --models mobilenet_v2 --rounds 16

`benchmark.py` times each flow in a process of its own, one flow after the other, so on a VM whose speed
drifts by tens of percent between minutes a flow can draw a slow minute that its peers did not. Here
every flow's artifact of a model (`W/<model>/<flow>.pte` or `.onnx`, with `inputs.pt` and `reference.pt`)
is loaded into one process and run `--calls` times in turn with the others, `--rounds` times, so a slow
minute falls on all of them. Per model it prints each flow's median of its rounds' medians and the first
flow's speed against the fastest other flow of each round (other / first: above 1 is the first flow
faster), the median of those ratios and their range; `--json` writes them with every round's figures.
Each flow's first output is checked against the eager reference, so a wrong program is not timed.

Only artifacts that need no torch thread pool take part: eager PyTorch computes on torch's OpenMP pool,
whose workers keep spinning between calls on the cores the other runtimes use (backends/onednn/README.md,
"Known issues"); time it with `benchmark.py`. ONNX Runtime can take part (`--flows
onednn,xnnpack,onnxruntime`) but is left out by default: with its session in the process the flow after
it ran slower, even after a pause (AMD Zen 4, MobileNetV3-small, 8 rounds: ours 1.03 ms a call, the
median of the rounds, with XNNPACK alone, 1.61 with ONNX Runtime before it; BENCHMARKS.md, "The Zen 4
once more"), so compare with it in `benchmark.py`'s separate processes. The pair timing of two builds
or settings of one program is `benchmark_pair.py`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from examples.onednn.benchmark_flows import FLOWS, RunFn
from examples.onednn.benchmark_worker import max_relative_error

# Our bf16 and int8 flows and XNNPACK's int8 load like the fp32 programs: `--flows onednn-int8,xnnpack-int8`
# or `--flows onednn-bf16-model,onednn` compare them.
ROUND_FLOWS = (
    "onednn", "xnnpack", "onnxruntime", "onednn-bf16", "onednn-bf16-model",
    "onednn-int8", "xnnpack-int8", "onednn-dyn-int8", "xnnpack-dyn-int8",
)  # fmt: skip
DEFAULT_FLOWS = ("onednn", "xnnpack")


def load_runs(model_dir: Path, flows: list[str], threads: int) -> dict[str, RunFn]:
    inputs = tuple(torch.load(model_dir / "inputs.pt"))
    for name in flows:
        FLOWS[name].setup(threads)
    # ONNX Runtime's setup sizes torch's pool; nothing here computes with torch, and a pool of one
    # leaves no OpenMP worker spinning beside the runtimes under test.
    torch.set_num_threads(1)
    runs = {}
    for name in flows:
        artifact = model_dir / f"{name}{FLOWS[name].suffix}"
        if not artifact.exists():
            raise FileNotFoundError(f"{artifact} does not exist (benchmark.py --work-dir writes it)")
        runs[name] = FLOWS[name].load(artifact, inputs, threads)
    return runs


def time_rounds(
    runs: dict[str, RunFn], rounds: int, calls: int, pause_s: float, warmup: int = 3
) -> dict[str, list[float]]:
    """Each flow's median call (ms) in every round; within a round the flows run one after another, with
    `pause_s` of sleep before each flow's calls."""
    for run in runs.values():
        for _ in range(warmup):
            run()
    medians: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            time.sleep(pause_s)
            times = []
            for _ in range(calls):
                start = time.perf_counter()
                run()
                times.append((time.perf_counter() - start) * 1e3)
            medians[name].append(statistics.median(times))
    return medians


def first_against_best_other(medians: dict[str, list[float]]) -> dict[str, Any]:
    first, *others = medians
    per_round = [min(medians[other][i] for other in others) / medians[first][i] for i in range(len(medians[first]))]
    return {"flow": first, "per_round": per_round, "median": statistics.median(per_round),
            "min": min(per_round), "max": max(per_round)}  # fmt: skip


def measure_model(
    model_dir: Path, flows: list[str], threads: int, rounds: int, calls: int, pause_s: float
) -> dict[str, Any]:
    runs = load_runs(model_dir, flows, threads)
    reference = torch.load(model_dir / "reference.pt")
    errors = {name: max_relative_error(run(), reference) for name, run in runs.items()}
    medians = time_rounds(runs, rounds, calls, pause_s)
    result: dict[str, Any] = {
        "rounds": rounds,
        "calls": calls,
        "threads": threads,
        "flows": {
            name: {
                "median_ms": statistics.median(medians[name]),
                "round_ms": medians[name],
                "max_rel_error": errors[name],
            }
            for name in flows
        },
    }
    if len(flows) > 1:
        result["first_vs_best_other"] = first_against_best_other(medians)
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", type=Path, required=True, help="benchmark.py's --work-dir")
    parser.add_argument("--models", required=True, help="comma-separated")
    parser.add_argument("--flows", default=",".join(DEFAULT_FLOWS), help=f"of {ROUND_FLOWS}; the first is compared")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=30, help="calls of each flow per round")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--pause", type=float, default=0.0, help="seconds of sleep before each flow's calls")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    flows = args.flows.split(",")
    unknown = [name for name in flows if name not in ROUND_FLOWS]
    if unknown:
        parser.error(f"flows {unknown} cannot take turns here; these can: {', '.join(ROUND_FLOWS)}")
    if args.rounds < 1 or args.calls < 1:
        parser.error("--rounds and --calls must be at least 1")

    results = {}
    for model in args.models.split(","):
        result = measure_model(args.work_dir / model, flows, args.threads, args.rounds, args.calls, args.pause)
        results[model] = result
        times = ", ".join(f"{name} {entry['median_ms']:.3f} ms" for name, entry in result["flows"].items())
        line = f"{model} ({args.rounds} rounds of {args.calls} calls): {times}"
        if "first_vs_best_other" in result:
            ratio = result["first_vs_best_other"]
            line += (f"; {ratio['flow']} against the fastest other flow, by round: {ratio['median']:.3f}x "
                     f"({ratio['min']:.2f}-{ratio['max']:.2f})")  # fmt: skip
        print(line, flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
