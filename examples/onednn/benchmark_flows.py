# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The runtimes the benchmark compares, as a table of flows.

A `Flow` says how to turn a model into an artifact on disk (`export`, run in the export process) and,
in a fresh worker process, how to make its runtime ready with a given thread count (`setup`, before the
memory baseline) and how to load the artifact into something that runs the model (`load`, timed as the
load+init time). Runtimes are imported inside these functions, so a worker only loads its own.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

Inputs = tuple[torch.Tensor, ...]
RunFn = Callable[[], list[torch.Tensor]]
Loader = Callable[[Path, Inputs, int], RunFn]  # (artifact, inputs, threads) -> runs the model once
DELEGATE_CALL = torch.ops.higher_order.executorch_call_delegate


@dataclass(frozen=True)
class Flow:
    name: str
    label: str
    suffix: str  # the artifact's file name ending
    export: Callable[[nn.Module, Inputs, Path], dict[str, Any]]  # writes the artifact; returns export facts
    setup: Callable[[int], None]  # imports the runtime and sets its thread count
    load: Loader  # load + init (timed); the function it returns runs the model once
    unavailable: Callable[[], str | None] = lambda: None  # why the flow cannot run here, or None
    # ExecuTorch's own kernels are orders of magnitude slower: few runs under a time budget.
    slow: bool = False
    # The models the flow is meant for (None: all); the others skip it.
    models: tuple[str, ...] | None = None
    # Runs our delegate from the runtime library at $ONEDNN_BENCH_BASELINE_LIBRARY (--baseline-library).
    baseline: bool = False


# --- ExecuTorch (.pte) -------------------------------------------------------------------------------------
# The partitioners are imported when a flow exports, so that listing the flows imports no delegate.
def _onednn() -> list[Any]:
    from executorch.backends.onednn import OneDnnPartitioner

    return [OneDnnPartitioner()]


def _onednn_bf16() -> list[Any]:
    from executorch.backends.onednn import OneDnnPartitioner

    return [OneDnnPartitioner(precision="bf16")]


def _onednn_dynamic_int8() -> list[Any]:
    from executorch.backends.onednn import OneDnnPartitioner

    return [OneDnnPartitioner(dynamic_int8=True)]


def _xnnpack() -> list[Any]:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    return [XnnpackPartitioner()]


def _openvino() -> list[Any]:
    from executorch.backends.openvino import OpenvinoPartitioner
    from executorch.exir.backend.compile_spec_schema import CompileSpec

    return [OpenvinoPartitioner([CompileSpec("device", b"CPU")])]


def _export_pte(partitioners: Callable[[], list[Any]]) -> Callable[[nn.Module, Inputs, Path], dict[str, Any]]:
    def export(model: nn.Module, inputs: Inputs, path: Path) -> dict[str, Any]:
        from executorch.exir import to_edge_transform_and_lower

        edge = to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=partitioners())
        nodes = edge.exported_program().graph.nodes
        calls = sum(1 for node in nodes if node.op == "call_function" and node.target == DELEGATE_CALL)
        path.write_bytes(edge.to_executorch().buffer)
        return {"delegate_calls": calls}

    return export


# --- a model already in bf16 (model.to(torch.bfloat16), as LLM checkpoints ship), bf16 inputs and outputs ------
def _in_bf16(inputs: Inputs) -> Inputs:
    return tuple(x.to(torch.bfloat16) if x.is_floating_point() else x for x in inputs)


def _export_bf16_model(partitioners: Callable[[], list[Any]]) -> Callable[[nn.Module, Inputs, Path], dict[str, Any]]:
    def export(model: nn.Module, inputs: Inputs, path: Path) -> dict[str, Any]:
        return _export_pte(partitioners)(copy.deepcopy(model).to(torch.bfloat16), _in_bf16(inputs), path)

    return export


def _load_bf16_model(path: Path, inputs: Inputs, threads: int) -> RunFn:
    run_bf16 = _load_pte(path, _in_bf16(inputs), threads)

    def run() -> list[torch.Tensor]:
        return [out.float() for out in run_bf16()]  # compared with the fp32 reference

    return run


# --- static int8 (PT2E): each delegate's own quantizer, calibrated on the same generated batches ----------
CALIBRATION_BATCHES = 8


def _calibration(inputs: Inputs) -> list[Inputs]:
    """The benchmark inputs and perturbed copies (token ids are kept: they are the input's vocabulary)."""
    generator = torch.Generator().manual_seed(1)
    return [inputs] + [
        tuple(x + 0.5 * torch.randn(x.shape, generator=generator) if x.is_floating_point() else x for x in inputs)
        for _ in range(CALIBRATION_BATCHES - 1)
    ]


def _onednn_quantizer() -> Any:
    from executorch.backends.onednn.quantizer import OneDnnQuantizer

    return OneDnnQuantizer()


def _xnnpack_quantizer() -> Any:
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    return XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))


def _xnnpack_dynamic_quantizer() -> Any:
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    return XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True))


def _export_quantized_pte(
    quantizer: Callable[[], Any], partitioners: Callable[[], list[Any]], calibrate: bool = True
) -> Callable[[nn.Module, Inputs, Path], dict[str, Any]]:
    """Without `calibrate` (dynamic quantization: activation ranges are taken at run time) the prepared
    model runs once, on the inputs."""

    def export(model: nn.Module, inputs: Inputs, path: Path) -> dict[str, Any]:
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

        prepared = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer())
        with torch.no_grad():
            for batch in _calibration(inputs) if calibrate else [inputs]:
                prepared(*batch)
        return _export_pte(partitioners)(convert_pt2e(prepared), inputs, path)

    return export


def _setup_executorch(*registering: str) -> Callable[[int], None]:
    """Imports the runtime (and the modules that register the delegate's C++ side), sizes its threadpool."""

    def setup(threads: int) -> None:
        # torch computes nothing here, but ExecuTorch's Python bindings copy each input with a torch op:
        # with torch's pool at `threads`, every copy left its OpenMP workers spinning on the cores the
        # runtime under test needed next (README, "Known issues").
        torch.set_num_threads(1)
        for module in ("executorch.runtime", *registering):
            importlib.import_module(module)
        from executorch.extension.pybindings import portable_lib

        # XNNPACK and ExecuTorch's optimized kernels share this pool (default: one thread per core).
        if portable_lib._threadpool_get_thread_count() != threads:
            portable_lib._unsafe_reset_threadpool(threads)

    return setup


def _load_pte(path: Path, inputs: Inputs, threads: int) -> RunFn:
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(path)  # from the file path, as a deployment would
    method = program.load_method("forward")  # delegate init: oneDNN primitives, XNNPACK runtime, ...
    args = list(inputs)

    def run() -> list[torch.Tensor]:
        _ = program  # the method needs its program alive
        return list(method.execute(args))

    return run


def _openvino_missing() -> str | None:
    missing = [name for name in ("openvino", "nncf") if importlib.util.find_spec(name) is None]
    if missing:  # the cheap answer: importing the delegate's Python side takes seconds
        return f"{' and '.join(missing)} not installed (the delegate needs openvino==2025.4.1, nncf==3.1.0)"
    try:
        importlib.import_module("executorch.backends.openvino")
    except Exception as error:  # ImportError, or whatever mismatched openvino/nncf versions raise
        return f"executorch.backends.openvino does not import: {type(error).__name__}: {error}"
    return None


# --- ONNX Runtime ---------------------------------------------------------------------------------------------
def _export_onnx(model: nn.Module, inputs: Inputs, path: Path) -> dict[str, Any]:
    import onnx

    torch.onnx.export(model, inputs, str(path), dynamo=True, external_data=False)
    return {"onnx_nodes": len(onnx.load(str(path), load_external_data=False).graph.node)}


def _setup_onnxruntime(threads: int) -> None:
    torch.set_num_threads(threads)
    importlib.import_module("onnxruntime")


def _load_onnxruntime(path: Path, inputs: Inputs, threads: int) -> RunFn:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    feed = {arg.name: tensor.numpy() for arg, tensor in zip(session.get_inputs(), inputs)}

    def run() -> list[torch.Tensor]:
        return [torch.from_numpy(out) for out in session.run(None, feed)]

    return run


# --- eager PyTorch ---------------------------------------------------------------------------------------------
def _export_eager(model: nn.Module, inputs: Inputs, path: Path) -> dict[str, Any]:
    torch.save(model, path)  # the whole module (pickled): the worker loads it like the other artifacts
    # The worker imports these before its memory baseline, so unpickling does not count imports.
    return {"imports": sorted({type(module).__module__ for module in model.modules()})}


def _setup_eager(threads: int) -> None:
    torch.set_num_threads(threads)


def _load_eager(path: Path, inputs: Inputs, threads: int) -> RunFn:
    model = torch.load(path, weights_only=False).eval()

    def run() -> list[torch.Tensor]:
        with torch.inference_mode():
            out = model(*inputs)
        return [out] if isinstance(out, torch.Tensor) else list(out)

    return run


# --- our delegate on another build of its runtime: the same .pte, another libexecutorch_backend_onednn.so ------
BASELINE_LIBRARY_ENV = "ONEDNN_BENCH_BASELINE_LIBRARY"


def _baseline_missing() -> str | None:
    path = os.environ.get(BASELINE_LIBRARY_ENV)
    if not path:
        return "no baseline runtime library given (--baseline-library)"
    return None if os.path.exists(path) else f"{path} does not exist"


def _with_baselines(flows: list[Flow]) -> list[Flow]:
    """Each flow of our delegate and its `-baseline` twin (run by benchmark_processes.run_flow in a process that
    loads the baseline library)."""
    twins = [
        replace(flow, name=f"{flow.name}-baseline", label=f"{flow.label}, baseline build",
                unavailable=_baseline_missing, baseline=True)
        for flow in flows if flow.name.startswith("onednn")
    ]  # fmt: skip
    return flows + twins


LINEAR_MODELS = ("vit_tiny", "bert_base", "gpt2_small", "mlp")
FLOWS: dict[str, Flow] = {
    flow.name: flow
    for flow in _with_baselines([
        Flow("xnnpack", "ExecuTorch + XNNPACK", ".pte", _export_pte(_xnnpack), _setup_executorch(), _load_pte),
        Flow(
            "onednn", "ExecuTorch + oneDNN (ours)", ".pte", _export_pte(_onednn),
            _setup_executorch("executorch.backends.onednn"), _load_pte,
        ),
        # fp32 model and inputs, bf16 inside the delegate: the peer is OpenVINO (bf16 on such CPUs).
        Flow(
            "onednn-bf16", "ExecuTorch + oneDNN, precision=bf16 (ours)", ".pte", _export_pte(_onednn_bf16),
            _setup_executorch("executorch.backends.onednn"), _load_pte,
        ),
        # The model itself in bf16: the comparison is our fp32 flow (on CPUs without bf16 instructions
        # the delegate keeps its values in f32 between steps).
        Flow(
            "onednn-bf16-model", "ExecuTorch + oneDNN, the model in bf16 (ours)", ".pte", _export_bf16_model(_onednn),
            _setup_executorch("executorch.backends.onednn"), _load_bf16_model,
        ),
        Flow(
            "onnxruntime", "ONNX Runtime (CPU EP)", ".onnx", _export_onnx, _setup_onnxruntime, _load_onnxruntime
        ),
        # Static int8 (PT2E), each delegate with its own quantizer and the same calibration batches.
        Flow(
            "onednn-int8", "ExecuTorch + oneDNN int8 (ours)", ".pte",
            _export_quantized_pte(_onednn_quantizer, _onednn),
            _setup_executorch("executorch.backends.onednn"), _load_pte,
        ),
        Flow(
            "xnnpack-int8", "ExecuTorch + XNNPACK int8", ".pte", _export_quantized_pte(_xnnpack_quantizer, _xnnpack),
            _setup_executorch(), _load_pte,
        ),
        # Dynamic int8 (activations quantized at run time) is for linear layers: the models made of them.
        Flow(
            "onednn-dyn-int8", "ExecuTorch + oneDNN, dynamic int8 linears (ours)", ".pte",
            _export_pte(_onednn_dynamic_int8), _setup_executorch("executorch.backends.onednn"), _load_pte,
            models=LINEAR_MODELS,
        ),
        Flow(
            "xnnpack-dyn-int8", "ExecuTorch + XNNPACK dynamic int8", ".pte",
            _export_quantized_pte(_xnnpack_dynamic_quantizer, _xnnpack, calibrate=False), _setup_executorch(),
            _load_pte, models=LINEAR_MODELS,
        ),
        Flow(
            "openvino", "ExecuTorch + OpenVINO (bf16 on AVX512-BF16 CPUs)", ".pte", _export_pte(_openvino),
            _setup_executorch("executorch.backends.openvino"), _load_pte, unavailable=_openvino_missing,
        ),
        Flow("eager", "eager PyTorch", ".pt", _export_eager, _setup_eager, _load_eager),
        Flow(
            "no-delegate", "ExecuTorch, no delegate", ".pte", _export_pte(list), _setup_executorch(), _load_pte,
            slow=True,
        ),
    ])
}  # fmt: skip

__all__ = ["BASELINE_LIBRARY_ENV", "FLOWS", "Flow", "Inputs", "Loader", "RunFn"]
