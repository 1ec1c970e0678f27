# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Per-call overhead: one tiny op (relu of 8 floats) through each delegate, against ExecuTorch's own kernel.

    python -m examples.onednn.benchmark_overhead --threads 2

Prints JSON: per flow the microseconds of one `method.execute()` (the best of several rounds of many
calls, so the machine's noise stays out), and the delegate's own cost: that time minus the same program
without a delegate, whose portable relu of 8 floats costs next to nothing. What both share (Python's
call into the runtime, the method's argument handling) cancels out. benchmark.py runs this in a fresh
process after the models and records it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

ROUNDS = 7
WARMUP = 200


def _partitioners() -> dict[str, Callable[[], list[Any]]]:
    def onednn() -> list[Any]:
        from executorch.backends.onednn import OneDnnPartitioner

        return [OneDnnPartitioner()]

    def xnnpack() -> list[Any]:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        return [XnnpackPartitioner()]

    return {"onednn": onednn, "xnnpack": xnnpack, "no-delegate": list}


def _microseconds_per_call(method: Any, args: list[torch.Tensor], calls: int) -> float:
    for _ in range(WARMUP):
        method.execute(args)
    best = float("inf")
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(calls):
            method.execute(args)
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def measure(threads: int, calls: int) -> dict[str, Any]:
    from executorch.exir import to_edge_transform_and_lower
    from executorch.extension.pybindings import portable_lib
    from executorch.runtime import Runtime

    torch.set_num_threads(1)  # see torch_threads(): only ExecuTorch computes here
    if portable_lib._threadpool_get_thread_count() != threads:
        portable_lib._unsafe_reset_threadpool(threads)
    inputs = (torch.randn(1, 8),)
    program = torch.export.export(nn.ReLU().eval(), inputs)
    per_call: dict[str, float] = {}
    for flow, partitioners in _partitioners().items():
        buffer = to_edge_transform_and_lower(program, partitioner=partitioners()).to_executorch().buffer
        loaded = Runtime.get().load_program(buffer)
        method = loaded.load_method("forward")
        args = list(inputs)
        outputs = method.execute(args)
        if not torch.equal(outputs[0], torch.relu(inputs[0])):
            raise RuntimeError(f"{flow}: relu of 8 floats gave {outputs[0]}")
        per_call[flow] = _microseconds_per_call(method, args, calls)
    baseline = per_call["no-delegate"]
    return {
        "op": "relu, 1x8 fp32",
        "calls": calls,
        "rounds": ROUNDS,
        "us_per_call": per_call,
        "delegate_us": {flow: us - baseline for flow, us in per_call.items() if flow != "no-delegate"},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--calls", type=int, default=2000, help="calls per timed round")
    parser.add_argument("--cpus", default="", help="comma-separated cores to pin this process to")
    args = parser.parse_args(argv)
    if args.cpus:
        os.sched_setaffinity(0, {int(cpu) for cpu in args.cpus.split(",")})
    import executorch.backends.onednn  # noqa: F401  (registers the delegate's runtime)

    print(json.dumps(measure(args.threads, args.calls)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
