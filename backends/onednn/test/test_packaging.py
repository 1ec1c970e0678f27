# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The runtime library as installed: oneDNN inside it and invisible from outside (no `dnnl_` symbol
exported, no shared oneDNN or threading runtime it depends on), torch's own oneDNN and ours in one
process, and the wheel installed by one `pip install` into a fresh environment running the main job."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from executorch.backends.onednn import library_path, onednn_version

REPO_ROOT = Path(__file__).resolve().parents[3]
# What the library may load besides ExecuTorch's own libraries: the C and C++ runtimes.
SYSTEM_LIBRARIES = {
    "linux-vdso.so.1", "libstdc++.so.6", "libm.so.6", "libgcc_s.so.1", "libc.so.6", "libpthread.so.0",
    "libdl.so.2", "librt.so.1", "ld-linux-x86-64.so.2",
}  # fmt: skip
# The runtime and its threadpool (ExecuTorch's get_thread_count() sizes our default pool), from the wheel.
EXECUTORCH_LIBRARIES = {"libexecutorch.so", "libexecutorch_threadpool.so"}


def test_the_library_exports_no_onednn_symbol() -> None:
    symbols = subprocess.run(
        ["nm", "-D", "--defined-only", str(library_path())], capture_output=True, text=True, check=True
    ).stdout
    names = [line.split()[-1] for line in symbols.splitlines() if line.strip()]
    assert names, "nm listed no exported symbol at all: is this the runtime library?"
    leaked = [name for name in names if name.startswith("dnnl") or "dnnl" in name.lower()]
    assert not leaked, f"oneDNN symbols exported by {library_path()}: {leaked[:10]}"
    assert "onednn_backend_onednn_version" in names


def test_the_library_depends_only_on_executorch_and_the_c_and_cpp_runtimes() -> None:
    listing = subprocess.run(["ldd", str(library_path())], capture_output=True, text=True, check=True).stdout
    libraries = {re.split(r"\s", line.strip())[0].rsplit("/", 1)[-1] for line in listing.splitlines() if line.strip()}
    unexpected = sorted(libraries - SYSTEM_LIBRARIES - EXECUTORCH_LIBRARIES)
    assert not unexpected, f"{library_path()} loads {unexpected}, which another package could shadow:\n{listing}"


def test_the_runtime_reports_the_onednn_it_was_built_with() -> None:
    version = onednn_version()
    assert re.fullmatch(r"3\.13\.1 \(([0-9a-f]{10}, )?threadpool\)", version), version


# torch's conv2d on a CPU tensor runs on torch's own oneDNN (mkldnn); ours runs inside the delegate. Each
# is checked against a float64 reference computed without either, before and after the other ran.
COEXISTENCE = r"""
import torch
from torch import nn
import executorch.backends.onednn
from executorch.backends.onednn import OneDnnPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime

torch.manual_seed(0)
x = torch.randn(1, 8, 20, 20)
conv = nn.Conv2d(8, 16, 3, padding=1).eval()

def reference(x):  # float64, through unfold and a matmul: neither oneDNN
    cols = torch.nn.functional.unfold(x.double(), 3, padding=1)
    out = conv.weight.double().reshape(16, -1) @ cols + conv.bias.double()[:, None]
    return out.reshape(1, 16, 20, 20)

def error(got):
    expected = reference(x)
    return ((got.double() - expected).abs().max() / expected.abs().max()).item()

assert torch.backends.mkldnn.is_available()
errors = [error(torch.nn.functional.conv2d(x, conv.weight, conv.bias, padding=1))]
lowered = to_edge_transform_and_lower(torch.export.export(conv, (x,)), partitioner=[OneDnnPartitioner()])
buffer = lowered.to_executorch().buffer
program = Runtime.get().load_program(buffer)  # a Method does not keep its Program alive
method = program.load_method("forward")
for _ in range(3):
    errors.append(error(method.execute([x])[0]))
    errors.append(error(torch.nn.functional.conv2d(x, conv.weight, conv.bias, padding=1)))
print(" ".join(f"{e:.2e}" for e in errors))
"""


def test_torch_onednn_and_ours_in_one_process_both_compute_correctly() -> None:
    result = subprocess.run(
        [sys.executable, "-c", COEXISTENCE], capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    errors = [float(e) for e in result.stdout.split()[-7:]]
    assert len(errors) == 7 and max(errors) < 1e-5, f"torch, then (ours, torch) x 3: relative errors {errors}"


def _wheel() -> Path:
    """dist/'s wheel (scripts/bootstrap.sh builds it); built here when missing (an incremental build)."""
    wheels = sorted((REPO_ROOT / "dist").glob("executorch_onednn-*.whl"), key=os.path.getmtime)
    if wheels:
        return wheels[-1]
    subprocess.run([str(REPO_ROOT / "scripts" / "build_wheel.sh")], env={**os.environ, "PYTHON": sys.executable},
                   check=True)  # fmt: skip
    return sorted((REPO_ROOT / "dist").glob("executorch_onednn-*.whl"), key=os.path.getmtime)[-1]


@pytest.mark.timeout(1500)
def test_the_wheel_installs_with_one_pip_install_and_runs_the_main_job(tmp_path: Path) -> None:
    wheel = _wheel()
    environment = tmp_path / "venv"
    venv.create(environment, with_pip=True)
    python = str(environment / "bin" / "python")
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ONEDNN_BACKEND_LIBRARY", "VIRTUAL_ENV")}
    install = subprocess.run(
        [python, "-m", "pip", "install", "--disable-pip-version-check", "-q", str(wheel)],
        capture_output=True, text=True, timeout=1200, check=False, env=clean,
    )  # fmt: skip
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-3000:]
    # The main job (examples/ is not in the wheel), on the delegate the wheel installed.
    run = subprocess.run(
        [python, "-m", "examples.onednn.run_model", "--model", "mlp", "--runs", "3"],
        capture_output=True, text=True, timeout=600, check=False, env=clean, cwd=REPO_ROOT,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert "OneDnnBackend matches eager" in run.stdout, run.stdout[-2000:]
    where = subprocess.run(
        [python, "-c", "import executorch.backends.onednn as m; print(m.library_path())"],
        capture_output=True, text=True, check=True, env=clean, cwd=tmp_path,
    ).stdout.strip()  # fmt: skip
    assert where.startswith(str(environment)), f"the job ran the delegate at {where}, not the wheel's"
