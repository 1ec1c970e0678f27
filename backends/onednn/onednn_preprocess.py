"""OneDnnBackend.preprocess: claimed subgraph -> payload bytes + constants in the named data store."""

from __future__ import annotations

import hashlib
from typing import final

import torch
from executorch.exir._serialize._named_data_store import NamedDataStore
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from torch.export import ExportedProgram

from ._passes import run_passes
from .ops import lower_program
from .serialization.payload import serialize

# Constants are aligned for oneDNN's vector loads when used in place.
CONSTANT_ALIGNMENT = 64
# Compile spec naming the external data file (.ptd) that holds the weights instead of the .pte.
EXTERNAL_WEIGHTS_SPEC = "external_weights"


def external_weights_tag(compile_specs: list[CompileSpec]) -> str | None:
    for spec in compile_specs:
        if spec.key == EXTERNAL_WEIGHTS_SPEC:
            return spec.value.decode()
    return None


@final
class OneDnnBackend(BackendDetails):
    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        graph = run_passes(lower_program(edge_program))
        store = NamedDataStore()
        external_tag = external_weights_tag(compile_specs)
        for value_id, tensor in graph.constant_data.items():
            data = tensor.contiguous().reshape(-1).view(dtype=torch.uint8).numpy().tobytes()
            key = "onednn_" + hashlib.sha256(data).hexdigest()
            store.add_named_data(key, data, alignment=CONSTANT_ALIGNMENT, external_tag=external_tag)
            graph.values[value_id].constant_key = key
        return PreprocessResult(
            processed_bytes=serialize(graph),
            data_store_output=store.get_named_data_store_output(),
        )
