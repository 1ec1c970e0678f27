# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The C++ side for applications: the CMake package `cmake --install` puts in a prefix, setup.md's example
application (its two code blocks, verbatim) built against it and run on a .pte, and onednn_runner."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import executorch
import pytest
import torch
from executorch.backends.onednn.cli import main
from executorch.backends.onednn.cli.zoo import MODELS

from examples.onednn.device_check import _runner_inputs

ROOT = Path(__file__).resolve().parents[3]
BUILD = ROOT / "build" / "cmake-test"  # configured and built by scripts/run_tests.sh before pytest


def _tool(name: str) -> str:
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    assert found, f"{name} is missing: scripts/bootstrap.sh installs it into .venv"
    return found


def _run(*command: str | Path) -> str:
    result = subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def _setup_md_examples() -> dict[str, str]:
    text = (ROOT / "backends" / "onednn" / "setup.md").read_text()
    return dict(re.findall(r"<!-- example: (\S+) -->\n```\w+\n(.*?)```", text, flags=re.DOTALL))


def test_the_setup_md_application_builds_against_the_installed_package_and_runs(tmp_path: Path) -> None:
    if not (BUILD / "CMakeCache.txt").exists():
        pytest.fail(f"{BUILD} is missing: scripts/run_tests.sh configures and builds it before pytest")
    prefix = tmp_path / "prefix"
    _run(_tool("cmake"), "--install", BUILD, "--prefix", prefix)
    assert (prefix / "lib" / "cmake" / "executorch_onednn" / "executorch_onednn-config.cmake").exists()

    app = tmp_path / "app"
    app.mkdir()
    examples = _setup_md_examples()
    assert set(examples) == {"CMakeLists.txt", "main.cpp"}, sorted(examples)
    for name, text in examples.items():
        (app / name).write_text(text)
    _run(
        _tool("cmake"), "-S", app, "-B", app / "build", "-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={_tool('ninja')}",
        f"-DCMAKE_PREFIX_PATH={executorch.__path__[0]};{prefix}",
    )  # fmt: skip
    _run(_tool("cmake"), "--build", app / "build")

    pte = tmp_path / "mlp.pte"
    assert main(["export", "mlp", "-o", str(pte)]) == 0
    model, (x,) = MODELS["mlp"]()
    with torch.no_grad():
        want = model(torch.ones_like(x)).flatten()[:3]
    printed = _run(app / "build" / "run_with_onednn", pte)
    got = torch.tensor([float(v) for v in printed.split(":")[1].split()])
    assert f"output 0 has {model(x).numel()} values" in printed, printed
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)

    saved = tmp_path / "outputs.f32"
    timing = _run(prefix / "bin" / "onednn_runner", pte, "--runs", "3", "--threads", "2", "--save-outputs", saved)
    assert re.search(r"3 runs: median [0-9.]+ ms", timing), timing
    assert re.search(r"^oneDNN 3\.13\.1 \(.*threadpool\), \w+$", timing, flags=re.MULTILINE), timing
    # The runner's inputs are the ones examples/onednn/device_check.py rebuilds to check its outputs elsewhere.
    with torch.no_grad():
        want_all = model(*_runner_inputs((x,))).flatten()
    assert saved.stat().st_size == 4 * want_all.numel()
    torch.testing.assert_close(torch.from_file(str(saved), size=want_all.numel()), want_all, rtol=1e-4, atol=1e-5)
