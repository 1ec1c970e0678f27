# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""A transform pass computing in fp32 the bf16 ops the delegate has no rule for, with casts around them.

ExecuTorch's own kernels compute bf16 inexactly (relative errors of 0.1-0.9 against fp32 were measured
on transformer programs). Partitioners may not change the graph, so this runs before partitioning:

    to_edge_transform_and_lower(ep, transform_passes=[ComputeBf16FallbacksInFp32()],
                                partitioner=[OneDnnPartitioner()])

Each such node reads fp32 copies of its bf16 inputs and its result is cast back to bf16; the casts are
delegated with their neighbours, the node runs in fp32 on ExecuTorch's kernels.
"""

from __future__ import annotations

import torch
from executorch.exir.dialects._ops import ops as exir_ops
from torch.fx import Graph, GraphModule, Node
from torch.fx.node import map_arg
from torch.fx.passes.infra.pass_base import PassBase, PassResult

from ..ops import rule_for

CAST = exir_ops.edge.dim_order_ops._to_dim_order_copy.default


def _bf16(node: Node) -> bool:
    value = node.meta.get("val")
    return isinstance(value, torch.Tensor) and value.dtype == torch.bfloat16


def needs_fp32(node: Node) -> bool:
    """A bf16 computation the delegate has no rule for, whose type follows its inputs' (not a cast or a
    factory with a dtype argument, not a tuple result)."""
    return (
        node.op == "call_function"
        and callable(node.target)
        and _bf16(node)
        and "dtype" not in node.kwargs
        and rule_for(node) is None
        and any(_bf16(arg) for arg in node.all_input_nodes)
    )


def _cast(graph: Graph, source: Node, dtype: torch.dtype, like: Node) -> Node:
    value = source.meta["val"]
    cast = graph.call_function(CAST, (source,), {"dtype": dtype, "dim_order": list(range(value.dim()))})
    cast.meta = {key: like.meta[key] for key in ("stack_trace", "nn_module_stack") if key in like.meta}
    with value.fake_mode:
        cast.meta["val"] = value.to(dtype)
    return cast


def _widen(graph: Graph, node: Node) -> None:
    with graph.inserting_before(node):
        widened = {arg: _cast(graph, arg, torch.float32, node) for arg in node.all_input_nodes if _bf16(arg)}
    node.args, node.kwargs = map_arg((node.args, node.kwargs), lambda arg: widened.get(arg, arg))
    with node.meta["val"].fake_mode:
        args, kwargs = map_arg((node.args, node.kwargs), lambda arg: arg.meta["val"])
        node.meta["val"] = node.target(*args, **kwargs)  # type: ignore[operator]
    with graph.inserting_after(node):
        narrowed = _cast(graph, node, torch.bfloat16, node)
    node.replace_all_uses_with(narrowed, delete_user_cb=lambda user: user is not narrowed)


class ComputeBf16FallbacksInFp32(PassBase):
    def call(self, graph_module: GraphModule) -> PassResult:
        nodes = [node for node in graph_module.graph.nodes if needs_fp32(node)]
        for node in nodes:
            _widen(graph_module.graph, node)
        if nodes:
            graph_module.recompile()
        return PassResult(graph_module, bool(nodes))
