# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Checks and times the delegate on a machine without Python packages for it (the AMX Xeon lent to some
sessions as `device`: Python 3.12 and numpy, no torch 2.13, no executorch, no package registry).

`pack` (here, in the project's environment) exports benchmark models with each flow, runs every program
here through `onednn_runner` for reference outputs, and writes one compressed bundle: the runner, the
runtime libraries (ours, optionally a baseline build and XNNPACK's), the C++ tests and the programs.
`run` (there, standard library and numpy only) unpacks it, runs the C++ tests, runs each program with
each build and thread count, checks its outputs against eager PyTorch and against this machine's, and
writes a table.

    python -m examples.onednn.device_check pack --out results/device --models mlp,resnet18 \\
        --baseline-library ~/.cache/executorch-onednn/venv-baseline-7fdc3cf/.../libexecutorch_backend_onednn.so
    python3 examples/onednn/device_check.py run --bundle results/device/bundle.tar.xz --out "$OUT"

The bundle must fit the device's 64 MiB per call, so `pack` gives every weight matrix random signs times
its standard deviation: speed does not depend on the values, the checks compare against eager PyTorch
run on the same weights, and such programs compress twenty- to fortyfold.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

DEFAULT_FLOWS = ("onednn", "onednn-bf16", "onednn-int8", "xnnpack", "xnnpack-int8")
# Largest relative error (max |difference| / max |reference|) against the same program run where it was
# packed: fp32 differs only in summation order; bf16 and int8 also in where roundings fall.
LOCAL_TOLERANCE = {"fp32": 1e-4, "bf16": 5e-2, "int8": 5e-2}
EAGER_TOLERANCE = {"fp32": 1e-3}  # the lower precisions are reported against eager, not judged
RUNTIME_LIBRARIES = (
    "libexecutorch.so", "libexecutorch_threadpool.so", "libexecutorch_kernels_optimized.so",
    "libexecutorch_backend_xnnpack.so",
)  # fmt: skip
XNNPACK_LIBRARY = "libexecutorch_backend_xnnpack.so"
TIMING = re.compile(r"median ([0-9.]+) ms, min ([0-9.]+) ms")


def precision_of(flow: str) -> str:
    return "bf16" if "bf16" in flow else "int8" if "int8" in flow else "fp32"


# --- pack (here) ---------------------------------------------------------------------------------------------
def _compressible_weights(model: Any) -> None:
    import torch

    signs = torch.tensor([-1.0, 1.0])
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() >= 2:
                picks = torch.randint(2, parameter.shape, generator=generator)
                parameter.copy_(signs[picks] * parameter.std())


def _runner_inputs(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    """The inputs onednn_runner makes from the declared shapes: a ramp for floats, zeros otherwise."""
    import torch

    def ramp(shape: torch.Size) -> torch.Tensor:
        return ((torch.arange(shape.numel()) % 17 - 8).float() / 8).reshape(shape)

    return tuple(ramp(x.shape) if x.is_floating_point() else torch.zeros_like(x) for x in inputs)


def _float_outputs(outputs: Any) -> Any:
    import numpy as np
    import torch

    tensors = [outputs] if isinstance(outputs, torch.Tensor) else list(outputs)
    return np.concatenate([t.detach().float().numpy().ravel() for t in tensors if t.is_floating_point()])


def _bundle_libraries(library: Path, runner: Path, baseline: Path | None, gtest: Path | None, stage: Path) -> None:
    import executorch

    executorch_lib = Path(executorch.__path__[0]) / "lib"
    for directory in ("lib", "baseline", "tests"):
        (stage / directory).mkdir(parents=True)
    for name in RUNTIME_LIBRARIES:
        shutil.copy(executorch_lib / name, stage / "lib" / name)
    subprocess.run(["strip", "-o", str(stage / "lib" / library.name), str(library)], check=True)
    subprocess.run(["strip", "-o", str(stage / "lib" / "onednn_runner"), str(runner)], check=True)
    if gtest is not None:
        subprocess.run(["strip", "-o", str(stage / "tests" / gtest.name), str(gtest)], check=True)
    if baseline is not None:
        subprocess.run(["strip", "-o", str(stage / "baseline" / baseline.name), str(baseline)], check=True)
        # Its own libraries (a oneDNN wheel's libdnnl, its threading runtime), not the system's or ExecuTorch's.
        listing = subprocess.run(["ldd", str(baseline)], check=True, capture_output=True, text=True).stdout
        for line in listing.splitlines():
            found = re.match(r"\s*(\S+) => (/\S+)", line)
            if found and found[1] not in RUNTIME_LIBRARIES and not found[2].startswith(("/lib", "/usr/lib")):
                subprocess.run(["strip", "-o", str(stage / "baseline" / found[1]), found[2]], check=True)


def _run_here(runner: Path, stage: Path, pte: Path, outputs: Path) -> None:
    env = dict(os.environ, LD_PRELOAD=str(stage / "lib" / XNNPACK_LIBRARY), LD_LIBRARY_PATH=str(stage / "lib"))
    command = [str(stage / "lib" / "onednn_runner"), str(pte), "--runs", "1", "--warmup", "0", "--threads", "2"]
    result = subprocess.run([*command, "--save-outputs", str(outputs)], env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{pte.name} does not run here: {result.stderr.strip()}")


def _model(name: str) -> tuple[Any, tuple[Any, ...]]:
    """A benchmark model, or `llama_decode`: one decode step of examples/onednn/llama_decode.py's decoder
    (one token, its full cache), as `forward`."""
    if name == "llama_decode":
        from examples.onednn.llama_decode import DecoderConfig, build_decoder, example_inputs

        config = DecoderConfig()
        return build_decoder(config), example_inputs(config, 1)
    from examples.onednn.benchmark_models import BENCH_MODELS

    return BENCH_MODELS[name].factory()


def pack(args: argparse.Namespace) -> None:
    import torch

    from examples.onednn.benchmark_flows import FLOWS

    package = Path(__import__("executorch.backends.onednn", fromlist=["_"]).__file__).parent
    library = Path(args.library or package / "libexecutorch_backend_onednn.so")
    runner = Path(args.runner or package / "bin" / "onednn_runner")
    out = Path(args.out)
    stage = out / "bundle"
    shutil.rmtree(stage, ignore_errors=True)
    _bundle_libraries(library, runner, args.baseline_library, args.gtest, stage)
    (stage / "programs").mkdir()
    manifest: dict[str, Any] = {"packed_on": _cpu_name(), "programs": []}
    for model_name in args.models.split(","):
        torch.manual_seed(0)
        model, example = _model(model_name)
        model.eval()
        _compressible_weights(model)
        inputs = _runner_inputs(example)
        with torch.no_grad():
            _float_outputs(model(*inputs)).tofile(stage / "programs" / f"{model_name}.eager.f32")
        for flow_name in args.flows.split(","):
            flow = FLOWS[flow_name]
            if flow.models is not None and model_name not in flow.models:
                continue
            stem = f"{model_name}.{flow_name}"
            print(f"exporting {stem}", flush=True)
            flow.export(model, inputs, stage / "programs" / f"{stem}.pte")
            _run_here(runner, stage, stage / "programs" / f"{stem}.pte", stage / "programs" / f"{stem}.local.f32")
            manifest["programs"].append({"model": model_name, "flow": flow_name, "stem": stem})
    (stage / "manifest.json").write_text(json.dumps(manifest, indent=1))
    bundle = out / "bundle.tar.xz"
    # One LZMA stream with a dictionary larger than any program, so repeated weights cost nothing twice.
    filters = [{"id": lzma.FILTER_LZMA2, "preset": 6, "dict_size": 256 << 20}]
    with lzma.open(bundle, "wb", format=lzma.FORMAT_XZ, filters=filters) as stream:
        with tarfile.open(fileobj=stream, mode="w") as archive:
            archive.add(stage, arcname="bundle")
    shutil.rmtree(stage)
    print(f"{bundle}: {bundle.stat().st_size / 2**20:.1f} MiB")


# --- run (there: standard library and numpy only) ------------------------------------------------------------
def _cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def _relative_error(values: Any, reference: Any) -> float:
    import numpy as np

    if values.shape != reference.shape:
        return float("inf")
    scale = float(np.max(np.abs(reference))) or 1.0
    return float(np.max(np.abs(values.astype(np.float64) - reference))) / scale


def _run_program(bundle: Path, build: str, pte: Path, threads: int, runs: int, outputs: Path) -> dict[str, Any]:
    library_path = [str(bundle / "baseline")] if build == "baseline" else []
    env = dict(os.environ, LD_LIBRARY_PATH=":".join([*library_path, str(bundle / "lib")]))
    env["LD_PRELOAD"] = str(bundle / "lib" / XNNPACK_LIBRARY)
    command = [str(bundle / "lib" / "onednn_runner"), str(pte), "--runs", str(runs), "--warmup", "3"]
    command += ["--threads", str(threads), "--save-outputs", str(outputs)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    timing = TIMING.search(result.stdout)
    if result.returncode != 0 or timing is None:
        return {"error": (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]}
    library = re.search(r"^oneDNN (.*)$", result.stdout, re.MULTILINE)
    return {"median_ms": float(timing[1]), "min_ms": float(timing[2]), "library": library[1] if library else "?"}


def _check(bundle: Path, entry: dict[str, Any], outputs: Path) -> dict[str, Any]:
    import numpy as np

    values = np.fromfile(outputs, dtype=np.float32)
    programs = bundle / "programs"
    precision = precision_of(entry["flow"])
    local = _relative_error(values, np.fromfile(programs / f"{entry['stem']}.local.f32", dtype=np.float32))
    eager = _relative_error(values, np.fromfile(programs / f"{entry['model']}.eager.f32", dtype=np.float32))
    ok = local <= LOCAL_TOLERANCE[precision] and eager <= EAGER_TOLERANCE.get(precision, float("inf"))
    return {"error_vs_local": local, "error_vs_eager": eager, "outputs_ok": ok}


def _replace_from(override: str, folder: Path) -> Path:
    """Copies a file newer than the bundle's (xz-compressed or not) into `folder`, under its plain name."""
    target = folder / Path(override).name.removesuffix(".xz")
    opener = lzma.open if override.endswith(".xz") else open
    with opener(override, "rb") as source, open(target, "wb") as copy:
        shutil.copyfileobj(source, copy)
    target.chmod(0o755)
    return target


def _run_tests(bundle: Path, tests_override: str | None, out: Path) -> dict[str, Any]:
    tests = sorted((bundle / "tests").iterdir())
    if tests_override:
        tests = [_replace_from(tests_override, bundle / "tests")]
    if not tests:
        return {"tests": "none bundled"}
    env = dict(os.environ, LD_LIBRARY_PATH=str(bundle / "lib"))
    result = subprocess.run([str(tests[0]), "--gtest_brief=1"], env=env, capture_output=True, text=True, timeout=300)
    (out / "tests.log").write_text(result.stdout + result.stderr)
    failed = [line for line in result.stdout.splitlines() if line.startswith("[  FAILED  ]")]
    summary = [line for line in result.stdout.splitlines() if line.startswith(("[==========]", "[  PASSED  ]"))]
    return {"tests_exit_code": result.returncode, "tests_summary": summary, "tests_failed": failed}


def run(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    with tarfile.open(args.bundle, "r:xz") as archive:
        archive.extractall(work, filter="tar")
    bundle = work / "bundle"
    if args.library:
        _replace_from(args.library, bundle / "lib")
    manifest = json.loads((bundle / "manifest.json").read_text())
    flags = set(Path("/proc/cpuinfo").read_text().split())
    report: dict[str, Any] = {
        "cpu": _cpu_name(), "cores": os.cpu_count(), "packed_on": manifest["packed_on"],
        "isa_flags": sorted(flags & {"avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_int8"}),
        **_run_tests(bundle, args.tests, out), "results": [],
    }  # fmt: skip
    print(json.dumps({k: v for k, v in report.items() if k != "results"}, indent=1), flush=True)
    has_baseline = any((bundle / "baseline").iterdir())
    deadline = time.monotonic() + args.budget
    thread_counts = [int(t) if t != "all" else os.cpu_count() or 1 for t in args.threads.split(",")]
    for threads in thread_counts:
        for round_index in range(args.rounds):
            for entry in manifest["programs"]:
                builds = ["ours", "baseline"] if has_baseline and entry["flow"].startswith("onednn") else ["ours"]
                for build in builds if round_index % 2 == 0 else builds[::-1]:
                    if time.monotonic() > deadline:
                        report["stopped"] = "time budget spent"
                        break
                    outputs = work / "outputs.f32"
                    result = _run_program(bundle, build, bundle / "programs" / f"{entry['stem']}.pte", threads,
                                          args.runs, outputs)  # fmt: skip
                    if "error" not in result:
                        result.update(_check(bundle, entry, outputs))
                    row = {**entry, "build": build, "threads": threads, "round": round_index, **result}
                    report["results"].append(row)
                    print(json.dumps(row), flush=True)
    (out / "device_check.json").write_text(json.dumps(report, indent=1))
    (out / "device_check.md").write_text(_table(report))
    print(_table(report))


def _table(report: dict[str, Any]) -> str:
    """Per program, build and thread count: the fastest median over rounds, and whether every round's
    outputs passed."""
    groups: dict[tuple[str, str, str, int], list[dict[str, Any]]] = {}
    for row in report["results"]:
        groups.setdefault((row["model"], row["flow"], row["build"], row["threads"]), []).append(row)
    lines = [
        f"{report['cpu']} ({report['cores']} cores; {', '.join(report['isa_flags'])}); packed on {report['packed_on']}",
        "", "| model | flow | build | threads | median ms | error vs here | error vs eager | outputs |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]  # fmt: skip
    for (model, flow, build, threads), rows in sorted(groups.items()):
        failed = [row for row in rows if "error" in row]
        if failed:
            lines.append(f"| {model} | {flow} | {build} | {threads} | failed: {failed[0]['error']} | | | |")
            continue
        fastest = min(rows, key=lambda row: row["median_ms"])
        worst_local = max(row["error_vs_local"] for row in rows)
        worst_eager = max(row["error_vs_eager"] for row in rows)
        verdict = "ok" if all(row["outputs_ok"] for row in rows) else "MISMATCH"
        # Only our flows load the build's library; XNNPACK's programs name none.
        library = f"{build} ({fastest['library']})" if flow.startswith("onednn") else "-"
        lines.append(
            f"| {model} | {flow} | {library} | {threads} | {fastest['median_ms']:.3f} "
            f"| {worst_local:.1e} | {worst_eager:.1e} | {verdict} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    packing = commands.add_parser("pack", help="export, run here and bundle (needs the project's environment)")
    packing.add_argument("--out", required=True)
    packing.add_argument("--models", default="mlp,resnet18,mobilenet_v2,vit_tiny", help="also: llama_decode")
    packing.add_argument("--flows", default=",".join(DEFAULT_FLOWS))
    packing.add_argument("--library", help="our runtime library (default: the installed package's)")
    packing.add_argument("--runner", help="onednn_runner (default: the installed package's)")
    packing.add_argument("--baseline-library", type=Path, help="a second build of our library to time against")
    packing.add_argument("--gtest", type=Path, help="the C++ test executable (onednn_backend_test) to run there")
    running = commands.add_parser("run", help="unpack, test, check and time (standard library and numpy only)")
    running.add_argument("--bundle", required=True)
    running.add_argument("--out", required=True)
    running.add_argument("--work", default="/tmp/device_check")
    running.add_argument("--tests", help="a C++ test executable (or its .xz) to run instead of the bundled one")
    running.add_argument("--library", help="our runtime library (or its .xz) to time instead of the bundled one")
    running.add_argument("--threads", default="2,all")
    running.add_argument("--rounds", type=int, default=2)
    running.add_argument("--runs", type=int, default=20)
    running.add_argument("--budget", type=float, default=400.0, help="seconds of timing before it stops")
    args = parser.parse_args()
    pack(args) if args.command == "pack" else run(args)


if __name__ == "__main__":
    sys.exit(main())
