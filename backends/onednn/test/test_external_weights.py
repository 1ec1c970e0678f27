# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Weights can live in an external .ptd file instead of the .pte."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from executorch.backends.onednn import OneDnnPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime


def _program(external_weights: str | None) -> tuple[torch.nn.Module, torch.Tensor, object]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU()).eval()
    x = torch.randn(4, 256)
    exported = torch.export.export(model, (x,))
    partitioner = OneDnnPartitioner(external_weights=external_weights)
    return model, x, to_edge_transform_and_lower(exported, partitioner=[partitioner]).to_executorch()


def test_external_weights_move_the_constants_out_of_the_pte(tmp_path: Path) -> None:
    model, x, program = _program("weights")
    _, _, inline = _program(None)
    weight_bytes = 256 * 256 * 4
    assert len(inline.buffer) > weight_bytes, "inline program should carry the weights"
    assert len(program.buffer) < weight_bytes // 10, f"pte still {len(program.buffer)} bytes"
    program.write_tensor_data_to_file(str(tmp_path))
    ptd = tmp_path / "weights.ptd"
    assert ptd.stat().st_size >= weight_bytes

    buffer = program.buffer
    program = Runtime.get().load_program(buffer, data_path=str(ptd))  # a Method does not keep its Program alive
    method = program.load_method("forward")
    (out,) = method.execute([x])
    error = float((out - model(x)).abs().max())
    assert error <= 1e-4, f"external-weights program differs from eager by {error}"


def test_program_without_its_ptd_fails_to_load_cleanly() -> None:
    _, _, program = _program("weights")
    buffer = program.buffer
    loaded = Runtime.get().load_program(buffer)
    with pytest.raises(Exception):  # noqa: B017 - the binding raises a plain RuntimeError
        loaded.load_method("forward")
