# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The runtime inside ExecuTorch: registration, refusal of corrupt payloads, refusal of wrong inputs.

Everything that could crash runs in the worker process, so a segfault fails the test instead of pytest.
"""

from __future__ import annotations

import os
import struct
import tempfile

import pytest
import torch
from tester import RuntimeCrashed, execute, in_worker, lower
from torch import nn

MAGIC = b"ODNN"


def small_program() -> tuple[bytes, torch.Tensor, bytes]:
    """(.pte bytes, an input, the delegate payload) of a conv -> relu -> linear model."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 5))
    x = torch.randn(1, 3, 6, 6)
    lowered = lower(model, (x,))
    assert lowered.delegate_calls == 1, lowered.describe()
    return lowered.buffer, x, lowered.lowered_modules[0].processed_bytes


def payload_offset(buffer: bytes, payload: bytes) -> int:
    offset = buffer.find(MAGIC)
    assert offset >= 0 and buffer.count(MAGIC) == 1, "expected exactly one ODNN payload in the .pte"
    assert buffer[offset : offset + len(payload)] == payload, "the bytes at ODNN are not the delegate payload"
    return offset


def test_backend_is_registered_after_import() -> None:
    import executorch.backends.onednn  # noqa: F401
    from executorch.runtime import Runtime

    names = Runtime.get().backend_registry.registered_backend_names
    assert "OneDnnBackend" in names, f"registered backends: {names}"
    assert Runtime.get().backend_registry.is_available("OneDnnBackend")


def test_untouched_program_loads_and_runs() -> None:
    buffer, x, _ = small_program()
    (out,) = execute(buffer, [x])
    assert out.shape == (1, 5)


def _patch(buffer: bytes, offset: int, fmt: str, value: int) -> bytes:
    patched = bytearray(buffer)
    struct.pack_into(fmt, patched, offset, value)
    return bytes(patched)


# Header fields of FORMAT.md: (name, offset in the payload, struct format, bad value).
CORRUPTIONS = [
    ("magic", 0, "<I", int.from_bytes(b"ODNX", "little")),
    ("version", 4, "<I", 99),
    ("total_size_short", 8, "<Q", 16),
    ("total_size_huge", 8, "<Q", 1 << 40),
    ("checksum", 16, "<I", 0),
    ("flags_unknown", 20, "<I", 0x80),
    ("num_values_huge", 24, "<I", 0xFFFFFFFF),
    ("num_steps_huge", 28, "<I", 0x7FFFFFFF),
    ("num_inputs_zero", 32, "<I", 0),
    ("num_outputs_huge", 36, "<I", 0xFFFFFF),
]


@pytest.mark.parametrize(("field", "at", "fmt", "value"), CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS])
def test_corrupt_payload_header_fails_load_method_with_an_exception(field: str, at: int, fmt: str, value: int) -> None:
    buffer, x, payload = small_program()
    corrupt = _patch(buffer, payload_offset(buffer, payload) + at, fmt, value)
    try:
        execute(corrupt, [x])
    except RuntimeCrashed as crash:
        pytest.fail(f"payload with a bad {field} crashed the process: {crash}")
    except Exception:  # the runtime reported an error: the exact type is ExecuTorch's
        return
    pytest.fail(f"a payload with a bad {field} loaded and ran")


def _load_and_run_mutants(buffer: bytes, offset: int, length: int, x: torch.Tensor, progress_path: str) -> list[str]:
    """Set each payload byte to 0x00 and to 0xFF in turn; load and run each mutant. Returns what loaded."""
    from executorch.runtime import Runtime

    runtime = Runtime.get()
    loaded = []
    for position in range(offset, offset + length):
        for value in (0x00, 0xFF):
            if buffer[position] == value:
                continue
            with open(progress_path, "w") as progress:
                progress.write(f"{position - offset} {value:#x}")
            mutant = bytearray(buffer)
            mutant[position] = value
            mutant_bytes = bytes(mutant)
            try:
                program = runtime.load_program(mutant_bytes)  # a Method does not keep its Program alive
                method = program.load_method("forward")
                method.execute([x])
                loaded.append(f"{position - offset}={value:#x}")
            except Exception:  # refusing the mutant is a right outcome
                continue
    return loaded


def test_every_corrupted_payload_byte_is_refused() -> None:
    """Every byte of the payload set to 0x00 and 0xFF: no mutant crashes the process, and none runs (the
    header's fields are checked exactly and the CRC-32 covers the rest)."""
    buffer, x, payload = small_program()
    offset = payload_offset(buffer, payload)
    with tempfile.TemporaryDirectory() as folder:
        progress = os.path.join(folder, "progress")
        try:
            loaded = in_worker(_load_and_run_mutants, buffer, offset, len(payload), x, progress, timeout=240)
        except RuntimeCrashed as crash:
            with open(progress) as f:
                where = f.read()
            pytest.fail(f"payload byte {where.split()[0]} set to {where.split()[1]} crashed the process: {crash}")
    assert loaded == [], f"mutants that loaded and ran: {loaded}"


@pytest.mark.parametrize(
    "bad_input",
    [
        pytest.param(lambda: torch.randn(1, 3, 7, 7), id="larger_spatial_dims"),
        pytest.param(lambda: torch.randn(2, 3, 6, 6), id="larger_batch"),
        pytest.param(lambda: torch.randn(1, 3, 5, 5), id="smaller_spatial_dims"),
        pytest.param(lambda: torch.randn(3, 6, 6), id="lower_rank"),
        pytest.param(lambda: torch.randn(1, 3, 6, 6, dtype=torch.float64), id="float64"),
        pytest.param(lambda: torch.ones(1, 3, 6, 6, dtype=torch.int32), id="int32"),
        pytest.param(lambda: torch.randn(1, 3, 6, 6).to(torch.bfloat16), id="bfloat16"),
    ],
)
def test_wrong_input_raises_instead_of_running(bad_input: object) -> None:
    buffer, _, _ = small_program()
    tensor = bad_input()  # type: ignore[operator]
    try:
        outputs = execute(buffer, [tensor])
    except RuntimeCrashed as crash:
        pytest.fail(f"input {tensor.dtype}{list(tensor.shape)} crashed the process: {crash}")
    except Exception:  # refused, as it should be
        return
    pytest.fail(f"input {tensor.dtype}{list(tensor.shape)} ran and gave {[tuple(o.shape) for o in outputs]}")


def test_wrong_number_of_inputs_raises() -> None:
    buffer, x, _ = small_program()
    with pytest.raises(Exception) as error:
        execute(buffer, [x, x])
    assert not isinstance(error.value, RuntimeCrashed), f"two inputs crashed the process: {error.value}"
