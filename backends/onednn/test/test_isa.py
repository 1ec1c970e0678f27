# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Older instruction sets: capped with set_max_isa() (or ONEDNN_MAX_CPU_ISA), every model still runs
and matches fp32 eager, bf16 included: without bf16 instructions the runtime keeps the bf16 values
between steps in f32, converting only the delegate's bf16 inputs and outputs. Each scenario runs in a
fresh process: oneDNN takes the cap only before its first kernel."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]

# Runs in the child: exports and runs the models under the cap, prints one line per check.
CHILD = textwrap.dedent(
    """
    import sys, torch
    import cia_materialization  # the tests' export speed-up (conftest's)
    cia_materialization.install()
    import executorch.backends.onednn as onednn
    if sys.argv[1] != "env":
        onednn.set_max_isa(sys.argv[1])
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime
    from executorch.backends.onednn.cli.zoo import MODELS

    def run(model, inputs, partitioner):
        edge = to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=[partitioner])
        program = Runtime.get().load_program(edge.to_executorch().buffer)
        return program.load_method("forward").execute(list(inputs))[0]

    for name in ("resnet_small", "transformer_encoder"):
        model, inputs = MODELS[name]()
        reference = model(*inputs)
        scale = max(1.0, reference.abs().max().item())
        for precision in ("fp32", "bf16"):
            out = run(model, inputs, onednn.OneDnnPartitioner(precision=precision))
            print("ERROR", name, precision, (out - reference).abs().max().item() / scale)
        native = run(model.to(torch.bfloat16), tuple(x.to(torch.bfloat16) for x in inputs), onednn.OneDnnPartitioner())
        print("ERROR", name, "native-bf16", (native.float() - reference).abs().max().item() / scale)
    print("ISA", onednn.effective_isa())
    """
)
TOLERANCE = {"fp32": 1e-4, "bf16": 2e-2, "native-bf16": 2e-2}


def child_env(extra_env: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, **(extra_env or {})}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def run_capped(isa: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CHILD, isa], env=child_env(extra_env), capture_output=True, text=True, timeout=600,
        check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("cap", "extra_env", "expected_isa"),
    [("avx2", None, "avx2"), ("env", {"ONEDNN_MAX_CPU_ISA": "AVX2"}, "avx2"), ("sse41", None, "sse41")],
    ids=["set_max_isa-avx2", "ONEDNN_MAX_CPU_ISA-avx2", "set_max_isa-sse41"],
)
def test_capped_instruction_set_runs_every_precision_within_tolerance(
    cap: str, extra_env: dict[str, str] | None, expected_isa: str
) -> None:
    child = run_capped(cap, extra_env)
    assert child.returncode == 0, f"child failed ({child.returncode}):\n{child.stderr[-3000:]}"
    lines = [line.split() for line in child.stdout.splitlines()]
    assert ["ISA", expected_isa] in lines, child.stdout
    errors = [(name, precision, float(error)) for tag, name, precision, error in (x for x in lines if x[0] == "ERROR")]
    assert len(errors) == 6, child.stdout
    for name, precision, error in errors:
        assert error <= TOLERANCE[precision], f"{name} {precision} under {expected_isa}: error {error:.3g}"


def test_cap_is_refused_once_onednn_has_started() -> None:
    script = textwrap.dedent(
        """
        import executorch.backends.onednn as onednn
        onednn.effective_isa()  # fixes oneDNN's instruction set, as loading a program does
        try:
            onednn.set_max_isa("avx2")
        except ValueError as error:
            print("REFUSED", error)
        try:
            onednn.set_max_isa("avx9000")
        except ValueError as error:
            print("UNKNOWN", error)
        """
    )
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert child.returncode == 0, child.stderr[-3000:]
    assert "REFUSED" in child.stdout and "UNKNOWN" in child.stdout, child.stdout


# Runs in the child under the AVX2 cap: one execute() of a bf16 program with oneDNN's verbose log on.
TRACE_CHILD = textwrap.dedent(
    """
    import sys, torch
    import cia_materialization  # the tests' export speed-up (conftest's)
    cia_materialization.install()
    import executorch.backends.onednn as onednn
    onednn.set_max_isa("avx2")
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime
    from executorch.backends.onednn.cli.zoo import MODELS

    name, kind = sys.argv[1], sys.argv[2]
    model, inputs = MODELS[name]()
    partitioner = onednn.OneDnnPartitioner(precision="bf16")
    if kind == "bf16-model":
        model = model.to(torch.bfloat16)
        inputs = tuple(x.to(torch.bfloat16) if x.is_floating_point() else x for x in inputs)
        partitioner = onednn.OneDnnPartitioner()
    edge = to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=[partitioner])
    program = Runtime.get().load_program(edge.to_executorch().buffer)  # a Method does not keep its Program alive
    method = program.load_method("forward")
    method.execute(list(inputs))
    print("BF16_INSTRUCTIONS", onednn.has_bf16_instructions(), flush=True)
    onednn.set_verbose(1)
    method.execute(list(inputs))
    onednn.set_verbose(0)
    """
)


def executed_primitives(verbose: str) -> list[tuple[str, list[str]]]:
    """(primitive kind, data type of each memory argument) per `onednn_verbose,v1,primitive,exec` line."""
    executed = []
    for line in verbose.splitlines():
        fields = line.split(",")
        if len(fields) >= 13 and fields[0] == "onednn_verbose" and fields[2:4] == ["primitive", "exec"]:
            executed.append((fields[5], [md.split(":")[1] for md in fields[8].split() if md.count(":") >= 4]))
    return executed


@pytest.mark.parametrize("name", ["resnet_small", "transformer_encoder"])
@pytest.mark.parametrize("kind", ["precision-bf16", "bf16-model"])
def test_without_bf16_instructions_bf16_programs_compute_between_steps_in_f32(name: str, kind: str) -> None:
    """Without bf16 instructions oneDNN's bf16 kernels are missing or emulated, and converting around
    each step cost 7-66x the f32 time (2026-12-02, AVX2). So a precision="bf16" program runs no bf16
    primitive at all, and a bf16 model converts only its inputs and outputs, on the host (oneDNN
    3.13.1's AVX2 conversions turn -0 into +0, and run a reference kernel where the layout changes
    too): no primitive touches bf16 either, every step is f32."""
    child = subprocess.run(
        [sys.executable, "-c", TRACE_CHILD, name, kind],
        env=child_env(), cwd=Path(__file__).parent, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert child.returncode == 0, f"child failed ({child.returncode}):\n{child.stderr[-3000:]}"
    assert "BF16_INSTRUCTIONS False" in child.stdout, child.stdout[-2000:]
    executed = executed_primitives(child.stdout)
    primitives = {primitive for primitive, _ in executed}
    assert "matmul" in primitives or "convolution" in primitives, f"no matmul or convolution traced: {primitives}"
    touching_bf16 = [(primitive, types) for primitive, types in executed if "bf16" in types]
    assert touching_bf16 == [], touching_bf16
