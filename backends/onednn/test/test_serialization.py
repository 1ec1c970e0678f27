# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The payload format (FORMAT.md): round trips, rejection of malformed bytes, constants kept out of the blob."""

from __future__ import annotations

import struct
import zlib

import pytest
import torch
from executorch.backends.onednn.serialization.payload import Graph, PayloadError, Step, Value, deserialize, serialize
from executorch.backends.onednn.serialization.schema import (
    CHECKSUMMED_FROM,
    FLAG_WEIGHT_CHECKSUMS,
    HEADER_SIZE,
    MAGIC,
    NO_VALUE,
    VERSION,
    DType,
    Layout,
    StepKind,
)
from executorch.exir._serialize._program import deserialize_pte_binary
from tester import lower
from torch import nn


def small_graph() -> Graph:
    """conv(x, w, -) -> relu, with every record type FORMAT.md has: constant, NO_VALUE, i64 and f64 attrs."""
    graph = Graph()
    x = graph.add_value(DType.F32, (1, 2, 4, 4))
    w = graph.add_value(DType.F32, (3, 2, 1, 1))
    graph.values[w].constant_key = "weights"
    y = graph.add_value(DType.F32, (1, 3, 4, 4))
    graph.values[y].layout = Layout.PLAIN
    z = graph.add_value(DType.F32, (1, 3, 4, 4))
    ints = {"strides": [1, 1], "padding_l": [0, 0], "padding_r": [0, 0], "dilation": [1, 1], "groups": [1]}
    graph.add_step(Step(StepKind.CONVOLUTION, [x, w, NO_VALUE], [y], ints))
    graph.add_step(Step(StepKind.ELTWISE, [y], [z], {"alg": [0]}, {"alpha": [0.25], "beta": [-1.5]}))
    graph.inputs, graph.outputs = [x], [z]
    return graph


def lowered_payload(model: nn.Module, *inputs: torch.Tensor) -> bytes:
    lowered = lower(model, inputs)
    assert len(lowered.lowered_modules) == 1, lowered.describe()
    return lowered.lowered_modules[0].processed_bytes


def assert_same_graph(a: Graph, b: Graph) -> None:
    assert a.inputs == b.inputs and a.outputs == b.outputs
    assert [(v.dtype, v.dims, v.constant_key, v.layout) for v in a.values] == [
        (v.dtype, v.dims, v.constant_key, v.layout) for v in b.values
    ]
    assert [(s.kind, s.inputs, s.outputs, s.ints, s.floats) for s in a.steps] == [
        (s.kind, s.inputs, s.outputs, s.ints, s.floats) for s in b.steps
    ]


def resealed(data: bytearray) -> bytes:
    """`data` with its checksum recomputed: the parser's later checks see the corruption."""
    struct.pack_into("<I", data, CHECKSUMMED_FROM - 4, zlib.crc32(data[CHECKSUMMED_FROM:]))
    return bytes(data)


def test_hand_built_graph_round_trips() -> None:
    graph = small_graph()
    data = serialize(graph)
    assert data[:4] == MAGIC and struct.unpack_from("<IQ", data, 4) == (VERSION, len(data))
    assert_same_graph(deserialize(data), graph)


def test_weight_checksums_round_trip_behind_their_flag() -> None:
    graph = small_graph()
    plain = serialize(graph)
    graph.values[1].constant_checksum = 0xDEADBEEF
    data = serialize(graph)
    (flags,) = struct.unpack_from("<I", data, CHECKSUMMED_FROM)
    assert flags & FLAG_WEIGHT_CHECKSUMS and len(data) == len(plain) + 4
    assert [v.constant_checksum for v in deserialize(data).values] == [None, 0xDEADBEEF, None, None]


def test_weight_checksums_are_all_or_none() -> None:
    graph = small_graph()
    w2 = graph.add_value(DType.F32, (3,))
    graph.values[w2].constant_key = "bias"
    graph.values[1].constant_checksum = 1
    with pytest.raises(PayloadError, match="every constant"):
        serialize(graph)


def test_lowered_graph_round_trips_byte_for_byte() -> None:
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(128, 4)
    )
    data = lowered_payload(model.eval(), torch.randn(1, 3, 8, 8))
    graph = deserialize(data)
    assert serialize(graph) == data, "serialize(deserialize(payload)) differs from the payload"
    kinds = [s.kind for s in graph.steps]
    assert StepKind.CONVOLUTION in kinds and StepKind.MATMUL in kinds and StepKind.POOLING in kinds, kinds


def test_bad_magic_is_rejected() -> None:
    data = bytearray(serialize(small_graph()))
    data[:4] = b"ODNX"
    with pytest.raises(PayloadError, match="magic"):
        deserialize(bytes(data))


def test_a_changed_byte_is_caught_by_the_checksum() -> None:
    data = serialize(small_graph())
    for offset in range(CHECKSUMMED_FROM - 4, len(data)):
        corrupt = bytearray(data)
        corrupt[offset] ^= 0x01
        with pytest.raises(PayloadError, match="checksum"):
            deserialize(bytes(corrupt))


@pytest.mark.parametrize("flags", [4, 0x80000000])
def test_unknown_header_flags_are_rejected(flags: int) -> None:
    data = bytearray(serialize(small_graph()))
    struct.pack_into("<I", data, CHECKSUMMED_FROM, flags)
    with pytest.raises(PayloadError, match="flags"):
        deserialize(resealed(data))


@pytest.mark.parametrize("version", [0, 1, 2, VERSION + 1, 0xFFFFFFFF])
def test_unknown_version_is_rejected(version: int) -> None:
    data = bytearray(serialize(small_graph()))
    struct.pack_into("<I", data, 4, version)
    with pytest.raises(PayloadError, match="version"):
        deserialize(bytes(data))


def test_every_truncation_is_rejected() -> None:
    data = serialize(small_graph())
    for length in range(len(data)):
        with pytest.raises(PayloadError):
            deserialize(data[:length])


def test_every_truncation_is_rejected_even_when_total_size_agrees() -> None:
    """The header's size and checksum patched to match: the body's own bounds checks must catch the cut."""
    data = serialize(small_graph())
    for length in range(HEADER_SIZE, len(data)):
        cut = bytearray(data[:length])
        struct.pack_into("<Q", cut, 8, length)
        with pytest.raises(PayloadError, match="truncated"):
            deserialize(resealed(cut))


def test_trailing_bytes_are_rejected() -> None:
    data = bytearray(serialize(small_graph()) + b"\0\0\0\0")
    struct.pack_into("<Q", data, 8, len(data))
    with pytest.raises(PayloadError, match="trailing"):
        deserialize(resealed(data))


def test_corrupt_bytes_raise_payload_error_or_parse() -> None:
    """Any single corrupted byte gives a PayloadError or a graph, never another exception."""
    data = serialize(small_graph())
    for offset in range(len(data)):
        for value in (0x00, 0xFF, data[offset] ^ 0x80):
            corrupt = bytearray(data)
            corrupt[offset] = value
            try:
                deserialize(bytes(corrupt))
            except PayloadError:
                pass
            except Exception as error:  # any other type is the bug this test is after
                pytest.fail(f"byte {offset} set to {value:#x}: {type(error).__name__}: {error}")


def test_unknown_layout_code_is_rejected() -> None:
    data = bytearray(serialize(small_graph()))
    first_value = HEADER_SIZE + 4 * 2  # after one input and one output id
    assert data[first_value + 2] == Layout.NATIVE
    data[first_value + 2] = len(Layout)
    with pytest.raises(PayloadError, match="unknown Layout"):
        deserialize(resealed(data))


def test_step_referring_to_a_missing_value_is_rejected() -> None:
    graph = small_graph()
    graph.outputs = [len(graph.values) + 5]
    with pytest.raises(PayloadError, match="refers to value"):
        deserialize(serialize(graph))


def test_rank_above_six_is_refused_by_serialize() -> None:
    graph = Graph(values=[Value(DType.F32, (1,) * 7)])
    with pytest.raises(PayloadError, match="rank"):
        serialize(graph)


@pytest.mark.parametrize("dtype", [DType.S64, DType.BOOL])
def test_int64_and_bool_values_only_reach_host_index_steps(dtype: DType) -> None:
    """oneDNN has neither type: serialize refuses, as the runtime would, a primitive step touching one."""
    graph = Graph()
    indices = graph.add_value(dtype, (4,))
    copy = graph.add_value(dtype, (4,))
    graph.add_step(Step(StepKind.RESHAPE, [indices], [copy]))
    graph.inputs, graph.outputs = [indices], [copy]
    with pytest.raises(PayloadError, match="RESHAPE step touches an int64/bool value"):
        serialize(graph)


def test_constants_go_to_named_data_not_into_the_delegate_blob() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 64)).eval()
    weights = [p.detach().contiguous() for p in model.parameters()]
    weight_bytes = sum(w.numel() * w.element_size() for w in weights)
    lowered = lower(model, (torch.randn(4, 128),))

    blob = lowered.lowered_modules[0].processed_bytes
    assert len(blob) < 4096 and len(blob) * 50 < weight_bytes, f"payload {len(blob)} B for {weight_bytes} B of weights"
    graph = deserialize(blob)
    keys = {v.constant_key for v in graph.values if v.constant_key is not None}
    assert len(keys) == len(weights), f"{len(keys)} constant keys for {len(weights)} parameters"

    pte = deserialize_pte_binary(lowered.buffer)
    delegate_blobs = [d.data for d in pte.program.backend_delegate_data]
    assert delegate_blobs == [blob], "the .pte's delegate data is not the payload"
    assert pte.named_data is not None, "the .pte has no named data segment"
    stored = {key: bytes(pte.named_data.buffers[entry.buffer_index]) for key, entry in pte.named_data.pte_data.items()}
    assert keys <= set(stored), f"payload keys missing from the .pte's named data: {keys - set(stored)}"
    for w in weights:
        raw = w.numpy().tobytes()
        assert raw in stored.values(), f"parameter of shape {tuple(w.shape)} not stored verbatim in named data"
        assert raw not in blob


def test_identical_constants_are_stored_once() -> None:
    torch.manual_seed(0)
    first, second = nn.Linear(64, 64), nn.Linear(64, 64)
    second.load_state_dict(first.state_dict())
    lowered = lower(nn.Sequential(first, nn.ReLU(), second).eval(), (torch.randn(2, 64),))
    pte = deserialize_pte_binary(lowered.buffer)
    assert pte.named_data is not None
    assert len(pte.named_data.pte_data) == 2, f"expected weight + bias once each, got {len(pte.named_data.pte_data)}"
