# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The delegate next to the other x86 runtimes a user has in one process (OpenVINO, ONNX Runtime, torch's
own oneDNN), each imported before and after it in a fresh process: every one of them computes correctly.
OpenVINO loads its own libtbb.so.12; the runtime of oneDNN 3.2's wheels needed a newer one, and whichever
came first won ("undefined symbol ... enter_parallel_phase", then "Backend OneDnnBackend is not
registered" at every execute). Also: a runtime library that is there but does not load fails the import."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from executorch.backends.onednn import OneDnnPartitioner
from executorch.exir import to_edge_transform_and_lower
from torch import nn

DELEGATE = "executorch.backends.onednn"
OTHERS = ("openvino", "onnxruntime", "torch")

# Imports `order`, runs our program, then computes with each other runtime in the order imported. Prints
# one "name max-relative-error" line per runtime; each is checked against a float64 reference.
CHILD = r"""
import importlib, sys
order, pte, data = sys.argv[1].split(","), sys.argv[2], sys.argv[3]
for name in order:
    module = importlib.import_module(name)
    if name == "executorch.backends.test.suite.flow":
        module.all_flows()  # what ExecuTorch's backend suite does first: import every installed backend's flow

import numpy as np
import torch

def relative_error(got, expected):
    got, expected = torch.as_tensor(np.asarray(got)).double(), torch.as_tensor(expected).double()
    return ((got - expected).abs().max() / expected.abs().max()).item()

x = torch.linspace(-3.0, 3.0, 24, dtype=torch.float64).reshape(2, 12)
relu_of_x = x.clamp(min=0)

def run_delegate():
    from executorch.runtime import Runtime
    saved = torch.load(data)
    program = Runtime.get().load_program(pte)  # a Method does not keep its Program alive
    method = program.load_method("forward")
    return relative_error(method.execute([saved["input"]])[0], saved["expected"])

def run_openvino():
    import openvino as ov
    import openvino.opset13 as ops
    parameter = ops.parameter([2, 12], np.float32)
    compiled = ov.Core().compile_model(ov.Model([ops.relu(parameter)], [parameter]), "CPU")
    return relative_error(compiled(x.float().numpy())[0], relu_of_x)

def run_onnxruntime():
    import onnxruntime
    from onnx import TensorProto, helper
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 12])],
    )
    # onnx 1.23 writes IR version 14 by default, which onnxruntime 1.31 does not read yet
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return relative_error(session.run(None, {"x": x.float().numpy()})[0], relu_of_x)

def run_torch():  # conv2d on a CPU tensor runs on torch's own oneDNN (mkldnn)
    assert torch.backends.mkldnn.is_available()
    image, weight = torch.randn(1, 4, 9, 9, dtype=torch.float64), torch.randn(6, 4, 3, 3, dtype=torch.float64)
    expected = (weight.reshape(6, -1) @ torch.nn.functional.unfold(image, 3)).reshape(1, 6, 7, 7)
    return relative_error(torch.nn.functional.conv2d(image.float(), weight.float()), expected)

RUN = {"executorch.backends.onednn": run_delegate, "openvino": run_openvino,
       "onnxruntime": run_onnxruntime, "torch": run_torch}
for name in order:
    if name in RUN:
        print(name, RUN[name]())
print("libtbb", *sorted({line.split()[-1] for line in open("/proc/self/maps") if "libtbb.so" in line}))
"""


class SmallNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.linear = nn.Linear(8 * 6 * 6, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(torch.relu(self.conv(x)).flatten(1))


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A delegated program, its input and eager PyTorch's float64 result, as files for the children."""
    model, x = SmallNet().eval(), torch.randn(1, 3, 6, 6)
    lowered = to_edge_transform_and_lower(torch.export.export(model, (x,)), partitioner=[OneDnnPartitioner()])
    directory = tmp_path_factory.mktemp("coexistence")
    pte, data = directory / "small.pte", directory / "small.pt"
    pte.write_bytes(lowered.to_executorch().buffer)
    with torch.no_grad():
        torch.save({"input": x, "expected": model.double()(x.double())}, data)
    return pte, data


def _run_child(order: list[str], program: tuple[Path, Path]) -> tuple[dict[str, float], list[str]]:
    """The relative error of each runtime in `order` that computes, and the libtbb files the process mapped."""
    result = subprocess.run(
        [sys.executable, "-c", CHILD, ",".join(order), *map(str, program)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, f"imports in the order {order}:\n{result.stderr[-3000:]}"
    lines = [line.split() for line in result.stdout.splitlines() if line.strip()]
    errors = {words[0]: float(words[1]) for words in lines if words[0] in order and len(words) == 2}
    assert sorted(errors) == sorted(name for name in order if name == DELEGATE or name in OTHERS), result.stdout[-2000:]
    libtbb = next(words[1:] for words in lines if words[0] == "libtbb")
    return errors, libtbb


@pytest.mark.parametrize("delegate_first", [False, True], ids=["delegate-after", "delegate-before"])
@pytest.mark.parametrize("other", OTHERS)
def test_the_delegate_and_another_runtime_both_compute_correctly(
    other: str, delegate_first: bool, program: tuple[Path, Path]
) -> None:
    if importlib.util.find_spec(other) is None:  # scripts/requirements-tests.txt installs both
        pytest.skip(f"{other} is not installed (pip install -r scripts/requirements-tests.txt)")
    order = [DELEGATE, other] if delegate_first else [other, DELEGATE]
    errors, _ = _run_child(order, program)
    assert all(error < 1e-5 for error in errors.values()), f"relative errors, imported in the order {order}: {errors}"


def test_after_executorchs_backend_suite_loaded_every_flow_the_delegate_computes_correctly(
    program: tuple[Path, Path],
) -> None:
    if importlib.util.find_spec("openvino") is None:
        pytest.skip("openvino is not installed (pip install -r scripts/requirements-tests.txt)")
    errors, libtbb = _run_child(["executorch.backends.test.suite.flow", DELEGATE], program)
    assert errors[DELEGATE] < 1e-5, errors
    # The suite's OpenVINO flow brought OpenVINO's own TBB into the process before the delegate loaded.
    assert any("openvino" in path for path in libtbb), f"OpenVINO's libtbb was not loaded first: {libtbb}"


def test_a_runtime_library_that_does_not_load_fails_the_import(tmp_path: Path) -> None:
    broken = tmp_path / "libexecutorch_backend_onednn.so"
    broken.write_bytes(b"\x7fELF" + bytes(60))  # truncated: the loader refuses it
    result = subprocess.run(
        [sys.executable, "-c", f"import {DELEGATE}"],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "ONEDNN_BACKEND_LIBRARY": str(broken)},
    )  # fmt: skip
    assert result.returncode != 0, "the import succeeded with a runtime library that cannot load"
    assert "ImportError: cannot load" in result.stderr and str(broken) in result.stderr, result.stderr[-2000:]


def test_without_a_runtime_library_the_import_warns_and_export_still_works(tmp_path: Path) -> None:
    missing = tmp_path / "libexecutorch_backend_onednn.so"
    script = (
        "import warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        f"    import {DELEGATE}\n"
        "print([str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)])\n"
        "import torch\n"
        "from executorch.exir import to_edge_transform_and_lower\n"
        "from executorch.backends.onednn import OneDnnPartitioner\n"
        "model, x = torch.nn.Linear(4, 2).eval(), torch.randn(1, 4)\n"
        "edge = to_edge_transform_and_lower(torch.export.export(model, (x,)), partitioner=[OneDnnPartitioner()])\n"
        "print('exported', len(edge.to_executorch().buffer))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "ONEDNN_BACKEND_LIBRARY": str(missing)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert "OneDnnBackend runtime not loaded" in result.stdout and "is missing" in result.stdout, result.stdout
    assert "exported" in result.stdout, result.stdout
