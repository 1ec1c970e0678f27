# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""What dynamic shapes cost: one encoder exported with a dynamic sequence length, against the same
encoder exported at one static length.

    python -m examples.onednn.benchmark_dynamic --threads 2

A 4-layer transformer encoder (width 384, 6 heads, feed-forward 1536, random weights) is lowered with
our delegate twice: with `Dim("seq", min=1, max=512)` and at a static length of 128. Prints JSON: the
load_method() time of each (the dynamic program compiles at the maximum length there), and per
length the first call (which compiles the graph for a new length) and the median of later calls,
next to the static program's median at 128.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

LENGTHS = (128, 1, 37, 512, 200)
STATIC_LENGTH = 128
CALLS = 20


def encoder() -> nn.Module:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(384, 6, 1536, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, 4, enable_nested_tensor=False).eval()


def _milliseconds(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1e3


def _median_ms(call: Callable[[], object], calls: int = CALLS) -> float:
    times = sorted(_milliseconds(call) for _ in range(calls))
    return times[len(times) // 2]


def measure(threads: int) -> dict[str, Any]:
    from executorch.backends.onednn import OneDnnPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.extension.pybindings import portable_lib
    from executorch.runtime import Runtime

    torch.set_num_threads(1)  # see torch_threads(): only ExecuTorch computes here
    portable_lib._unsafe_reset_threadpool(threads)
    model = encoder()
    example = (torch.randn(1, STATIC_LENGTH, 384),)
    dynamic_shapes = ({1: torch.export.Dim("seq", min=1, max=max(LENGTHS))},)
    programs = {}
    for name, shapes in (("static", None), ("dynamic", dynamic_shapes)):
        exported = torch.export.export(model, example, dynamic_shapes=shapes)
        lowered = to_edge_transform_and_lower(exported, partitioner=[OneDnnPartitioner()])
        programs[name] = Runtime.get().load_program(lowered.to_executorch().buffer)
    load_ms, methods = {}, {}
    for name, program in programs.items():
        start = time.perf_counter()
        methods[name] = program.load_method("forward")
        load_ms[name] = (time.perf_counter() - start) * 1e3
    static, dynamic = methods["static"], methods["dynamic"]
    result: dict[str, Any] = {
        "threads": threads,
        "load_method_ms": load_ms,
        "static_ms_at_128": _median_ms(lambda: static.execute(list(example))),
        "dynamic": [],
    }
    for length in LENGTHS:
        inputs = [torch.randn(1, length, 384)]

        def call(inputs: list[torch.Tensor] = inputs) -> object:
            return dynamic.execute(inputs)

        first = _milliseconds(call)
        result["dynamic"].append({"length": length, "first_call_ms": first, "median_ms": _median_ms(call)})
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.threads), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
