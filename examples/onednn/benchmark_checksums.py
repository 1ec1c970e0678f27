# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""What weight checksums cost: load + init of one benchmark model's .pte with and without them.

    python -m examples.onednn.benchmark_checksums --models resnet50,bert_base --rounds 7

Each round loads both programs in alternation (the .pte bytes already in memory, so the figure is
ExecuTorch's load plus our init: payload parse, primitive creation, weight packing, and with checksums
one CRC-32 pass over every weight); medians are reported.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from .benchmark_models import BENCH_MODELS


def export(name: str, weight_checksums: bool) -> bytes:
    from executorch.backends.onednn import OneDnnPartitioner
    from executorch.exir import to_edge_transform_and_lower

    model, inputs = BENCH_MODELS[name].factory()
    edge = to_edge_transform_and_lower(
        torch.export.export(model, inputs), partitioner=[OneDnnPartitioner(weight_checksums=weight_checksums)]
    )
    return edge.to_executorch().buffer


def load_and_init_ms(pte: bytes) -> float:
    from executorch.runtime import Runtime

    started = time.perf_counter()
    program = Runtime.get().load_program(pte)  # a Method does not keep its Program alive
    program.load_method("forward")
    return (time.perf_counter() - started) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet50,bert_base", help=f"comma-separated: {', '.join(BENCH_MODELS)}")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=0, help="0: all cores")
    args = parser.parse_args()
    import executorch.backends.onednn as onednn

    if args.threads:
        onednn.set_num_threads(args.threads)
    print("| model | weights MB | load+init ms | with weight checksums ms | added ms | GB/s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in args.models.split(","):
        plain, checked = export(name, False), export(name, True)
        model, _ = BENCH_MODELS[name].factory()
        weight_mb = sum(t.numel() * t.element_size() for t in model.state_dict().values()) / 1e6
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.rounds):
            for checksums, pte in ((False, plain), (True, checked)):
                times[checksums].append(load_and_init_ms(pte))
        without, with_ = statistics.median(times[False]), statistics.median(times[True])
        added = with_ - without
        rate = f"{weight_mb / added:.1f}" if added > 0 else "-"
        print(f"| {BENCH_MODELS[name].label} | {weight_mb:.0f} | {without:.1f} | {with_:.1f} | {added:.1f} | {rate} |")


if __name__ == "__main__":
    main()
