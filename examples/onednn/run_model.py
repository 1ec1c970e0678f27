# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The main job: export a built-in model with the oneDNN delegate, run it through the ExecuTorch
runtime, check it against eager PyTorch, and time it next to XNNPACK and the non-delegated runtime.

    python -m examples.onednn.run_model --model resnet18 [--precision bf16] [--dynamic-int8]
"""

from __future__ import annotations

from examples.onednn import quiet  # first: it filters what torch, torchao and exir print on import

# isort: split
import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from executorch.backends.onednn import OneDnnPartitioner, torch_threads
from executorch.backends.onednn.cli.zoo import MODELS
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.exir.backend.partitioner import Partitioner
from executorch.runtime import Runtime

DELEGATE_CALL = torch.ops.higher_order.executorch_call_delegate


@dataclass
class Flow:
    name: str
    partitioners: Callable[[], list[Partitioner]]
    # The non-delegated runtime is orders of magnitude slower: fewer timed runs keep the job short.
    runs_divisor: int = 1


def flows(precision: str, dynamic_int8: bool) -> list[Flow]:
    ours = "onednn" if precision == "fp32" else f"onednn, precision={precision}"
    ours += ", dynamic int8 linears" if dynamic_int8 else ""
    return [
        Flow(ours, lambda: [OneDnnPartitioner(precision=precision, dynamic_int8=dynamic_int8)]),
        Flow("xnnpack", lambda: [XnnpackPartitioner()]),
        Flow("no delegate", lambda: [], runs_divisor=10),
    ]


# Max error relative to the output's largest magnitude, per precision inside the delegate.
DEFAULT_TOLERANCE = {"fp32": 1e-4, "bf16": 2e-2}
# With --dynamic-int8: each linear layer's operands keep ~7 bits per value (test_dynamic_int8.py).
DYNAMIC_INT8_TOLERANCE = 5e-2


@dataclass
class FlowResult:
    name: str
    delegate_calls: int
    median_ms: float
    spread_ms: float
    max_rel_error: float


def export(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], flow: Flow) -> tuple[bytes, int]:
    exported = torch.export.export(model, inputs)
    edge = to_edge_transform_and_lower(exported, partitioner=flow.partitioners())
    graph = edge.exported_program().graph
    calls = sum(1 for node in graph.nodes if node.op == "call_function" and node.target == DELEGATE_CALL)
    return edge.to_executorch().buffer, calls


def run_flow(
    flow: Flow, model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], expected: list[torch.Tensor], runs: int
) -> FlowResult:
    print(f"[{flow.name}] exporting and lowering...", flush=True)
    buffer, calls = export(model, inputs, flow)
    runs = max(3, runs // flow.runs_divisor)
    print(f"[{flow.name}] {calls} delegate call(s); running it {runs + 3} times", flush=True)
    program = Runtime.get().load_program(buffer)  # reads `buffer` in place: keep it alive
    method = program.load_method("forward")
    with torch_threads(1):  # torch's workers off the cores the program runs on (its README, "Known issues")
        outputs = method.execute(list(inputs))
        for _ in range(2):
            method.execute(list(inputs))
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            method.execute(list(inputs))
            times.append((time.perf_counter() - start) * 1e3)
    error = max(
        float((out - ref).abs().max()) / max(1e-12, float(ref.abs().max())) for out, ref in zip(outputs, expected)
    )
    del method, program, buffer
    quartiles = statistics.quantiles(times, n=4) if len(times) > 1 else [times[0]] * 3
    return FlowResult(flow.name, calls, statistics.median(times), quartiles[2] - quartiles[0], error)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="resnet18", choices=sorted(MODELS))
    parser.add_argument("--runs", type=int, default=30, help="timed runs per delegated flow")
    parser.add_argument("--threads", type=int, default=0, help="eager PyTorch threads (0: all cores)")
    parser.add_argument(
        "--precision", default="fp32", choices=sorted(DEFAULT_TOLERANCE), help="what the delegate computes in"
    )
    parser.add_argument("--dynamic-int8", action="store_true", help="linear layers in int8, per-token scales")
    parser.add_argument(
        "--tolerance", type=float, default=None,
        help="max error relative to the output's max (1e-4; bf16: 2e-2; --dynamic-int8: 5e-2)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    quiet.start_threadpool_quietly()
    default = DYNAMIC_INT8_TOLERANCE if args.dynamic_int8 else DEFAULT_TOLERANCE[args.precision]
    tolerance = default if args.tolerance is None else args.tolerance
    if args.threads:
        torch.set_num_threads(args.threads)

    torch.manual_seed(0)
    model, inputs = MODELS[args.model]()
    model.eval()
    with torch.no_grad():
        eager = model(*inputs)
    expected = [eager] if isinstance(eager, torch.Tensor) else list(eager)

    print(f"model {args.model}, inputs {[tuple(t.shape) for t in inputs]}, {torch.get_num_threads()} threads")
    results = [run_flow(flow, model, inputs, expected, args.runs) for flow in flows(args.precision, args.dynamic_int8)]
    xnnpack_ms = next(r.median_ms for r in results if r.name == "xnnpack")
    print("\n| flow | delegate calls | median ms | IQR ms | vs XNNPACK | max rel. error vs eager |")
    print("|---|---|---|---|---|---|")
    for r in results:
        speedup = xnnpack_ms / r.median_ms
        cells = [r.name, str(r.delegate_calls), f"{r.median_ms:.2f}", f"{r.spread_ms:.2f}", f"{speedup:.2f}x"]
        print("| " + " | ".join([*cells, f"{r.max_rel_error:.2e}"]) + " |")
    ours = results[0]
    ok = ours.max_rel_error <= tolerance and ours.delegate_calls >= 1
    verdict = "matches eager" if ok else "DOES NOT match eager (or was not delegated)"
    print(f"\nOneDnnBackend {verdict}: max relative error {ours.max_rel_error:.2e} (tolerance {tolerance:.0e})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
