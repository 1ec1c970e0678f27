# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""`inspect`: what runs where in a .pte: each method's instructions in order, the oneDNN subgraphs (their
steps and weight bytes), every op left to ExecuTorch's kernels with the partitioner's reason, an HTML
report with the program drawn; `--compare` runs each delegated subgraph against its edge ops."""

from __future__ import annotations

import argparse
import functools
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..serialization.payload import Value
from ..serialization.schema import TORCH_TO_DTYPE, DType
from ._common import CliError, load_model, parse_shape, progress
from ._report import write_html

ELEMENT_BYTES = {dtype: torch_dtype.itemsize for torch_dtype, dtype in TORCH_TO_DTYPE.items()}


def stored_bytes(value: Value) -> int:
    """A constant's bytes in the program: 4-bit values two a byte along the last dim."""
    if value.dtype == DType.S4:
        *outer, last = value.dims
        return math.prod(outer) * ((last + 1) // 2)
    return ELEMENT_BYTES[value.dtype] * math.prod(value.dims)


@dataclass
class Instruction:
    """One instruction of a method: a delegate call or a kernel (ExecuTorch's portable ops)."""

    label: str
    delegated: bool
    args: list[int]
    outputs: int  # how many of the last args it writes
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class MethodReport:
    name: str
    inputs: list[int]
    outputs: list[int]
    instructions: list[Instruction]


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "inspect",
        help="show what runs in oneDNN and what is left to ExecuTorch, and why",
        description="Report a .pte's delegated subgraphs and the ops left to ExecuTorch's kernels.",
    )
    parser.add_argument("pte", type=Path)
    parser.add_argument("--html", type=Path, help="also write a self-contained HTML report with the program drawn")
    parser.add_argument("--json", type=Path, help="also write the report as JSON")
    parser.add_argument(
        "--compare",
        action="store_true",
        help="run each oneDNN subgraph of --model against its edge ops on the same inputs and report the difference",
    )
    parser.add_argument("--model", help="--compare: the model the .pte came from (zoo name or module:attr)")
    parser.add_argument("--shape", action="append", type=parse_shape, default=[], help="--compare: input shapes")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32", help="--compare: the precision")
    parser.set_defaults(run=run)


def _reasons(pte: Path) -> list[dict[str, str]]:
    record = Path(f"{pte}.onednn.json")
    return json.loads(record.read_text())["left_to_executorch"] if record.exists() else []


@functools.cache
def _ops_with_rules() -> frozenset[str]:
    """`aten::name` of every op the partitioner has a rule for (any overload)."""
    from ..ops import OP_RULES

    return frozenset(op.name().split(".")[0] for op in OP_RULES if hasattr(op, "name"))


def _why_left(op_name: str, recorded: bool) -> str:
    if op_name not in _ops_with_rules():
        return f"oneDNN has no rule for {op_name}"
    if recorded:
        return "refused for this instance (see the partitioner's reasons)"
    return "refused for this instance: export with `executorch-onednn export` to record why"


def read_methods(buffer: bytes, recorded: bool) -> list[MethodReport]:
    from executorch.exir._serialize._program import deserialize_pte_binary

    from ..serialization.payload import PayloadError, deserialize

    # The flatbuffer's file identifier first: the reader trusts the bytes it is given.
    if len(buffer) < 8 or buffer[4:8] != b"ET12":
        raise CliError("not an ExecuTorch program: no ET12 identifier at byte 4 (a .pte of another version?)")
    try:
        program = deserialize_pte_binary(buffer).program
        plans = list(program.execution_plan)
    except Exception as error:  # the flatbuffer reader raises many kinds on damaged input
        raise CliError(f"not an ExecuTorch program: {error}") from error
    methods = []
    for plan in plans:
        instructions = []
        for instruction in plan.chains[0].instructions:
            call = instruction.instr_args
            kind = type(call).__name__
            if kind == "DelegateCall":
                delegate = plan.delegates[call.delegate_index]
                detail: dict[str, Any] = {"backend": delegate.id}
                outputs = 1
                if delegate.id == "OneDnnBackend":
                    try:
                        graph = deserialize(program.backend_delegate_data[delegate.processed.index].data)
                    except (PayloadError, IndexError) as error:
                        raise CliError(f"method {plan.name}: a oneDNN payload is damaged ({error})") from error
                    weights = sum(stored_bytes(v) for v in graph.values if v.constant_key is not None)
                    detail |= {"steps": dict(Counter(step.kind.name for step in graph.steps)), "weight_bytes": weights}
                    outputs = len(graph.outputs)
                instructions.append(
                    Instruction(delegate.id, delegate.id == "OneDnnBackend", list(call.args), outputs, detail)
                )
            elif kind == "KernelCall":
                operator = plan.operators[call.op_index]
                name = operator.name
                instructions.append(
                    Instruction(
                        f"{name}.{operator.overload}", False, list(call.args), 1, {"why": _why_left(name, recorded)}
                    )
                )
            else:
                instructions.append(Instruction(kind, False, [], 0))
        methods.append(MethodReport(plan.name, list(plan.inputs), list(plan.outputs), instructions))
    return methods


def compare_subgraphs(spec: str, shapes: list[tuple[int, ...]], precision: str) -> list[dict[str, Any]]:
    """Each oneDNN subgraph of `spec` exported afresh, run alone by the runtime on the inputs it gets in
    a run of the whole model, against the subgraph's edge ops in PyTorch (its original module)."""
    from executorch.exir import to_edge_transform_and_lower
    from executorch.exir.lowered_backend_module import LoweredBackendModule
    from executorch.runtime import Runtime

    from ..partition import OneDnnPartitioner

    model, inputs = load_model(spec, shapes)
    edge = to_edge_transform_and_lower(
        torch.export.export(model, inputs), partitioner=[OneDnnPartitioner(precision=precision)]
    )
    module = edge.exported_program().module()
    captured: list[tuple[LoweredBackendModule, tuple[Any, ...]]] = []

    class Capture(torch.fx.Interpreter):
        def call_function(self, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            if target is torch.ops.higher_order.executorch_call_delegate and args[0].backend_id == "OneDnnBackend":
                captured.append((args[0], tuple(args[1:])))
            return super().call_function(target, args, kwargs)

    with torch.no_grad():
        Capture(module).run(*inputs)
    rows = []
    for index, (lowered, args) in enumerate(progress(captured, len(captured), "comparing subgraphs")):
        with torch.no_grad():
            reference = lowered.original_module.module()(*args)
        reference = reference if isinstance(reference, (tuple, list)) else (reference,)
        program = Runtime.get().load_program(lowered.buffer())
        method = program.load_method("forward")
        ours = method.execute(list(args))
        del method
        worst_abs, worst_rel = 0.0, 0.0
        for got, want in zip(ours, reference):
            if not torch.is_floating_point(want) or want.numel() == 0:
                worst_abs = max(worst_abs, float((got != want).sum().item()))
                continue
            difference = (got.float() - want.float()).abs()
            finite = torch.isfinite(difference)
            worst_abs = max(worst_abs, difference[finite].max().item() if finite.any() else 0.0)
            scale = want.float().abs()[torch.isfinite(want.float())].max().item() if want.numel() else 0.0
            worst_rel = max(worst_rel, worst_abs / scale if scale > 0 else 0.0)
        steps = sum(1 for node in lowered.original_module.graph.nodes if node.op == "call_function")
        rows.append({"subgraph": index, "edge_ops": steps, "max_abs_diff": worst_abs, "max_rel_diff": worst_rel})
    return rows


def run(args: argparse.Namespace) -> int:
    if not args.pte.exists():
        raise CliError(f"{args.pte} does not exist")
    if args.compare and not args.model:
        raise CliError("--compare needs --model: the model the .pte came from (a zoo name or module:attr)")
    reasons = _reasons(args.pte)
    methods = read_methods(args.pte.read_bytes(), bool(reasons))
    for method in methods:
        delegated = [i for i in method.instructions if i.delegated]
        left = [i for i in method.instructions if not i.delegated]
        print(
            f"method {method.name}: {len(method.instructions)} instruction(s), {len(delegated)} oneDNN subgraph(s), "
            f"{len(left)} left to ExecuTorch"
        )
        for number, instruction in enumerate(method.instructions):
            if instruction.delegated:
                steps = ", ".join(f"{kind.lower()} x{count}" for kind, count in instruction.detail["steps"].items())
                print(f"  [{number}] oneDNN: {steps}; weights {instruction.detail['weight_bytes']} bytes")
            else:
                print(f"  [{number}] ExecuTorch: {instruction.label} ({instruction.detail.get('why', '')})")
    if reasons:
        print("the partitioner's reasons for the nodes it left to ExecuTorch:")
        for entry in reasons:
            print(f"  {entry['node']}: {entry['reason']}")
    comparison = compare_subgraphs(args.model, args.shape, args.precision) if args.compare else []
    for row in comparison:
        print(
            f"  subgraph {row['subgraph']} ({row['edge_ops']} edge ops): max |diff| {row['max_abs_diff']:.3g}, "
            f"relative to max |reference| {row['max_rel_diff']:.3g}"
        )
    report = {
        "pte": str(args.pte),
        "methods": [
            {**method.__dict__, "instructions": [i.__dict__ for i in method.instructions]} for method in methods
        ],
        "reasons": reasons,
        "comparison": comparison,
    }
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
        print(f"wrote {args.json}")
    if args.html:
        write_html(report, args.html)
        print(f"wrote {args.html}")
    return 0
