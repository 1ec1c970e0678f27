# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Oversubscription check: the delegate's threads and ExecuTorch's portable kernels taking turns.

    python -m examples.onednn.benchmark_alternation --threads 1,2

A chain of `--layers` blocks, each a linear layer (the delegate, one call per block) followed by a
cumsum (no delegate takes it: ExecuTorch's portable kernel runs it on the calling thread). Per thread
count it exports three programs and times each in this process:
- `alternating`: the chain, lowered with the delegate (linear, cumsum, linear, cumsum, ...);
- `delegate_part`: the chain with the cumsums left out, lowered with the delegate;
- `portable_part`: the cumsums alone, without a delegate.

If the delegate's worker threads kept spinning, or held cores, while the portable kernels run, the
alternating program would take longer (wall) or burn more processor time (CPU, user + system of the
whole process) than its two parts run apart; `excess_*` is that difference as a share of the
alternating program's figure. `cpu_per_wall` of `delegate_part` shows the thread count taking effect,
and `os_threads` counts the process's threads after the runs (/proc/self/task). Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from typing import Any

import torch
from torch import nn

WIDTH = 1024
ROWS = 64


class Chain(nn.Module):
    def __init__(self, layers: int, linear: bool, cumsum: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linears = nn.ModuleList(nn.Linear(WIDTH, WIDTH) for _ in range(layers))
        self.linear = linear
        self.cumsum = cumsum

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.linears:
            if self.linear:
                x = layer(x)
            if self.cumsum:
                x = torch.cumsum(x, dim=-1)
        return x


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _program(layers: int, linear: bool, cumsum: bool, delegate: bool) -> tuple[tuple[Any, Any], int, torch.Tensor]:
    """(program, method) (the program must outlive its method), the delegate calls, an input."""
    from executorch.backends.onednn import OneDnnPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime

    model = Chain(layers, linear, cumsum).eval()
    example = (torch.randn(ROWS, WIDTH) * 0.01,)
    exported = torch.export.export(model, example)
    lowered = to_edge_transform_and_lower(exported, partitioner=[OneDnnPartitioner()] if delegate else [])
    calls = sum(
        node.target.__name__ == "executorch_call_delegate"
        for node in lowered.exported_program().graph.nodes
        if node.op == "call_function" and hasattr(node.target, "__name__")
    )
    program = Runtime.get().load_program(lowered.to_executorch().buffer)
    method = program.load_method("forward")
    with torch.no_grad():
        expected = model(*example)
    got = method.execute(list(example))[0]
    if not torch.allclose(got, expected, rtol=1e-3, atol=1e-3 * float(expected.abs().max())):
        raise RuntimeError(f"linear={linear} cumsum={cumsum}: the program's output differs from eager")
    return (program, method), calls, example[0]


def _time(method: Any, x: torch.Tensor, runs: int, rounds: int) -> dict[str, float]:
    for _ in range(max(3, runs // 10)):
        method.execute([x])
    walls, cpus = [], []
    for _ in range(rounds):
        cpu_start, wall_start = _cpu_seconds(), time.perf_counter()
        for _ in range(runs):
            method.execute([x])
        walls.append((time.perf_counter() - wall_start) / runs * 1e3)
        cpus.append((_cpu_seconds() - cpu_start) / runs * 1e3)
    return {"wall_ms": statistics.median(walls), "cpu_ms": statistics.median(cpus)}


def measure(threads: int, layers: int, runs: int, rounds: int) -> dict[str, Any]:
    from executorch.backends.onednn import set_num_threads
    from executorch.extension.pybindings import portable_lib

    torch.set_num_threads(1)  # see torch_threads(): only ExecuTorch computes here
    if portable_lib._threadpool_get_thread_count() != threads:
        portable_lib._unsafe_reset_threadpool(threads)
    set_num_threads(threads)
    programs = {
        "alternating": (True, True, True),
        "delegate_part": (True, False, True),
        "portable_part": (False, True, False),
    }
    result: dict[str, Any] = {"threads": threads}
    for name, (linear, cumsum, delegate) in programs.items():
        (_program_alive, method), calls, x = _program(layers, linear, cumsum, delegate)
        timing = _time(method, x, runs, rounds)
        timing["cpu_per_wall"] = timing["cpu_ms"] / timing["wall_ms"]
        timing["delegate_calls"] = calls
        result[name] = timing
    if result["alternating"]["delegate_calls"] != layers:
        raise RuntimeError(f"expected {layers} delegate calls, got {result['alternating']['delegate_calls']}")
    whole, parts = result["alternating"], (result["delegate_part"], result["portable_part"])
    for figure in ("wall_ms", "cpu_ms"):
        apart = sum(part[figure] for part in parts)
        result[f"excess_{figure[:-3]}"] = (whole[figure] - apart) / whole[figure]
    result["os_threads"] = len(os.listdir("/proc/self/task"))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--runs", type=int, default=50, help="executions per timed round")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    report = {
        "cpus_in_affinity": len(os.sched_getaffinity(0)),
        "layers": args.layers,
        "rows_x_width": [ROWS, WIDTH],
        "by_threads": [measure(int(t), args.layers, args.runs, args.rounds) for t in args.threads.split(",")],
    }
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
