# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Helpers shared by several test modules (tester.py lowers and runs programs; op_cases.py holds the
op cases): models from functions, oneDNN's verbose trace of one execute(), a delegate preprocessed
again with a stage replaced, and PT2E static int8 quantization."""

from __future__ import annotations

import ctypes
import os
import tempfile
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from executorch.backends.onednn import OneDnnBackend, effective_isa, onednn_preprocess
from executorch.backends.onednn.quantizer import OneDnnQuantizer
from executorch.backends.onednn.serialization.payload import Graph, deserialize
from executorch.exir.lowered_backend_module import LoweredBackendModule
from tester import Lowered, in_worker
from torch import nn
from torchao.quantization.pt2e import allow_exported_model_train_eval
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

qd = torch.ops.quantized_decomposed


def host_row_kernels_run() -> bool:
    """Whether the runtime's host vector kernels run (RowKernels.h: AVX2 or more under oneDNN's
    instruction-set cap): one row times a matrix, the host activations. Below AVX2 oneDNN's
    convolutions also write blocked layouts rather than channels-last."""
    return effective_isa().startswith(("avx2", "avx512", "amx", "avx10"))


def avx2_is_the_widest() -> bool:
    """Whether AVX2 is the widest vector oneDNN runs (an AVX2-only CPU, or the AVX2-capped leg of
    scripts/run_tests.sh), where the runtime takes its AVX2-only rules (fused_activation_is_slow())."""
    return effective_isa().startswith("avx2")


def skip_unless_avx2_is_the_widest() -> None:
    if not avx2_is_the_widest():
        pytest.skip(
            f"needs AVX2 as the widest instruction set (oneDNN runs {effective_isa()}); the AVX2-capped leg runs it"
        )


class Fn(nn.Module):
    """Wraps a function of the inputs (and of this module's parameters) as a module to export."""

    def __init__(self, fn: Callable[..., torch.Tensor], **modules: nn.Module) -> None:
        super().__init__()
        self.fn = fn
        self.parts = nn.ModuleDict(modules)

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        return self.fn(self, *xs)


# The size arithmetic ops (ops/rules.py's SIZE_ARITHMETIC) test_dynamic_shapes.py runs; test_ops.py counts on it.
SIZE_ARITHMETIC_OPS = frozenset({"aten::sym_size", "add", "sub", "mul", "floordiv", "mod"})


# --- running a program with oneDNN's verbose trace ------------------------------------------------------
@dataclass(frozen=True)
class Record:
    """One primitive execution from oneDNN's verbose log."""

    primitive: str  # 'convolution', 'reorder', 'binary', ...
    layouts: tuple[tuple[str, str], ...]  # (argument, format tag): ('src', 'abcd'), ('dst', 'aBcd16b')
    post_ops: tuple[str, ...]  # 'binary_add:f32:14:acdb', 'eltwise_relu', ...
    problem: str
    implementation: str = ""  # 'brg:avx512_core', 'gemm:jit', 'ref:any', ...
    data_types: tuple[str, ...] = ()  # of the layouts' arguments, in order: 'f32', 'u8', ...

    def __str__(self) -> str:
        layouts = " ".join(f"{arg}:{tag}" for arg, tag in self.layouts)
        post_ops = f" post-ops {'+'.join(self.post_ops)}" if self.post_ops else ""
        return f"{self.primitive} [{self.implementation}] {layouts}{post_ops} ({self.problem})"


def parse_verbose(text: str) -> list[Record]:
    """oneDNN's (>= 3.5) execution lines: onednn_verbose,v1,primitive,exec,cpu,<primitive>,<implementation>,
    <prop kind>,<memory descriptors>,<attributes>,<auxiliary>,<problem>,<ms>; a memory descriptor reads
    <argument>:<type>:<properties>:blocked:<format tag>:<extra>:<flags>."""
    records = []
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) < 13 or fields[0] != "onednn_verbose" or fields[2:4] != ["primitive", "exec"]:
            continue
        primitive, implementation, memory_descriptors, attributes, problem = (fields[i] for i in (5, 6, 8, 9, 11))
        layouts, data_types = [], []
        for md in memory_descriptors.split():
            parts = md.split(":")
            if len(parts) >= 5:
                layouts.append((parts[0], parts[4]))
                data_types.append(parts[1])
        post_ops: tuple[str, ...] = ()
        for attr in attributes.split():
            if attr.startswith("attr-post-ops:"):
                post_ops = tuple(attr.removeprefix("attr-post-ops:").split("+"))
        records.append(Record(primitive, tuple(layouts), post_ops, problem, implementation, tuple(data_types)))
    return records


def describe(trace: list[Record]) -> str:
    return "runtime trace of execute():\n" + "\n".join(f"    {record}" for record in trace)


def _load_under(buffer: bytes, set_option: Callable[[str], None], value: str, default: str) -> tuple[object, Any]:
    """Runs in the worker: the program and its forward method, loaded (its delegates initialized, which
    read the backend option) under set_option(value); `default` set again after. The program is returned
    too: a Method does not keep its Program alive."""
    from executorch.runtime import Runtime

    set_option(value)
    try:
        program = Runtime.get().load_program(buffer)
        return program, program.load_method("forward")
    finally:
        set_option(default)


def _execute_with_int4_products(buffer: bytes, inputs: list[torch.Tensor], products: str) -> list[torch.Tensor]:
    from executorch.backends.onednn import set_int4_products

    _program, method = _load_under(buffer, set_int4_products, products, "fast")
    return [output.clone() for output in method.execute(inputs)]


def execute_with_int4_products(buffer: bytes, inputs: Sequence[torch.Tensor], products: str) -> list[torch.Tensor]:
    """execute(), with the backend option "int4_products" set to `products` for the program's load."""
    return in_worker(_execute_with_int4_products, buffer, list(inputs), products)  # type: ignore[return-value]


def _execute_traced(buffer: bytes, inputs: list[torch.Tensor], winograd: str) -> tuple[list[torch.Tensor], str]:
    """Runs in the worker: load, then execute with oneDNN's verbose log captured from stdout."""
    from executorch.backends.onednn import set_verbose, set_winograd

    libc = ctypes.CDLL(None)
    _program, method = _load_under(buffer, set_winograd, winograd, "default")
    with tempfile.TemporaryFile() as log:
        libc.fflush(None)
        saved_stdout = os.dup(1)
        os.dup2(log.fileno(), 1)
        set_verbose(1)
        try:
            outputs = method.execute(inputs)
            libc.fflush(None)
        finally:
            set_verbose(0)
            os.dup2(saved_stdout, 1)
            os.close(saved_stdout)
        log.seek(0)
        text = log.read().decode(errors="replace")
    return [o.clone() for o in outputs], text


def execute_traced(
    buffer: bytes, inputs: tuple[torch.Tensor, ...], winograd: str = "never"
) -> tuple[list[torch.Tensor], list[Record]]:
    """Outputs of one execute() and the primitives it ran, with their layouts and post-ops. The checks
    here are of oneDNN's convolution kernels: by default 3x3 convolutions do not compute through
    Winograd (test_winograd.py checks that path)."""
    outputs, log = in_worker(_execute_traced, buffer, list(inputs), winograd)  # type: ignore[misc]
    return outputs, parse_verbose(log)


# --- the same partition preprocessed again, one stage replaced ------------------------------------------
@dataclass
class Variant:
    buffer: bytes
    processed_bytes: bytes
    graph: Graph


def preprocessed_with(lowered: Lowered, stage: str, replacement: Callable[..., Graph]) -> Variant:
    """The program of `lowered` with its one delegate preprocessed again, `stage` of onednn_preprocess
    ('run_passes', 'plan_layouts') replaced."""
    (module,) = lowered.lowered_modules
    original = getattr(onednn_preprocess, stage)
    setattr(onednn_preprocess, stage, replacement)
    try:
        result = OneDnnBackend.preprocess(module.original_module, module.compile_specs)
    finally:
        setattr(onednn_preprocess, stage, original)
    rebuilt = LoweredBackendModule(
        module.original_module,
        module.backend_id,
        result.processed_bytes,
        module.compile_specs,
        result.data_store_output,
    )
    return Variant(rebuilt.buffer(), result.processed_bytes, deserialize(result.processed_bytes))


# --- static int8 through PT2E ---------------------------------------------------------------------------
QUANT_STEPS = 2.0
CALIBRATION_BATCHES = 8


class Exported(nn.Module):
    """The converted GraphModule behind a module whose eval() works (tester.lower calls it)."""

    def __init__(self, graph_module: torch.fx.GraphModule) -> None:
        super().__init__()
        self.graph_module = graph_module

    def forward(self, *inputs: torch.Tensor) -> object:
        return self.graph_module(*inputs)


def quantize(model: nn.Module, example: tuple[torch.Tensor, ...], quantizer: object = None) -> torch.fx.GraphModule:
    """prepare_pt2e, calibrate on `example` and random inputs shaped like it, convert_pt2e."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prepared = prepare_pt2e(torch.export.export(model.eval(), example).module(), quantizer or OneDnnQuantizer())
        with torch.no_grad():
            prepared(*example)  # the test's own input is part of the calibration data
            for _ in range(CALIBRATION_BATCHES - 1):
                prepared(*(torch.randn_like(x) for x in example))
        converted = convert_pt2e(prepared)
    allow_exported_model_train_eval(converted)  # tester.lower calls eval()
    return converted


def output_scale(converted: torch.fx.GraphModule) -> float:
    """The scale of the dequantize producing the model's output."""
    (out,) = [n for n in converted.graph.nodes if n.op == "output"]
    (result,) = out.args[0]
    assert result.target == qd.dequantize_per_tensor.default, f"output is {result.target}"
    return float(result.args[1])
