# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Damaged programs: flip, overwrite, zero, truncate and duplicate bytes of the delegate payload and of
the weights inside exported .pte files, load and run every mutant in a worker process, count outcomes.

    python backends/onednn/test/mutation_campaign.py --mutants 10000 --workers 2 --out results.json

Each program is exported twice, with and without `weight_checksums`. Mutants are drawn from `--seed`,
so a run is reproducible, and `--replay PROGRAM:CHECKSUMS:INDEX --out mutant.pte` writes one mutant. A worker that
dies is a crash (its mutant is recorded and a new worker takes over); one that takes longer than
`--timeout` is a hang. The expectations (`violations`): no crash or hang; no payload mutant runs; no
weight mutant runs when the program carries weight checksums.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import selectors
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

REFUSED_AT_LOAD = "refused at load"
REFUSED_AT_INIT = "refused at init"
REFUSED_AT_RUN = "refused at run"
RAN_SAME = "ran, same output"
RAN_DIFFERENT = "ran, different output"
CRASH = "crash"
HANG = "hang"
OUTCOMES = (REFUSED_AT_LOAD, REFUSED_AT_INIT, REFUSED_AT_RUN, RAN_SAME, RAN_DIFFERENT, CRASH, HANG)
REGIONS = ("payload", "weights")
MUTATIONS = ("flip bit", "set byte", "zero run", "truncate", "duplicate run")


def _programs() -> dict[str, Callable[[], tuple[object, tuple[object, ...], dict | None]]]:
    """Small programs covering convolutions, matmuls, attention and a dynamic size (model, inputs,
    dynamic_shapes)."""
    import torch
    from torch import nn

    def cnn() -> tuple[nn.Module, tuple[torch.Tensor, ...], None]:
        model = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 8, 3, groups=2), nn.Flatten(), nn.Linear(8 * 14 * 14, 10),
        )  # fmt: skip
        return model, (torch.randn(1, 3, 32, 32),), None

    def mlp() -> tuple[nn.Module, tuple[torch.Tensor, ...], None]:
        return nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 16)), (torch.randn(4, 32),), None

    def attention() -> tuple[nn.Module, tuple[torch.Tensor, ...], None]:
        layer = nn.TransformerEncoderLayer(32, 2, dim_feedforward=64, dropout=0.0, batch_first=True)
        return layer, (torch.randn(1, 12, 32),), None

    def dynamic() -> tuple[nn.Module, tuple[torch.Tensor, ...], dict]:
        model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.LayerNorm(32), nn.Linear(32, 8))
        rows = torch.export.Dim("rows", min=1, max=64)
        return model, (torch.randn(5, 16),), {"input": {0: rows}}

    return {"cnn": cnn, "mlp": mlp, "attention": attention, "dynamic": dynamic}


def export(name: str, weight_checksums: bool, folder: Path) -> Path:
    """Writes `<name>-<checksums>.pte` and its inputs; returns the .pte path."""
    import torch
    from executorch.backends.onednn import OneDnnPartitioner
    from executorch.exir import to_edge_transform_and_lower

    torch.manual_seed(0)
    model, inputs, dynamic_shapes = _programs()[name]()
    exported = torch.export.export(model.eval(), inputs, dynamic_shapes=dynamic_shapes)  # type: ignore[union-attr]
    edge = to_edge_transform_and_lower(exported, partitioner=[OneDnnPartitioner(weight_checksums=weight_checksums)])
    path = folder / f"{name}-{int(weight_checksums)}.pte"
    path.write_bytes(edge.to_executorch().buffer)
    torch.save(inputs, path.with_suffix(".inputs"))
    return path


def regions(pte: bytes) -> dict[str, list[tuple[int, int]]]:
    """Byte ranges [start, end) of the oneDNN payloads and of their weights (named data) in a .pte."""
    from executorch.exir._serialize._program import _flatbuffer_to_program, _get_extended_header

    header = _get_extended_header(pte)
    if header is None or not header.is_valid():
        raise ValueError("the program has no segments: export it with the default (extracted) segments")
    program = _flatbuffer_to_program(pte[: header.program_size])
    base = header.segment_base_offset

    def span(index: int) -> tuple[int, int]:
        segment = program.segments[index]
        return base + segment.offset, base + segment.offset + segment.size

    payloads = [
        span(delegate.processed.index)
        for plan in program.execution_plan
        for delegate in plan.delegates
        if delegate.id == "OneDnnBackend"
    ]
    weights = [span(entry.segment_index) for entry in program.named_data or [] if entry.key.startswith("onednn_")]
    return {"payload": payloads, "weights": [w for w in weights if w[1] > w[0]]}


@dataclass(frozen=True)
class Mutation:
    region: str
    kind: str
    offset: int
    length: int  # bytes zeroed or duplicated
    value: int  # the bit flipped or the byte written

    def apply(self, pte: bytes) -> bytes:
        data = bytearray(pte)
        if self.kind == "flip bit":
            data[self.offset] ^= 1 << self.value
        elif self.kind == "set byte":
            data[self.offset] = self.value
        elif self.kind == "zero run":
            data[self.offset : self.offset + self.length] = bytes(self.length)
        elif self.kind == "truncate":
            del data[self.offset :]
        else:
            chunk = data[self.offset : self.offset + self.length]
            data[self.offset + self.length : self.offset + self.length] = chunk
        return bytes(data)


def draw(pte: bytes, spans: dict[str, list[tuple[int, int]]], rng: random.Random) -> Mutation:
    """A mutation that changes some byte the runtime reads (zeroing zeros, say, damages nothing). Its
    region is what it changed: a run duplicated at a payload's end shifts only the weights after it."""
    while True:
        start, end = rng.choice(spans[rng.choice([name for name in REGIONS if spans[name]])])
        offset = rng.randrange(start, end)
        kind = rng.choice(MUTATIONS)
        length = rng.randint(1, min(64, end - offset))
        value = rng.randrange(8) if kind == "flip bit" else rng.randrange(256)
        mutant = Mutation("", kind, offset, length, value).apply(pte)
        changed = [name for name in REGIONS if any(mutant[a:b] != pte[a:b] for a, b in spans[name])]
        if changed:
            return Mutation(changed[0], kind, offset, length, value)


def mutant_rng(seed: int, program: str, checksums: bool, index: int) -> random.Random:
    return random.Random(f"{seed}:{program}:{int(checksums)}:{index}")


# ---------------------------------------------------------------------------------------------- worker
def _worker(folder: Path, seed: int) -> None:
    """Reads `program checksums index` lines, answers one JSON line each. Runs until stdin closes."""
    import executorch.backends.onednn  # noqa: F401  (registers the backend)
    import torch
    from executorch.runtime import Runtime

    runtime = Runtime.get()
    cache: dict[tuple[str, bool], tuple[bytes, dict, list, list]] = {}
    for line in sys.stdin:
        program, checksums_text, index_text = line.split()
        checksums = checksums_text == "1"
        if (program, checksums) not in cache:
            path = folder / f"{program}-{int(checksums)}.pte"
            pte = path.read_bytes()
            inputs = list(torch.load(path.with_suffix(".inputs")))
            loaded = runtime.load_program(pte)  # a Method does not keep its Program alive
            reference = loaded.load_method("forward").execute(inputs)
            cache[program, checksums] = (pte, regions(pte), inputs, [t.clone() for t in reference])
        pte, spans, inputs, reference = cache[program, checksums]
        mutation = draw(pte, spans, mutant_rng(seed, program, checksums, int(index_text)))
        outcome = _run(runtime, mutation.apply(pte), inputs, reference)
        print(json.dumps({"outcome": outcome, **asdict(mutation)}), flush=True)


def outcome_of(pte: bytes, inputs: list, reference: list) -> str:
    """The outcome of loading and running `pte` once, in this process."""
    import executorch.backends.onednn  # noqa: F401  (registers the backend)
    from executorch.runtime import Runtime

    return _run(Runtime.get(), pte, inputs, reference)


def _run(runtime: object, pte: bytes, inputs: list, reference: list) -> str:
    import torch

    try:
        program = runtime.load_program(pte)  # type: ignore[attr-defined]
    except Exception:
        return REFUSED_AT_LOAD
    try:
        method = program.load_method("forward")
    except Exception:
        return REFUSED_AT_INIT
    try:
        outputs = method.execute(inputs)
    except Exception:
        return REFUSED_AT_RUN
    same = len(outputs) == len(reference) and all(
        isinstance(o, torch.Tensor) and o.shape == r.shape and torch.equal(o, r) for o, r in zip(outputs, reference)
    )
    return RAN_SAME if same else RAN_DIFFERENT


# ---------------------------------------------------------------------------------------------- parent
class Worker:
    def __init__(self, folder: Path, seed: int, log: Path) -> None:
        self.folder, self.seed, self.log = folder, seed, log
        self.process: subprocess.Popen[str] | None = None

    def ask(self, task: str, timeout: float) -> dict | str:
        """The worker's answer, or CRASH when it died, or HANG when it did not answer in time."""
        if self.process is None or self.process.poll() is not None:
            self._start()
        assert self.process is not None and self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(task + "\n")
        self.process.stdin.flush()
        selector = selectors.DefaultSelector()
        selector.register(self.process.stdout, selectors.EVENT_READ)
        ready = selector.select(timeout)
        selector.close()
        line = self.process.stdout.readline() if ready else ""
        if line:
            return json.loads(line)
        self.stop()
        return CRASH if ready else HANG

    def _start(self) -> None:
        with self.log.open("a") as log:
            self.process = subprocess.Popen(
                [sys.executable, __file__, "--worker", str(self.folder), "--seed", str(self.seed)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1,
            )  # fmt: skip

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


def campaign(
    programs: list[str], mutants: int, seed: int, workers: int, timeout: float, folder: Path
) -> dict[str, object]:
    import threading

    for name in programs:
        for checksums in (False, True):
            export(name, checksums, folder)
    tasks = [(programs[i % len(programs)], (i // len(programs)) % 2 == 1, i) for i in range(mutants)]
    counts: Counter[tuple[str, str, bool, str]] = Counter()
    failures: list[dict[str, object]] = []
    lock = threading.Lock()
    started = time.monotonic()

    def serve(worker_index: int) -> None:
        worker = Worker(folder, seed, folder / f"worker-{worker_index}.log")
        try:
            while True:
                with lock:
                    if not tasks:
                        return
                    program, checksums, index = tasks.pop()
                answer = worker.ask(f"{program} {int(checksums)} {index}", timeout)
                if isinstance(answer, str):  # the worker cannot say what killed it: draw the mutant here
                    pte = (folder / f"{program}-{int(checksums)}.pte").read_bytes()
                    mutation = draw(pte, regions(pte), mutant_rng(seed, program, checksums, index))
                    answer = {"outcome": answer, **asdict(mutation)}
                with lock:
                    counts[program, str(answer["region"]), checksums, str(answer["outcome"])] += 1
                    if answer["outcome"] in (CRASH, HANG):
                        failures.append({"program": program, "checksums": checksums, "index": index, **answer})
        finally:
            worker.stop()

    threads = [threading.Thread(target=serve, args=(k,)) for k in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rows = [
        {"program": p, "region": r, "weight_checksums": c, "outcome": o, "mutants": n}
        for (p, r, c, o), n in sorted(counts.items())
    ]
    return {
        "mutants": mutants, "seed": seed, "workers": workers, "seconds": round(time.monotonic() - started, 1),
        "rows": rows, "failures": failures, "violations": violations(rows),
    }  # fmt: skip


def violations(rows: list[dict]) -> list[str]:
    found = []
    for row in rows:
        ran = row["outcome"] in (RAN_SAME, RAN_DIFFERENT)
        if row["outcome"] in (CRASH, HANG):
            found.append(f"{row['mutants']} {row['outcome']}(es) in {row['program']} {row['region']}")
        elif ran and (row["region"] == "payload" or row["weight_checksums"]):
            checksums = "with" if row["weight_checksums"] else "without"
            found.append(
                f"{row['mutants']} {row['region']} mutant(s) of {row['program']} ({checksums} weight checksums) ran"
            )
    return found


def table(result: dict) -> str:
    """Markdown: outcomes per region and weight-checksum setting, summed over the programs."""
    totals: Counter[tuple[str, bool, str]] = Counter()
    for row in result["rows"]:
        totals[row["region"], row["weight_checksums"], row["outcome"]] += row["mutants"]
    lines = [
        "| region | weight checksums | mutants | " + " | ".join(OUTCOMES) + " |",
        "|---|---|---:|" + "---:|" * len(OUTCOMES),
    ]
    for region in REGIONS:
        for checksums in (False, True):
            cells = [totals[region, checksums, outcome] for outcome in OUTCOMES]
            setting = "on" if checksums else "off"
            lines.append(f"| {region} | {setting} | {sum(cells)} | " + " | ".join(map(str, cells)) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutants", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds a mutant may take (else: hang)")
    parser.add_argument("--programs", default=",".join(_programs()), help="comma-separated")
    parser.add_argument("--out", type=Path, help="write the results as JSON here (with --replay: the mutant)")
    parser.add_argument("--replay", metavar="PROGRAM:CHECKSUMS:INDEX", help="write that mutant to --out")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        _worker(args.worker, args.seed)
        return 0
    if args.replay is not None:
        program, checksums, index = args.replay.split(":")
        with tempfile.TemporaryDirectory() as folder:
            pte = export(program, checksums == "1", Path(folder)).read_bytes()
        mutation = draw(pte, regions(pte), mutant_rng(args.seed, program, checksums == "1", int(index)))
        args.out.write_bytes(mutation.apply(pte))
        print(mutation)
        return 0
    with tempfile.TemporaryDirectory() as folder:
        result = campaign(args.programs.split(","), args.mutants, args.seed, args.workers, args.timeout, Path(folder))
    print(table(result))
    print(f"{result['mutants']} mutants in {result['seconds']} s with {result['workers']} workers")
    for failure in result["failures"]:
        print("FAILURE", json.dumps(failure))
    for violation in result["violations"]:
        print("VIOLATION", violation)
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 1 if result["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
