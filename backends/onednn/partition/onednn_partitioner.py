# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Claims the nodes the oneDNN runtime executes exactly; everything else stays with ExecuTorch."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable

import sympy
import torch
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.backend.utils import tag_constant_data
from torch.export import ExportedProgram
from torch.fx import Node
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from ..onednn_preprocess import (
    DYNAMIC_INT8_SPEC,
    EXTERNAL_WEIGHTS_SPEC,
    GROUP_SCALES,
    GROUP_SCALES_SPEC,
    PRECISION_SPEC,
    PRECISIONS,
    WEIGHT_CHECKSUMS_SPEC,
)
from ..ops import KEEP_WHOLE, Unsupported, is_folded_constant, rule_for, unsupported_reason
from ..ops.context import aten_op, concrete_dims
from ..ops.rules import SIZE_ARITHMETIC
from ..serialization.shapes import SymDim, gives_size_one_to_one

logger = logging.getLogger(__name__)


class _OneDnnSupport(OperatorSupportBase):
    def __init__(self, ep: ExportedProgram) -> None:
        self.ep = ep
        self.rejections: dict[str, str] = {}

    def is_node_supported(self, submodules: object, node: Node) -> bool:
        reason = unsupported_reason(self.ep, node)
        if reason is not None and node.op == "call_function":
            self.rejections[node.name] = reason
            logger.debug("OneDnnPartitioner leaves %s: %s", node.name, reason)
        return reason is None


def _free_in_executorch(ep: ExportedProgram, node: Node) -> bool:
    """Nodes that cost ExecuTorch nothing: constants folded ahead of time, size arithmetic, and
    `view_copy`, which its memory planning turns into a view. A partition of only those is not worth a
    delegate call; any other data movement is (a permute runs ~10x faster as a oneDNN reorder than as
    the portable kernel: README, Supported ops)."""
    if is_folded_constant(ep, node) or rule_for(node) is SIZE_ARITHMETIC:
        return True
    return aten_op(node.target) is torch.ops.aten.view_copy.default


def _leave_shared_sizes_to_executorch(graph: torch.fx.Graph) -> None:
    """A delegate cannot return a size (SymInt), and a partitioner may not add nodes to copy one: a
    size node with users outside its partition is left to ExecuTorch, which passes it to every
    delegate that needs it. When it reads a tensor of its own partition, the nodes of that partition
    that depend on it move to a partition of their own (else the delegate would wait for itself)."""
    while True:
        shared = next((node for node in graph.nodes if _is_shared_size(node)), None)
        if shared is None:
            return
        tag = shared.meta.pop("delegation_tag")
        if not any(source.meta.get("delegation_tag") == tag for source in shared.all_input_nodes):
            continue
        later_tag, frontier, seen = f"{tag}_after_{shared.name}", list(shared.users), set()
        while frontier:
            node = frontier.pop()
            if node in seen:
                continue
            seen.add(node)
            if node.meta.get("delegation_tag") == tag:
                node.meta["delegation_tag"] = later_tag
            frontier.extend(node.users)


def _partitions(graph: torch.fx.Graph) -> dict[str, list[Node]]:
    """The tagged nodes by delegation tag, in graph order."""
    members: dict[str, list[Node]] = {}
    for node in graph.nodes:
        if "delegation_tag" in node.meta:
            members.setdefault(node.meta["delegation_tag"], []).append(node)
    return members


def _leave_unreadable_sizes_to_executorch(ep: ExportedProgram) -> dict[str, str]:
    """The runtime reads each dynamic size from an input dim that gives it one to one (FORMAT.md). A
    partition whose inputs give some size only many to one (a window mask padded to a multiple of 8,
    `8 * ((s + 7) // 8)`, is the same for several s) could not be lowered: it is left to ExecuTorch.
    Returns the reason for each node it untags."""
    reasons = {}
    for tag, nodes in _partitions(ep.graph).items():
        inputs = {source for node in nodes for source in node.all_input_nodes}
        inputs = {source for source in inputs if source.meta.get("delegation_tag") != tag}
        given = {symbol for source in inputs for symbol in _sizes_given_one_to_one(ep, source)}
        missing = {symbol for node in nodes for symbol in _sizes_used(ep, node)} - given
        if not missing:
            continue
        reason = f"dynamic size {min(missing, key=str)} is given by no input dim of its partition one to one"
        for node in nodes:
            del node.meta["delegation_tag"]
            reasons[node.name] = reason
    return reasons


def _symbolic_dims(ep: ExportedProgram, node: Node) -> list[SymDim]:
    values = node.meta.get("val")
    values = values if isinstance(values, (tuple, list)) else [values]
    sizes = [size for value in values if isinstance(value, torch.Tensor) for size in value.shape]
    sizes += [value for value in values if isinstance(value, torch.SymInt)]
    try:
        dims = concrete_dims(sizes, ep.range_constraints, "max", size_one=True)
    except Unsupported:  # unbounded: no rule claims such a node, and it gives no size
        return []
    return [dim for dim in dims if isinstance(dim, SymDim)]


def _sizes_used(ep: ExportedProgram, node: Node) -> set[sympy.Symbol]:
    return {symbol for dim in _symbolic_dims(ep, node) for symbol in dim.expr.free_symbols}


def _sizes_given_one_to_one(ep: ExportedProgram, node: Node) -> set[sympy.Symbol]:
    if not isinstance(node.meta.get("val"), torch.Tensor):
        return set()  # the runtime reads sizes from tensors only
    return {
        symbol
        for dim in _symbolic_dims(ep, node)
        for symbol in dim.expr.free_symbols
        if len(dim.expr.free_symbols) == 1 and gives_size_one_to_one(dim.expr, symbol, dim.bounds[symbol])
    }


def _is_shared_size(node: Node) -> bool:
    tag = node.meta.get("delegation_tag")
    return (
        tag is not None
        and rule_for(node) is SIZE_ARITHMETIC
        and any(user.meta.get("delegation_tag") != tag for user in node.users)
    )


class OneDnnPartitioner(Partitioner):
    """Partitioner of the oneDNN delegate (backend id `OneDnnBackend`)."""

    def __init__(
        self,
        compile_specs: list[CompileSpec] | None = None,
        external_weights: str | None = None,
        precision: str = "fp32",
        dynamic_int8: bool = False,
        weight_checksums: bool = False,
        group_scales: str = "f32",
    ) -> None:
        """external_weights: put the weights in the external data file `<external_weights>.ptd`
        (written by `ExecutorchProgramManager.write_tensor_data_to_file`) instead of the .pte.

        precision: "fp32" computes fp32 models in fp32; "bf16" computes their activations inside the
        delegate in bf16 (fp32 accumulation, fp32 softmax/normalization/reduction outputs, fp32
        delegate inputs and outputs). Models already in bf16 compute in bf16 either way.

        dynamic_int8: linear layers (matmuls with a stored 2-D weight) compute in int8: weights
        quantized per output channel (s8, symmetric) ahead of time, activations per row (per token)
        at run time; no calibration. Other ops keep `precision`.

        weight_checksums: the payload carries a CRC-32 of every weight, and init() refuses a program
        whose weights no longer match (InvalidProgram) instead of computing with them. It costs one
        pass over the weights at init; the graph itself is always checksummed.

        group_scales: the type the group scales of 4-bit linear layers (torchao's 8da4w and 4w) are
        stored and read in. "f32" keeps them as the program has them; "bf16" rounds them to bf16, as
        XNNPACK does (a relative change of at most 2^-9 each): at group 32 a decode step then reads a
        tenth fewer bytes, and the .pte is smaller by as much."""
        super().__init__()
        if precision not in PRECISIONS:
            raise ValueError(f"precision={precision!r}: expected one of {PRECISIONS}")
        if group_scales not in GROUP_SCALES:
            raise ValueError(f"group_scales={group_scales!r}: expected one of {GROUP_SCALES}")
        specs = list(compile_specs or [])
        if external_weights is not None:
            specs.append(CompileSpec(EXTERNAL_WEIGHTS_SPEC, external_weights.encode()))
        if precision != "fp32":
            specs.append(CompileSpec(PRECISION_SPEC, precision.encode()))
        if dynamic_int8:
            specs.append(CompileSpec(DYNAMIC_INT8_SPEC, b"1"))
        if weight_checksums:
            specs.append(CompileSpec(WEIGHT_CHECKSUMS_SPEC, b"1"))
        if group_scales != "f32":
            specs.append(CompileSpec(GROUP_SCALES_SPEC, group_scales.encode()))
        self.delegation_spec = DelegationSpec("OneDnnBackend", specs)
        # Node name -> why it was left to ExecuTorch, from the last partition() call.
        self.rejections: dict[str, str] = {}

    def ops_to_not_decompose(
        self, ep: ExportedProgram
    ) -> tuple[list[torch._ops.OpOverload], Callable[[Node], bool] | None]:
        return list(KEEP_WHOLE), lambda node: unsupported_reason(ep, node, every_size=False) is None

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        support = _OneDnnSupport(exported_program)
        proposer = CapabilityBasedPartitioner(exported_program.graph_module, support, allows_single_node_partition=True)
        for partition in proposer.propose_partitions():
            for node in partition.nodes:
                node.meta["delegation_tag"] = f"onednn_{partition.id}"
        _leave_shared_sizes_to_executorch(exported_program.graph)
        support.rejections.update(_leave_unreadable_sizes_to_executorch(exported_program))
        tags = {}
        for tag, nodes in _partitions(exported_program.graph).items():
            if all(_free_in_executorch(exported_program, node) for node in nodes):
                for node in nodes:
                    del node.meta["delegation_tag"]
            else:
                tags[tag] = self.delegation_spec
        # to_edge shares the constants dict with the user's ExportedProgram, and lowering deletes the
        # lifted tensor constants a delegate takes from it: without a copy of its own, the user's
        # program would no longer run (its module() raised KeyError: 'lifted_tensor_0').
        exported_program._constants = dict(exported_program.constants)
        tag_constant_data(exported_program)
        self.rejections = support.rejections
        _warn_about_bf16_fallbacks(exported_program, self.rejections)
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)


def _warn_about_bf16_fallbacks(ep: ExportedProgram, rejections: dict[str, str]) -> None:
    """ExecuTorch's portable kernels compute bf16 inexactly (relative errors of 0.1-0.9 were measured
    on transformer programs): say which bf16 computations are left to them, and why."""
    left = []
    for node in ep.graph.nodes:
        value = node.meta.get("val")
        if node.name not in rejections or not isinstance(value, torch.Tensor) or value.dtype != torch.bfloat16:
            continue
        rule = rule_for(node)
        if rule is None or rule.compute:  # moving bf16 data around is exact anywhere
            left.append(f"{node.name} ({rejections[node.name]})")
    if left:
        warnings.warn(
            "OneDnnPartitioner leaves these bf16 computations to ExecuTorch's own kernels, whose bf16 "
            "results can be far from fp32; lower with transform_passes=[ComputeBf16FallbacksInFp32()] "
            "(ops without a oneDNN rule then compute in fp32), or keep the model in fp32 with "
            f"precision='bf16': {'; '.join(left)}",
            RuntimeWarning,
            stacklevel=3,
        )
