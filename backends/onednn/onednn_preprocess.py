# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""OneDnnBackend.preprocess: claimed subgraph -> payload bytes + constants in the named data store."""

from __future__ import annotations

import hashlib
import zlib
from typing import final

import torch
from executorch.exir._serialize._named_data_store import NamedDataStore
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from torch.export import ExportedProgram

from ._passes import compute_in_bf16, keeping_sources, passes_for, plan_layouts, run_passes, store_group_scales_in_bf16
from .ops import Unsupported, lower_program
from .ops.context import Bound
from .serialization.payload import Graph, serialize, symbols_of
from .serialization.shapes import at_point

# Constants are aligned for oneDNN's vector loads when used in place.
CONSTANT_ALIGNMENT = 64
# Compile spec naming the external data file (.ptd) that holds the weights instead of the .pte.
EXTERNAL_WEIGHTS_SPEC = "external_weights"
# Compile spec choosing the type fp32 activations compute in inside the delegate.
PRECISION_SPEC = "precision"
PRECISIONS = ("fp32", "bf16")
# Compile spec ("1") making linear layers compute in int8 with activations quantized per row at run time.
DYNAMIC_INT8_SPEC = "dynamic_int8"
# Compile spec ("1") storing a CRC-32 per weight in the payload, which init() checks: damaged weights are
# refused instead of giving wrong numbers, for one pass over the weights at init.
WEIGHT_CHECKSUMS_SPEC = "weight_checksums"
# Compile spec choosing the type 4-bit linear layers' group scales are stored in.
GROUP_SCALES_SPEC = "group_scales"
GROUP_SCALES = ("f32", "bf16")


def spec_value(compile_specs: list[CompileSpec], key: str) -> str | None:
    for spec in compile_specs:
        if spec.key == key:
            return spec.value.decode()
    return None


def precision_of(compile_specs: list[CompileSpec]) -> str:
    precision = spec_value(compile_specs, PRECISION_SPEC) or "fp32"
    if precision not in PRECISIONS:
        raise ValueError(f"compile spec {PRECISION_SPEC}={precision!r}: expected one of {PRECISIONS}")
    return precision


def group_scales_of(compile_specs: list[CompileSpec]) -> str:
    group_scales = spec_value(compile_specs, GROUP_SCALES_SPEC) or "f32"
    if group_scales not in GROUP_SCALES:
        raise ValueError(f"compile spec {GROUP_SCALES_SPEC}={group_scales!r}: expected one of {GROUP_SCALES}")
    return group_scales


def lower_and_plan(
    edge_program: ExportedProgram, compile_specs: list[CompileSpec], bound: Bound = "max", size_one: bool = True
) -> Graph:
    """The payload graph, dynamic sizes taken at `bound` (see LoweringContext)."""
    dynamic_int8 = spec_value(compile_specs, DYNAMIC_INT8_SPEC) == "1"
    graph = run_passes(lower_program(edge_program, bound, size_one), passes_for(dynamic_int8))
    if precision_of(compile_specs) == "bf16":
        graph = keeping_sources(compute_in_bf16, graph)
    if group_scales_of(compile_specs) == "bf16":
        graph = store_group_scales_in_bf16(graph)
    return keeping_sources(plan_layouts, graph)


def specialization_mismatch(dynamic: Graph, at_min: Graph) -> str | None:
    """How `dynamic`, its dims evaluated at every size's minimum, differs from `at_min` (the program
    lowered there); None when it does not. Anything a rule or pass decided from a dynamic size
    without carrying its expression shows up here."""
    point = {symbol: low for symbol, (low, _) in symbols_of(dynamic).items()}
    if len(dynamic.values) != len(at_min.values) or len(dynamic.steps) != len(at_min.steps):
        return f"{len(at_min.steps)} steps at the minimum sizes, {len(dynamic.steps)} at the maximum"
    if (dynamic.inputs, dynamic.outputs) != (at_min.inputs, at_min.outputs):
        return "graph inputs or outputs differ"
    for value_id, (value, low) in enumerate(zip(dynamic.values, at_min.values)):
        dims = tuple(at_point(dim, point) for dim in value.dims)
        if (dims, value.dtype, value.layout) != (low.dims, low.dtype, low.layout):
            return f"value {value_id}: {dims} {value.dtype.name} expected, {low.dims} {low.dtype.name} lowered"
    for index, (step, low) in enumerate(zip(dynamic.steps, at_min.steps)):
        ints = {name: [at_point(v, point) for v in data] for name, data in step.ints.items()}
        if (step.kind, step.inputs, step.outputs, ints, step.floats) != (
            low.kind,
            low.inputs,
            low.outputs,
            low.ints,
            low.floats,
        ):
            return f"step {index} ({step.kind.name}) differs: an attribute or choice depends on a dynamic size"
    for value_id, tensor in dynamic.constant_data.items():
        if not torch.equal(tensor, at_min.constant_data[value_id]):
            return f"constant value {value_id} depends on a dynamic size"
    return None


def lower_for_every_size(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> Graph:
    """The payload graph; for a dynamic program, checked against the program lowered at the minimum
    sizes, first with sizes exported as Dim(min=1) allowed to be 1, else from 2 as torch.export
    traced them."""
    graph = lower_and_plan(edge_program, compile_specs)
    if not symbols_of(graph):
        return graph
    for size_one in (True, False):
        if not size_one:
            graph = lower_and_plan(edge_program, compile_specs, size_one=False)
        try:
            mismatch = specialization_mismatch(graph, lower_and_plan(edge_program, compile_specs, "min", size_one))
        except Unsupported as error:
            mismatch = str(error)
        if mismatch is None:
            return graph
    raise Unsupported(f"the delegated graph cannot follow the program's dynamic sizes: {mismatch}")


def event_sources(graph: Graph) -> dict[str, tuple[int, ...]]:
    """The runtime's profiling event of payload step i is "<kind>#<i>" (and ".reorder"/".host" for the
    conversions and host loops it adds): each maps to the debug handles of the nodes the step computes,
    so the devtools Inspector can name the source ops of each event."""
    sources = {}
    for index, step in enumerate(graph.steps):
        if step.sources:
            name = f"{step.kind.name.lower()}#{index}"
            for suffix in ("", ".reorder", ".host"):
                sources[name + suffix] = tuple(sorted(step.sources))
    return sources


@final
class OneDnnBackend(BackendDetails):
    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        graph = lower_for_every_size(edge_program, compile_specs)
        store = NamedDataStore()
        external_tag = spec_value(compile_specs, EXTERNAL_WEIGHTS_SPEC)
        weight_checksums = spec_value(compile_specs, WEIGHT_CHECKSUMS_SPEC) == "1"
        for value_id, tensor in graph.constant_data.items():
            data = tensor.contiguous().reshape(-1).view(dtype=torch.uint8).numpy().tobytes()  # any dtype
            key = "onednn_" + hashlib.sha256(data).hexdigest()
            store.add_named_data(key, data, alignment=CONSTANT_ALIGNMENT, external_tag=external_tag)
            graph.values[value_id].constant_key = key
            if weight_checksums:
                graph.values[value_id].constant_checksum = zlib.crc32(data)
        return PreprocessResult(
            processed_bytes=serialize(graph),
            debug_handle_map=event_sources(graph),
            data_store_output=store.get_named_data_store_output(),
        )
