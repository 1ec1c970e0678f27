# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""`bench`: times a .pte, or a model across backends (oneDNN fp32 and bf16, XNNPACK), writing a markdown
table and a PNG chart. One process, in turn; `examples/onednn/benchmark.py` is the full suite (a fresh
process per flow, more runtimes, peak memory)."""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from .._runtime import torch_threads
from ._common import CliError, Stage, load_method, load_model, load_program, parse_shape, progress, random_inputs

FLOWS = {
    "onednn": "ExecuTorch + oneDNN",
    "onednn-bf16": "ExecuTorch + oneDNN, precision=bf16",
    "xnnpack": "ExecuTorch + XNNPACK",
}


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="time a .pte, or a model across backends",
        description="Time a .pte on random inputs, or export a model for each backend and time them all.",
    )
    parser.add_argument("pte", type=Path, nargs="?", help="the .pte to time (or use --model)")
    parser.add_argument("--model", help="a zoo model or module:attr, exported for every flow in --flows")
    parser.add_argument("--shape", action="append", type=parse_shape, default=[], help="--model: input shapes")
    parser.add_argument("--flows", default=",".join(FLOWS), help=f"--model: comma-separated, of {', '.join(FLOWS)}")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, help="threads for oneDNN and XNNPACK (default: their own)")
    parser.add_argument(
        "--out", type=Path, default=Path("bench"), help="folder for the table and the chart (and --model's .pte files)"
    )
    parser.set_defaults(run=run)


def _set_threads(threads: int | None) -> None:
    if threads is None:
        return
    from executorch.extension.pybindings import portable_lib

    from .. import set_num_threads

    set_num_threads(threads)
    portable_lib._unsafe_reset_threadpool(threads)


def time_method(method: Any, inputs: tuple[torch.Tensor, ...], runs: int, warmup: int, label: str) -> list[float]:
    """Milliseconds of each timed run."""
    args = list(inputs)
    with torch_threads(1):  # torch's workers off the cores the program runs on (README, "Known issues")
        for _ in range(warmup):
            method.execute(args)
        times = []
        for _ in progress(range(runs), runs, label):
            start = time.perf_counter()
            method.execute(args)
            times.append((time.perf_counter() - start) * 1e3)
    return times


def _summary(times: list[float]) -> str:
    ordered = sorted(times)
    p10, p90 = ordered[len(ordered) // 10], ordered[min(len(ordered) - 1, len(ordered) * 9 // 10)]
    return f"{statistics.median(times):.3f} ms median ({p10:.3f}-{p90:.3f} p10-p90, {len(times)} runs)"


def _export(flow: str, model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], path: Path) -> None:
    from executorch.exir import to_edge_transform_and_lower

    if flow == "xnnpack":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        partitioner: Any = XnnpackPartitioner()
    else:
        from ..partition import OneDnnPartitioner

        partitioner = OneDnnPartitioner(precision="bf16" if flow == "onednn-bf16" else "fp32")
    lowered = to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=[partitioner])
    path.write_bytes(lowered.to_executorch().buffer)


def _chart(rows: list[tuple[str, float]], title: str, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError as error:
        raise CliError("the chart needs matplotlib: pip install matplotlib==3.11.2") from error
    figure, axes = pyplot.subplots(figsize=(7, 0.6 * len(rows) + 1.2))
    axes.barh([label for label, _ in rows], [ms for _, ms in rows], color="#3c9d5d")
    axes.invert_yaxis()
    axes.set_xlabel("median latency (ms), lower is better")
    axes.set_title(title)
    for index, (_, ms) in enumerate(rows):
        axes.text(ms, index, f" {ms:.2f}", va="center")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)


def run(args: argparse.Namespace) -> int:
    if (args.pte is None) == (args.model is None):
        raise CliError("give a .pte to time, or --model to export and time across backends (not both)")
    if args.runs < 1:
        raise CliError("--runs must be at least 1")
    _set_threads(args.threads)
    if args.pte is not None:
        program = load_program(args.pte)
        method = load_method(program)
        times = time_method(method, random_inputs(program), args.runs, args.warmup, f"timing {args.pte.name}")
        print(f"{args.pte}: {_summary(times)}")
        del method
        _write(args.out, str(args.pte), [(args.pte.name, statistics.median(times))])
        return 0
    flows = args.flows.split(",")
    unknown = set(flows) - set(FLOWS)
    if unknown:
        raise CliError(f"unknown flow(s) {', '.join(sorted(unknown))}: choose from {', '.join(FLOWS)}")
    model, inputs = load_model(args.model, args.shape)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for flow in flows:
        path = args.out / f"{flow}.pte"
        with Stage(f"exporting for {flow}"):
            _export(flow, model, inputs, path)
        program = load_program(path)
        method = load_method(program)
        times = time_method(method, inputs, args.runs, args.warmup, f"timing {flow}")
        del method
        rows.append((FLOWS[flow], statistics.median(times)))
        print(f"{FLOWS[flow]}: {_summary(times)}")
    shapes = ", ".join("x".join(str(d) for d in x.shape) for x in inputs)
    _write(args.out, f"{args.model} ({shapes})", rows)
    return 0


def _write(out: Path, title: str, rows: list[tuple[str, float]]) -> None:
    """results.md and latency.png in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    table = [f"# {title}", "", "| flow | median ms |", "|---|---|", *(f"| {label} | {ms:.3f} |" for label, ms in rows)]
    (out / "results.md").write_text("\n".join(table) + "\n")
    _chart(rows, title, out / "latency.png")
    print(f"wrote {out / 'results.md'} and {out / 'latency.png'}")
