# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Op support and lowering: the rule tables (rules.py, composite.py, indexing.py, affine.py, llm_ops.py) and the
whole-program lowering."""

from __future__ import annotations

import torch
from torch.export import ExportedProgram
from torch.fx import Node

from ..serialization.payload import Graph
from ..serialization.schema import StepKind
from .affine import AFFINE_RULES
from .composite import COMPOSITE_KEEP_WHOLE, COMPOSITE_RULES
from .context import (
    HOST_DTYPES,
    SUPPORTED_DTYPES,
    Bound,
    LoweringContext,
    Unsupported,
    aten_op,
    constant_evaluator,
    fake_tensor,
)
from .indexing import INDEXING_RULES
from .llm_ops import LLM_OP_RULES
from .rules import KEEP_WHOLE as _PRIMITIVE_KEEP_WHOLE
from .rules import OP_RULES as _PRIMITIVE_RULES
from .rules import OpRule

RULE_TABLES: dict[str, dict[object, OpRule]] = {
    "rules.py": _PRIMITIVE_RULES,
    "composite.py": COMPOSITE_RULES,
    "indexing.py": INDEXING_RULES,
    "affine.py": AFFINE_RULES,  # keyed by op name: torchao's ops exist only once torchao is imported
    "llm_ops.py": LLM_OP_RULES,  # keyed by op name, likewise for ExecuTorch's custom-ops library
}


def merge_rule_tables(tables: dict[str, dict[object, OpRule]]) -> dict[object, OpRule]:
    """One table of every rule; an op with rows in two tables is an error (a merge would silently keep
    the later one)."""
    merged: dict[object, OpRule] = {}
    home: dict[object, str] = {}
    for name, table in tables.items():
        for target, rule in table.items():
            if target in merged:
                raise ValueError(f"{target} has a rule in both {home[target]} and {name}")
            merged[target], home[target] = rule, name
    return merged


OP_RULES = merge_rule_tables(RULE_TABLES)
KEEP_WHOLE = _PRIMITIVE_KEEP_WHOLE + COMPOSITE_KEEP_WHOLE

__all__ = ["KEEP_WHOLE", "OP_RULES", "OpRule", "Unsupported", "lower_program", "rule_for", "unsupported_reason"]


def rule_for(node: Node) -> OpRule | None:
    if node.op != "call_function":
        return None
    op = aten_op(node.target)
    rule = OP_RULES.get(op)
    if rule is None and isinstance(op, torch._ops.OpOverload):
        rule = OP_RULES.get(op.name())
    return rule


def is_folded_constant(ep: ExportedProgram, node: Node) -> bool:
    """The node computes a constant from constants only: preprocess folds it ahead of time."""
    return node.op == "call_function" and constant_evaluator(ep).evaluate(node) is not None


def unsupported_reason(ep: ExportedProgram, node: Node, every_size: bool = True) -> str | None:
    """Why the runtime cannot run this node exactly as exported; None when it can. `every_size=False`
    checks the largest sizes only: before to_edge, a prompt length exported with Dim(min=1) still
    ranges from 0."""
    if is_folded_constant(ep, node):
        value = constant_evaluator(ep).evaluate(node)
        if isinstance(value, torch.Tensor) and value.dtype in SUPPORTED_DTYPES:
            return None
        # Other dtypes exist only inside the delegate: every user must be taken too.
        if all(unsupported_reason(ep, user) is None for user in node.users):
            return None
        return f"{node.name} folds to a {type(value).__name__} that an undelegated user needs"
    rule = rule_for(node)
    if rule is None:
        return f"no oneDNN rule for {node.target}"
    if rule.users_ok is not None:
        reason = rule.users_ok(node, lambda user: unsupported_reason(ep, user) is None)
        if reason:
            return reason
    try:
        rule.lower(LoweringContext(ep), node)
        if every_size and _is_dynamic(node):  # the payload must hold at every size: try the smallest the range promises
            rule.lower(LoweringContext(ep, bound="min", size_one=False), node)
    except Unsupported as error:
        return str(error)
    return None


def _is_dynamic(node: Node) -> bool:
    def dynamic(value: object) -> bool:
        values = value if isinstance(value, (tuple, list)) else [value]
        return any(isinstance(v, torch.Tensor) and not all(isinstance(d, int) for d in v.shape) for v in values)

    return dynamic(node.meta.get("val")) or any(dynamic(arg.meta.get("val")) for arg in node.all_input_nodes)


def lower_program(ep: ExportedProgram, bound: Bound = "max", size_one: bool = True) -> Graph:
    """Lower a delegated subgraph (every call_function node already claimed) to a payload Graph,
    dynamic sizes taken at `bound` (see LoweringContext)."""
    ctx = LoweringContext(ep, bound, size_one)
    user_inputs = list(ep.graph_signature.user_inputs)
    for node in ep.graph.nodes:
        if node.op == "placeholder" and node.name in user_inputs and isinstance(node.meta.get("val"), torch.SymInt):
            # A size computed outside (the delegate shares it with undelegated users): the runtime
            # skips the argument and takes every size from the tensors.
            ctx.graph.size_args.append(user_inputs.index(node.name))
        elif node.op == "placeholder" and node.name in user_inputs:
            # An index or mask input: the partitioner took it only for a user that reads that type.
            if fake_tensor(node).dtype not in SUPPORTED_DTYPES | HOST_DTYPES:
                raise Unsupported(f"delegate input {node.name} has dtype {fake_tensor(node).dtype}")
            ctx.value(node, SUPPORTED_DTYPES | HOST_DTYPES)
        elif node.op == "call_function":
            if ctx.constants.evaluate(node) is not None:
                continue  # folded into a constant when a step reads it
            rule = rule_for(node)
            if rule is None:
                raise Unsupported(f"no oneDNN rule for {node.target} ({node.name})")
            handle = node.meta.get("debug_handle")
            ctx.sources = frozenset([handle]) if isinstance(handle, int) else frozenset()
            rule.lower(ctx, node)
        elif node.op == "output":
            for out in node.args[0]:
                ctx.graph.outputs.append(_output_value(ctx, out))
    return ctx.graph


def _output_value(ctx: LoweringContext, node: Node) -> int:
    """Graph outputs must be fresh values produced by a step; copy anything else."""
    graph = ctx.graph
    if node not in ctx.node_values and ctx.constants.evaluate(node) is None:
        raise Unsupported(f"output {node.name} is computed by no step of the delegate")
    value_id = ctx.value(node, SUPPORTED_DTYPES | HOST_DTYPES)
    dims = ctx.dims_of(node, SUPPORTED_DTYPES | HOST_DTYPES)
    if graph.values[value_id].dims != dims:
        raise Unsupported(f"output {node.name} has dims {graph.values[value_id].dims}, expected {dims}")
    produced = any(value_id in step.outputs for step in graph.steps)
    if produced and value_id not in graph.outputs:
        return value_id
    if fake_tensor(node).dtype in HOST_DTYPES:  # no step copies them
        raise Unsupported(f"output {node.name} ({fake_tensor(node).dtype}) is an input or another output")
    copy = ctx.new_value(dims, ctx.dtype(value_id))
    ctx.emit(StepKind.RESHAPE, [value_id], [copy])
    return copy
