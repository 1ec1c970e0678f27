# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""ETDump profiling: each prepared step of the runtime is a delegate event that the devtools Inspector
shows, named after the payload step it belongs to. And oneDNN's verbose log, switched on at run time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from executorch.backends.onednn import OneDnnPartitioner
from executorch.backends.onednn.serialization.payload import deserialize
from executorch.devtools import Inspector
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime
from support import avx2_is_the_widest
from tester import lower
from torch import nn


def test_the_inspector_shows_a_timed_event_for_every_step_named_by_its_source_ops(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(256, 4)
    ).eval()
    x = torch.randn(1, 3, 8, 8)
    edge = to_edge_transform_and_lower(
        torch.export.export(model, (x,)), partitioner=[OneDnnPartitioner()], generate_etrecord=True
    )
    program = edge.to_executorch()
    (tmp_path / "model.pte").write_bytes(program.buffer)
    program.get_etrecord().save(str(tmp_path / "model.etrecord"))
    loaded = Runtime.get().load_program(tmp_path / "model.pte", enable_etdump=True, debug_buffer_size=1 << 20)
    method = loaded.load_method("forward")
    for _ in range(3):
        method.execute([x])
    del method
    loaded.write_etdump_result_to_file(str(tmp_path / "run.etdp"), str(tmp_path / "debug.bin"))

    inspector = Inspector(etdump_path=str(tmp_path / "run.etdp"), etrecord=str(tmp_path / "model.etrecord"))
    (block,) = [block for block in inspector.event_blocks if block.name == "Execute"]
    events = {event.name: event for event in block.events if event.is_delegated_op and "#" in event.name}
    steps = deserialize(edge.exported_program().graph_module.lowered_module_0.processed_bytes).steps
    expected = {f"{step.kind.name.lower()}#{index}" for index, step in enumerate(steps)}
    assert expected <= set(events), f"missing {expected - set(events)}; got {sorted(events)}"
    for name in expected:
        event = events[name]
        assert event.delegate_backend_name == "OneDnnBackend"
        assert len(event.perf_data.raw) == 3 and all(ms > 0 for ms in event.perf_data.raw), (name, event.perf_data.raw)
        assert event.op_types, f"{name} maps to no source op"
    # batch norm folded and relu fused into the convolution: its event names all three.
    assert set(events["convolution#0"].op_types) == {
        "aten.convolution.default",
        "aten._native_batch_norm_legit_no_training.default",
        "aten.relu.default",
    }
    assert {"aten.max_pool2d_with_indices.default", "aten.linear.default"} <= {
        op for event in events.values() for op in event.op_types
    }


def test_no_event_tracer_no_events_and_the_same_results() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.GELU()).eval()
    x = torch.randn(2, 8)
    lowered = lower(model, (x,))
    traced = Runtime.get().load_program(lowered.buffer, enable_etdump=True, debug_buffer_size=1 << 16)
    plain = Runtime.get().load_program(lowered.buffer)
    got_traced = traced.load_method("forward").execute([x])[0]
    got_plain = plain.load_method("forward").execute([x])[0]
    assert torch.equal(got_traced, got_plain)


VERBOSE_RUN = """
import torch
from executorch.backends.onednn import OneDnnPartitioner, set_verbose
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime

model = torch.nn.Linear(8, 8).eval()
x = torch.randn(2, 8)
program = to_edge_transform_and_lower(torch.export.export(model, (x,)), partitioner=[OneDnnPartitioner()])
method_program = Runtime.get().load_program(program.to_executorch().buffer)
method = method_program.load_method("forward")
method.execute([x])
print("--- verbose on", flush=True)
set_verbose(1)
method.execute([x])
set_verbose(0)
print("--- verbose off", flush=True)
method.execute([x])
"""


def test_set_verbose_logs_each_primitive_run_while_on() -> None:
    result = subprocess.run([sys.executable, "-c", VERBOSE_RUN], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    before, _, rest = result.stdout.partition("--- verbose on")
    during, _, after = rest.partition("--- verbose off")
    assert "onednn_verbose" not in before and "onednn_verbose" not in after
    assert "onednn_verbose" in during and ",exec," in during and "matmul" in during, during


class _GatedResidual(nn.Module):
    """A Llama feed-forward block's elementwise tail: residual + silu(gate) * up."""

    def forward(self, gate: torch.Tensor, up: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return residual + nn.functional.silu(gate) * up


def _delegate_event_names(
    tmp_path: Path, rows: int, dtype: torch.dtype = torch.float32, precision: str = "fp32"
) -> tuple[set[str], list[str]]:
    inputs = [torch.randn(1, rows, 160, generator=torch.Generator().manual_seed(seed)).to(dtype) for seed in range(3)]
    lowered = lower(_GatedResidual(), tuple(inputs), OneDnnPartitioner(precision=precision))
    # No debug buffer: ETDump cannot log bf16 outputs.
    loaded = Runtime.get().load_program(lowered.buffer, enable_etdump=True)
    method = loaded.load_method("forward")
    bf16_somewhere = dtype == torch.bfloat16 or precision == "bf16"
    tolerance = {"rtol": 2e-2, "atol": 2e-2} if bf16_somewhere else {"rtol": 1e-5, "atol": 1e-6}
    torch.testing.assert_close(method.execute(inputs)[0], _GatedResidual()(*inputs), **tolerance)
    del method
    loaded.write_etdump_result_to_file(str(tmp_path / f"run{rows}.etdp"), str(tmp_path / f"debug{rows}.bin"))
    inspector = Inspector(etdump_path=str(tmp_path / f"run{rows}.etdp"))
    (block,) = [block for block in inspector.event_blocks if block.name == "Execute"]
    kinds = [step.kind.name for step in lowered.steps()]
    return {event.name for event in block.events if event.is_delegated_op and "#" in event.name}, kinds


def test_a_decode_steps_small_binaries_and_silu_run_on_the_host_a_prompts_in_onednn(tmp_path: Path) -> None:
    # One token: 160 values each, where oneDNN's call costs more than the values; 512 tokens: 81920.
    names, kinds = _delegate_event_names(tmp_path, rows=1)
    assert kinds == ["ELTWISE", "BINARY", "BINARY"]
    assert names == {"eltwise#0.host", "binary#1.host", "binary#2.host"}
    names, kinds = _delegate_event_names(tmp_path, rows=512)
    assert kinds == ["ELTWISE", "BINARY", "BINARY"]
    # Where AVX2 is the widest vector the host's SiLU beats oneDNN's at any size (RowKernels.h).
    silu = "eltwise#0.host" if avx2_is_the_widest() else "eltwise#0"
    assert names == {silu, "binary#1", "binary#2"}


@pytest.mark.parametrize(
    ("dtype", "precision"), [(torch.bfloat16, "fp32"), (torch.float32, "bf16")], ids=["bf16-model", "bf16-precision"]
)
def test_a_bf16_decode_steps_silu_and_binaries_run_on_the_host_f32_residuals_included(
    tmp_path: Path, dtype: torch.dtype, precision: str
) -> None:
    # A bf16 model's SiLU and binaries; under precision="bf16" an f32 program's, whose residual adds take
    # an f32 operand and a bf16 one.
    names, kinds = _delegate_event_names(tmp_path, rows=1, dtype=dtype, precision=precision)
    assert kinds == ["ELTWISE", "BINARY", "BINARY"]
    assert names == {"eltwise#0.host", "binary#1.host", "binary#2.host"}
