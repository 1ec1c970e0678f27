# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Export -> lower with OneDnnPartitioner -> run the .pte -> compare with eager, in one call.

Programs execute in a separate worker process, so a crash in the runtime fails the one test that
caused it (quoting what the worker logged) instead of killing pytest.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import operator
import os
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

import executorch.exir as exir
import torch
from executorch.backends.onednn import OneDnnPartitioner
from executorch.backends.onednn.ops.context import aten_op
from executorch.backends.onednn.serialization.payload import Graph, Step, deserialize
from executorch.backends.onednn.serialization.schema import StepKind
from executorch.exir.lowered_backend_module import LoweredBackendModule
from torch import nn
from torch.fx import Graph as FxGraph

DELEGATE_CALL = torch.ops.higher_order.executorch_call_delegate
# Ops that only move or relabel data; left outside a delegate they cost a copy, not compute.
LAYOUT_OPS = frozenset(
    {
        "aten::view_copy",
        "aten::permute_copy",
        "aten::transpose_copy",
        "aten::squeeze_copy",
        "aten::unsqueeze_copy",
        "aten::expand_copy",
        "aten::select_copy",
        "aten::slice_copy",
        "aten::split_with_sizes_copy",
        "aten::split_copy",
        "aten::clone",
        "aten::alias_copy",
        "dim_order_ops::_to_dim_order_copy",
        "dim_order_ops::_clone_dim_order",
    }
)
DEFAULT_TOLERANCE = 1e-4


def op_name(target: object) -> str:
    """'aten::conv2d'-style name of an FX call target (edge or ATen overload)."""
    op = aten_op(target)
    schema = getattr(op, "_schema", None)
    return schema.name if schema is not None else str(getattr(op, "__name__", op))


@dataclass
class Lowered:
    edge: exir.EdgeProgramManager
    partitioner: OneDnnPartitioner
    buffer: bytes
    delegate_calls: int
    # Names ('aten::where') of call_function nodes left to ExecuTorch, compute and layout apart.
    undelegated_compute: list[str]
    undelegated_layout: list[str]
    # Op names inside the delegated subgraphs as the partitioner saw them (before to_executorch).
    delegated_ops: set[str]

    @property
    def lowered_modules(self) -> list[LoweredBackendModule]:
        gm = self.edge.exported_program().graph_module
        return [m for _, m in gm.named_children() if isinstance(m, LoweredBackendModule)]

    def payloads(self) -> list[Graph]:
        return [deserialize(m.processed_bytes) for m in self.lowered_modules]

    def steps(self, kind: StepKind | None = None) -> list[Step]:
        """Every payload's steps in order, or those of one kind."""
        return [step for graph in self.payloads() for step in graph.steps if kind is None or step.kind == kind]

    def describe(self) -> str:
        return (
            f"{self.delegate_calls} delegate call(s); left to ExecuTorch: compute {self.undelegated_compute}, "
            f"layout {self.undelegated_layout}; partitioner rejections {self.partitioner.rejections}"
        )


def classify(graph: FxGraph) -> tuple[int, list[str], list[str]]:
    """(delegate calls, undelegated compute op names, undelegated layout op names) of a top-level graph."""
    calls = [n for n in graph.nodes if n.op == "call_function" and n.target is not operator.getitem]
    delegates = sum(1 for n in calls if n.target is DELEGATE_CALL)
    others = [op_name(n.target) for n in calls if n.target is not DELEGATE_CALL]
    return delegates, [o for o in others if o not in LAYOUT_OPS], [o for o in others if o in LAYOUT_OPS]


def lower(
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    partitioner: OneDnnPartitioner | None = None,
    dynamic_shapes: object = None,
    compile_config: exir.EdgeCompileConfig | None = None,
) -> Lowered:
    partitioner = partitioner or OneDnnPartitioner()
    ep = torch.export.export(model.eval(), inputs, dynamic_shapes=dynamic_shapes)  # type: ignore[arg-type]
    edge = exir.to_edge_transform_and_lower(ep, partitioner=[partitioner], compile_config=compile_config)
    delegates, compute, layout = classify(edge.exported_program().graph)
    gm = edge.exported_program().graph_module
    delegated = {
        op_name(node.target)
        for _, child in gm.named_children()
        if isinstance(child, LoweredBackendModule)
        for node in child.original_module.graph.nodes
        if node.op == "call_function"
    }
    buffer = edge.to_executorch().buffer
    return Lowered(edge, partitioner, buffer, delegates, compute, layout, delegated)


# --- running programs in a worker process ------------------------------------------------------------
def _execute_in_worker(buffer: bytes, inputs: list[torch.Tensor], method_name: str) -> list[torch.Tensor]:
    import executorch.backends.onednn  # noqa: F401  (registers OneDnnBackend in this process)
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(buffer)
    method = program.load_method(method_name)
    outputs = method.execute(inputs)  # `buffer` stays referenced until here
    return [o.clone() if isinstance(o, torch.Tensor) else o for o in outputs]


class RuntimeCrashed(RuntimeError):
    """The worker process running a program died (segfault, abort)."""


_pool: concurrent.futures.ProcessPoolExecutor | None = None
# The worker's stderr (ExecuTorch's and the delegate's log) goes here; failures quote what it wrote.
_worker_log = Path(tempfile.gettempdir()) / f"onednn_test_worker_{os.getpid()}.log"


def _redirect_stderr(path: str) -> None:
    log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 2)
    os.close(log)


def _worker_pool() -> concurrent.futures.ProcessPoolExecutor:
    global _pool
    if _pool is None:
        _pool = concurrent.futures.ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_redirect_stderr,
            initargs=(str(_worker_log),),
        )
    return _pool


def _log_since(offset: int, limit: int = 2000) -> str:
    try:
        with open(_worker_log, "rb") as log:
            log.seek(offset)
            text = log.read().decode(errors="replace")
    except OSError:
        return ""
    lines = [line for line in text.splitlines() if "cpuinfo_utils" not in line]
    return "\n".join(lines)[-limit:]


def in_worker(function: Callable[..., object], *args: object, timeout: float = 300) -> object:
    """Call a picklable module-level function in the worker; a dead worker raises RuntimeCrashed.

    Errors carry what the worker logged during the call (the runtime's reason for refusing a program).
    """
    global _pool
    start = _worker_log.stat().st_size if _worker_log.exists() else 0
    try:
        return _worker_pool().submit(function, *args).result(timeout=timeout)
    except BrokenProcessPool:
        _pool = None
        raise RuntimeCrashed(f"the process running the program died; its log:\n{_log_since(start)}") from None
    except Exception as error:
        log = _log_since(start)
        if log and hasattr(error, "add_note"):
            error.add_note(f"worker log:\n{log}")
        raise


def execute(buffer: bytes, inputs: Sequence[torch.Tensor], method_name: str = "forward") -> list[torch.Tensor]:
    return in_worker(_execute_in_worker, buffer, list(inputs), method_name)  # type: ignore[return-value]


def _execute_each_in_worker(buffer: bytes, input_sets: list[list[torch.Tensor]]) -> list[list[torch.Tensor] | str]:
    import executorch.backends.onednn  # noqa: F401  (registers OneDnnBackend in this process)
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(buffer)
    method = program.load_method("forward")
    results: list[list[torch.Tensor] | str] = []
    for inputs in input_sets:
        try:
            results.append([o.clone() for o in method.execute(inputs)])
        except RuntimeError as error:
            results.append(str(error))
    return results


def execute_each(buffer: bytes, input_sets: Sequence[Sequence[torch.Tensor]]) -> list[list[torch.Tensor] | str]:
    """Runs one loaded method on each set of inputs in turn: outputs, or the error's message."""
    return in_worker(_execute_each_in_worker, buffer, [list(inputs) for inputs in input_sets])  # type: ignore[return-value]


def shutdown_worker() -> None:
    global _pool
    if _pool is not None:
        _pool.shutdown(wait=True, cancel_futures=True)
        _pool = None
    _worker_log.unlink(missing_ok=True)


# --- comparison ------------------------------------------------------------------------------------
def flatten_outputs(value: object) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in flatten_outputs(item)]
    raise TypeError(f"unexpected model output {type(value)}")


def mismatch(
    name: str, actual: Sequence[torch.Tensor], expected: Sequence[torch.Tensor], tolerance: float
) -> str | None:
    """None when every output is within tolerance * max(1, max|expected|); else what differed."""
    if len(actual) != len(expected):
        return f"{name}: {len(actual)} outputs, eager gives {len(expected)}"
    for index, (got, want) in enumerate(zip(actual, expected)):
        if got.shape != want.shape or got.dtype != want.dtype:
            return (
                f"{name} output {index}: got {got.dtype}{list(got.shape)}, eager gives {want.dtype}{list(want.shape)}"
            )
        if not want.is_floating_point():  # indices and masks: exact
            if not torch.equal(got, want):
                where = tuple(int(i) for i in (got != want).nonzero()[0])
                return f"{name} output {index}: got {got[where].item()} at {where}, eager {want[where].item()}"
            continue
        scale = max(1.0, want.abs().max().item()) if want.numel() else 1.0
        bound = tolerance * scale
        error = (got - want).abs()
        if not torch.isfinite(got).all() and torch.isfinite(want).all():
            return f"{name} output {index}: non-finite values where eager is finite"
        max_error = error.max().item() if error.numel() else 0.0
        if not max_error <= bound:
            where = tuple(int(i) for i in torch.unravel_index(error.argmax(), error.shape))
            return (
                f"{name} output {index}: max abs error {max_error:.3g} at {where} "
                f"(got {got[where].item():.6g}, eager {want[where].item():.6g}) exceeds tolerance {bound:.3g} "
                f"({tolerance:g} * max(1, max|eager| = {scale:.3g}))"
            )
    return None


def non_finite_mismatch(actual: torch.Tensor, expected: torch.Tensor, tolerance: float) -> str | None:
    """None when NaN, +inf and -inf sit where eager's are and the finite values are within tolerance
    (as mismatch() bounds them); else what differed."""
    for kind in (torch.isnan, torch.isposinf, torch.isneginf):
        if not torch.equal(kind(actual), kind(expected)):
            return f"{kind.__name__} differs from eager"
    finite = torch.isfinite(expected)
    return mismatch("finite values", [actual[finite]], [expected[finite]], tolerance)


@dataclass
class Outcome:
    name: str
    lowered: Lowered
    outputs: list[torch.Tensor]
    expected: list[torch.Tensor]
    # None when the outputs match eager; otherwise the failure message.
    mismatch: str | None

    @property
    def delegate_calls(self) -> int:
        return self.lowered.delegate_calls

    @property
    def undelegated_compute(self) -> list[str]:
        return self.lowered.undelegated_compute

    def assert_matches(self) -> None:
        assert self.mismatch is None, f"{self.mismatch}\n  [{self.lowered.describe()}]"

    def assert_delegated(self, exactly_one: bool = False, allow_layout: bool = True) -> None:
        lowered = self.lowered
        calls_ok = lowered.delegate_calls == 1 if exactly_one else lowered.delegate_calls >= 1
        leftovers = lowered.undelegated_compute + ([] if allow_layout else lowered.undelegated_layout)
        assert calls_ok and not leftovers, f"{self.name} not fully delegated: {lowered.describe()}"


def run_and_compare(
    name: str,
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    tolerance: float = DEFAULT_TOLERANCE,
    partitioner: OneDnnPartitioner | None = None,
    compile_config: exir.EdgeCompileConfig | None = None,
) -> Outcome:
    """Export, lower, run the .pte and compare every output with eager PyTorch."""
    model = model.eval()
    with torch.no_grad():
        expected = [t.detach().clone() for t in flatten_outputs(model(*inputs))]
    lowered = lower(model, inputs, partitioner, compile_config=compile_config)
    outputs = execute(lowered.buffer, inputs)
    return Outcome(name, lowered, outputs, expected, mismatch(name, outputs, expected, tolerance))


__all__ = [
    "DEFAULT_TOLERANCE",
    "LAYOUT_OPS",
    "Lowered",
    "Outcome",
    "RuntimeCrashed",
    "classify",
    "execute",
    "execute_each",
    "flatten_outputs",
    "in_worker",
    "lower",
    "mismatch",
    "op_name",
    "run_and_compare",
    "shutdown_worker",
]
