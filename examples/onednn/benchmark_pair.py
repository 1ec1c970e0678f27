# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""A/B timing of two programs, or of one program under two backend option settings, run by turns.

    python -m examples.onednn.benchmark_pair before.pte after.pte --inputs inputs.pt
    python -m examples.onednn.benchmark_pair model.pte model.pte --a winograd=never --b winograd=default

Both are loaded in this process (the options of each side set while it loads: the backend reads them
then), warmed up, and then timed one run of A and one of B at a time, AB then BA, `--pairs` times. A run
of each side sits next to a run of the other, so a minute in which a shared VM gives the process less
of its cores or its memory bandwidth slows both: the ratio of each pair's times is free of that drift,
where medians over blocks of runs moved by ±30% between blocks on the 2-core dev VM (BENCHMARKS.md). Prints
both medians and the median of the pairs' A/B ratios with its 95% confidence interval (order statistics,
no assumption on the distribution): an interval that excludes 1 is a difference.

Runs of two runtimes (XNNPACK, ONNX Runtime) are not compared this way: each leaves its worker threads
spinning after a run, which slows whichever runs next (benchmark.py times them in blocks).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

# The backend options a side may set: each one's setter in executorch.backends.onednn (it takes one of
# the setter's words) and its default word, set again once the side has loaded.
OPTIONS: dict[str, tuple[str, str]] = {
    "winograd": ("set_winograd", "default"),
    "int4_products": ("set_int4_products", "fast"),
    "huge_pages": ("set_huge_pages", "large"),
}


def setter(name: str) -> Callable[[str], None]:
    import executorch.backends.onednn as onednn

    return getattr(onednn, OPTIONS[name][0])


def parse_options(text: str) -> dict[str, str]:
    """'winograd=never,int4_products=exact' -> {'winograd': 'never', 'int4_products': 'exact'}."""
    options: dict[str, str] = {}
    for item in filter(None, text.split(",")):
        name, sep, value = item.partition("=")
        if not sep or name not in OPTIONS:
            raise ValueError(f"expected name=value with a name of {tuple(OPTIONS)}, got {item!r}")
        options[name] = value
    return options


def median_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """The median and a 95% confidence interval for it: the order statistics n/2 -+ 1.96 sqrt(n)/2."""
    ordered = sorted(values)
    n = len(ordered)
    half_width = 1.96 * math.sqrt(n) / 2
    low = max(0, math.floor(n / 2 - half_width))
    high = min(n - 1, math.ceil(n / 2 + half_width))
    return statistics.median(ordered), ordered[low], ordered[high]


def load(path: Path, options: dict[str, str]) -> tuple[Any, Any]:
    """The program and its forward method, loaded under `options`; the defaults set again after."""
    from executorch.runtime import Runtime

    for name, value in options.items():
        setter(name)(value)
    try:
        program = Runtime.get().load_program(path)
        return program, program.load_method("forward")
    finally:
        for name in options:
            setter(name)(OPTIONS[name][1])


def compare(
    a: Path, b: Path, inputs: list[torch.Tensor], a_options: dict[str, str], b_options: dict[str, str], pairs: int
) -> dict[str, Any]:
    _a_program, method_a = load(a, a_options)
    _b_program, method_b = load(b, b_options)
    outputs_a, outputs_b = method_a.execute(inputs), method_b.execute(inputs)
    largest = max(float(o.abs().max()) for o in outputs_a) or 1.0
    difference = max(float((x - y).abs().max()) for x, y in zip(outputs_a, outputs_b, strict=True)) / largest
    for _ in range(5):
        method_a.execute(inputs)
        method_b.execute(inputs)
    times_a: list[float] = []
    times_b: list[float] = []
    for pair in range(pairs):
        order = ((method_a, times_a), (method_b, times_b))
        for method, times in order if pair % 2 == 0 else order[::-1]:
            start = time.perf_counter()
            method.execute(inputs)
            times.append((time.perf_counter() - start) * 1e3)
    ratio, low, high = median_interval([x / y for x, y in zip(times_a, times_b, strict=True)])
    return {
        "a_ms": statistics.median(times_a),
        "b_ms": statistics.median(times_b),
        "a_over_b": ratio,
        "interval": [low, high],
        "pairs": pairs,
        "output_difference": difference,  # the largest, relative to A's largest output
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", type=Path, help="program A (.pte)")
    parser.add_argument("b", type=Path, help="program B (.pte; may be A's file with other --b options)")
    parser.add_argument("--inputs", type=Path, help="torch.save'd inputs (default: inputs.pt beside A)")
    names = ",".join(OPTIONS)
    parser.add_argument("--a", dest="a_options", default="", help=f"A's backend options: name=value,... ({names})")
    parser.add_argument("--b", dest="b_options", default="", help="B's backend options")
    parser.add_argument("--pairs", type=int, default=300)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args(argv)
    try:
        a_options, b_options = parse_options(args.a_options), parse_options(args.b_options)
    except ValueError as error:
        parser.error(str(error))
    inputs_path = args.inputs or args.a.parent / "inputs.pt"
    if not inputs_path.exists():
        parser.error(f"no inputs: {inputs_path} does not exist (pass --inputs)")
    if args.pairs < 1:
        parser.error("--pairs must be at least 1")

    from executorch.backends.onednn import set_num_threads, torch_threads

    set_num_threads(args.threads)
    with torch_threads(1):
        result = compare(args.a, args.b, list(torch.load(inputs_path)), a_options, b_options, args.pairs)
    low, high = result["interval"]
    verdict = "no difference" if low <= 1.0 <= high else ("A slower" if low > 1.0 else "A faster")
    print(
        f"A {result['a_ms']:.3f} ms, B {result['b_ms']:.3f} ms (medians); A/B by pairs {result['a_over_b']:.3f} "
        f"(95% CI {low:.3f}-{high:.3f}, {args.pairs} pairs): {verdict}; outputs differ by "
        f"{result['output_difference']:.2e} of the largest"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
