"""OneDnnBackend.preprocess: claimed subgraph -> payload bytes + constants in the named data store."""

from __future__ import annotations

import hashlib
from typing import final

import torch
from executorch.exir._serialize._named_data_store import NamedDataStore
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from torch.export import ExportedProgram

from ._passes import compute_in_bf16, passes_for, plan_layouts, run_passes
from .ops import lower_program
from .serialization.payload import serialize

# Constants are aligned for oneDNN's vector loads when used in place.
CONSTANT_ALIGNMENT = 64
# Compile spec naming the external data file (.ptd) that holds the weights instead of the .pte.
EXTERNAL_WEIGHTS_SPEC = "external_weights"
# Compile spec choosing the type fp32 activations compute in inside the delegate.
PRECISION_SPEC = "precision"
PRECISIONS = ("fp32", "bf16")
# Compile spec ("1") making linear layers compute in int8 with activations quantized per row at run time.
DYNAMIC_INT8_SPEC = "dynamic_int8"


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


@final
class OneDnnBackend(BackendDetails):
    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        dynamic_int8 = spec_value(compile_specs, DYNAMIC_INT8_SPEC) == "1"
        graph = run_passes(lower_program(edge_program), passes_for(dynamic_int8))
        if precision_of(compile_specs) == "bf16":
            graph = compute_in_bf16(graph)
        graph = plan_layouts(graph)
        store = NamedDataStore()
        external_tag = spec_value(compile_specs, EXTERNAL_WEIGHTS_SPEC)
        for value_id, tensor in graph.constant_data.items():
            data = tensor.contiguous().reshape(-1).view(dtype=torch.uint8).numpy().tobytes()  # any dtype
            key = "onednn_" + hashlib.sha256(data).hexdigest()
            store.add_named_data(key, data, alignment=CONSTANT_ALIGNMENT, external_tag=external_tag)
            graph.values[value_id].constant_key = key
        return PreprocessResult(
            processed_bytes=serialize(graph),
            data_store_output=store.get_named_data_store_output(),
        )
