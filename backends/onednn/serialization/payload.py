# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The delegate's graph as the runtime sees it, and its byte encoding (see FORMAT.md)."""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import NamedTuple, TypeVar

import sympy
import torch

from .schema import (
    CHECKSUMMED_FROM,
    FLAG_DYNAMIC,
    FLAG_WEIGHT_CHECKSUMS,
    MAGIC,
    MAX_ATTRIBUTE_COUNT,
    MAX_RANK,
    MAX_STRING_LENGTH,
    MAX_SYMBOLS,
    NO_VALUE,
    VERSION,
    AttributeType,
    DType,
    Layout,
    PostOpKind,
    StepKind,
)
from .shapes import ShapeError, SymDim, at_point, decode, encode, gives_size_one_to_one
from .step_kinds import HOST_INDEX_STEPS

HOST_ONLY_DTYPES = (DType.S64, DType.BOOL)  # oneDNN's CPU primitives take neither
E = TypeVar("E", bound=IntEnum)


class PayloadError(ValueError):
    """A payload that does not follow FORMAT.md."""


@dataclass
class Value:
    dtype: DType
    dims: tuple[int, ...]
    constant_key: str | None = None
    layout: Layout = Layout.NATIVE
    # CRC-32 of the constant's bytes, which init() checks when the program asked for weight checksums.
    constant_checksum: int | None = None

    @property
    def numel(self) -> int:
        return math.prod(self.dims)


class PostOp(NamedTuple):
    """One operation fused after a step's own (FORMAT.md, post-ops): `alg` is an EltwiseAlg or a
    BinaryAlg by `kind`; alpha and beta parametrize an eltwise (0 for a binary)."""

    kind: PostOpKind
    alg: int
    alpha: float
    beta: float


@dataclass
class Step:
    kind: StepKind
    inputs: list[int]
    outputs: list[int]
    ints: dict[str, list[int]] = field(default_factory=dict)
    floats: dict[str, list[float]] = field(default_factory=dict)
    # The debug handles of the FX nodes this step computes (ahead of time only, not serialized):
    # preprocess() maps each step's profiling event to them for the devtools Inspector.
    sources: frozenset[int] = field(default_factory=frozenset, compare=False)

    def post_ops(self) -> list[PostOp]:
        """The post-ops in order, read from the flat pairs ints["post_ops"] (kind, alg) and
        floats["post_op_params"] (alpha, beta)."""
        kinds_and_algs = self.ints.get("post_ops", [])
        params = self.floats.get("post_op_params", [])
        if len(kinds_and_algs) % 2 or len(params) != len(kinds_and_algs):
            raise PayloadError(f"{self.kind.name}: {len(kinds_and_algs)} post-op ints, {len(params)} params")
        return [
            PostOp(PostOpKind(kinds_and_algs[2 * i]), kinds_and_algs[2 * i + 1], params[2 * i], params[2 * i + 1])
            for i in range(len(kinds_and_algs) // 2)
        ]


@dataclass
class Graph:
    values: list[Value] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    # Positions among the delegate call's inputs of arguments that are sizes (SymInts), not tensors.
    size_args: list[int] = field(default_factory=list)
    # Constant tensors by value id; preprocess moves them into the named data store.
    constant_data: dict[int, torch.Tensor] = field(default_factory=dict)

    def add_value(self, dtype: DType, dims: tuple[int, ...]) -> int:
        self.values.append(Value(dtype, tuple(dims)))
        return len(self.values) - 1

    def add_constant(self, tensor: torch.Tensor, dtype: DType) -> int:
        value_id = self.add_value(dtype, tuple(tensor.shape))
        self.constant_data[value_id] = tensor.detach().contiguous()
        return value_id

    def add_step(self, step: Step) -> Step:
        self.steps.append(step)
        return step

    def producers(self) -> dict[int, int]:
        """Value id -> index of the step that produces it."""
        return {out: index for index, step in enumerate(self.steps) for out in step.outputs}

    def remove_absorbed(self, absorbed: Callable[[Step], bool]) -> None:
        """Remove, in order, each step whose work `absorbed` moved elsewhere (it returns True having done
        so); the steps after it see the graph as changed."""
        index = 0
        while index < len(self.steps):
            if absorbed(self.steps[index]):
                del self.steps[index]
            else:
                index += 1

    def rename_reads(self, old: int, new: int, steps: list[Step] | None = None) -> None:
        """Make the steps (all by default) that read value `old` read `new` instead."""
        for step in self.steps if steps is None else steps:
            step.inputs = [new if value_id == old else value_id for value_id in step.inputs]

    def consumers(self) -> dict[int, list[int]]:
        """Value id -> indices of the steps that read it (a step reading twice appears twice)."""
        users: dict[int, list[int]] = {}
        for index, step in enumerate(self.steps):
            for value_id in step.inputs:
                if value_id != NO_VALUE:
                    users.setdefault(value_id, []).append(index)
        return users


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def u8(self, v: int) -> None:
        self.parts.append(struct.pack("<B", v))

    def u16(self, v: int) -> None:
        self.parts.append(struct.pack("<H", v))

    def u32(self, v: int) -> None:
        self.parts.append(struct.pack("<I", v))

    def u32s(self, vs: list[int]) -> None:
        self.u32(len(vs))
        self.parts.append(struct.pack(f"<{len(vs)}I", *vs))

    def string(self, s: str) -> None:
        if not (s.isascii() and s.isprintable()):
            raise PayloadError(f"string {s!r} is not printable ASCII")
        data = s.encode()
        if len(data) > MAX_STRING_LENGTH:
            raise PayloadError(f"string of {len(data)} bytes exceeds {MAX_STRING_LENGTH}")
        self.u32(len(data))
        self.parts.append(data)

    def raw(self, data: bytes) -> None:
        self.parts.append(data)


def symbolic_attributes(graph: Graph) -> list[tuple[int, str, int, SymDim]]:
    """(step index, attribute, entry, value) of every i64 attribute entry that depends on a size."""
    return [
        (index, name, entry, value)
        for index, step in enumerate(graph.steps)
        for name, data in step.ints.items()
        for entry, value in enumerate(data)
        if isinstance(value, SymDim)
    ]


def symbols_of(graph: Graph) -> dict[sympy.Symbol, tuple[int, int]]:
    """The dynamic sizes the graph's dims and attributes depend on, by name, with their (min, max)."""
    bounds: dict[sympy.Symbol, tuple[int, int]] = {}
    for value in graph.values:
        for dim in value.dims:
            if isinstance(dim, SymDim):
                bounds.update(dim.bounds)
    for *_, attribute in symbolic_attributes(graph):
        bounds.update(attribute.bounds)
    return dict(sorted(bounds.items(), key=lambda item: item[0].name))


def _code(expr: sympy.Expr, symbols: list[sympy.Symbol]) -> list[int]:
    try:
        return encode(expr, symbols)
    except ShapeError as error:
        raise PayloadError(str(error)) from None


def _write_dynamic_shapes(body: _Writer, graph: Graph, bounds: dict[sympy.Symbol, tuple[int, int]]) -> None:
    if len(bounds) > MAX_SYMBOLS:
        raise PayloadError(f"{len(bounds)} dynamic sizes exceed {MAX_SYMBOLS}")
    symbols = list(bounds)
    body.u32(len(symbols))
    for low, high in bounds.values():
        body.raw(struct.pack("<qq", low, high))
    entries = [
        (value_id, index, dim.expr)
        for value_id, value in enumerate(graph.values)
        for index, dim in enumerate(value.dims)
        if isinstance(dim, SymDim)
    ]
    for symbol, symbol_bounds in bounds.items():
        if not any(
            gives_size_one_to_one(graph.values[value_id].dims[index].expr, symbol, symbol_bounds)
            for value_id, index, _ in entries
            if value_id in graph.inputs
        ):
            raise PayloadError(f"dynamic size {symbol}: no input dim gives it one to one (the runtime reads it there)")
    body.u32(len(entries))
    for value_id, index, expr in entries:
        code = _code(expr, symbols)
        body.raw(struct.pack("<III", value_id, index, len(code)))
        body.raw(struct.pack(f"<{len(code)}q", *code))
    body.u32s(graph.size_args)
    attributes = symbolic_attributes(graph)
    body.u32(len(attributes))
    for step_index, name, entry, value in attributes:
        code = _code(value.expr, symbols)
        body.u32(step_index)
        body.string(name)
        body.raw(struct.pack(f"<II{len(code)}q", entry, len(code), *code))


def serialize(graph: Graph) -> bytes:
    bounds = symbols_of(graph)
    if graph.size_args and not bounds:
        raise PayloadError("size arguments in a graph without dynamic dims")
    upper = {symbol: high for symbol, (_, high) in bounds.items()}
    constants = [value for value in graph.values if value.constant_key is not None]
    weight_checksums = any(value.constant_checksum is not None for value in constants)
    if weight_checksums and any(value.constant_checksum is None for value in constants):
        raise PayloadError("either every constant carries a checksum or none does")
    body = _Writer()
    body.raw(struct.pack(f"<{len(graph.inputs)}I", *graph.inputs))
    body.raw(struct.pack(f"<{len(graph.outputs)}I", *graph.outputs))
    for value in graph.values:
        if len(value.dims) > MAX_RANK:
            raise PayloadError(f"rank {len(value.dims)} exceeds {MAX_RANK}")
        body.u8(int(value.dtype))
        body.u8(1 if value.constant_key is not None else 0)
        body.u8(int(value.layout))
        body.u8(0)
        body.u32(len(value.dims))
        body.raw(struct.pack(f"<{len(value.dims)}q", *(at_point(dim, upper) for dim in value.dims)))
        if value.constant_key is not None:
            body.string(value.constant_key)
            if weight_checksums:
                body.u32(value.constant_checksum)
    for step in graph.steps:
        if step.kind not in HOST_INDEX_STEPS and any(
            value_id != NO_VALUE and graph.values[value_id].dtype in HOST_ONLY_DTYPES
            for value_id in (*step.inputs, *step.outputs)
        ):
            raise PayloadError(f"{step.kind.name} step touches an int64/bool value: only host index steps may")
        body.u32(int(step.kind))
        body.u32s(step.inputs)
        body.u32s(step.outputs)
        body.u32(len(step.ints) + len(step.floats))
        for attrs, code, fmt in ((step.ints, AttributeType.I64_LIST, "q"), (step.floats, AttributeType.F64_LIST, "d")):
            for name, data in attrs.items():
                if len(data) > MAX_ATTRIBUTE_COUNT:
                    raise PayloadError(f"attribute {name} has {len(data)} entries")
                body.string(name)
                body.u8(code)
                body.u32(len(data))
                stored = [at_point(v, upper) for v in data] if code == AttributeType.I64_LIST else data
                body.raw(struct.pack(f"<{len(data)}{fmt}", *stored))
    if bounds:
        _write_dynamic_shapes(body, graph, bounds)
    counts = (len(graph.values), len(graph.steps), len(graph.inputs), len(graph.outputs))
    flags = (FLAG_DYNAMIC if bounds else 0) | (FLAG_WEIGHT_CHECKSUMS if weight_checksums else 0)
    checksummed = struct.pack("<5I", flags, *counts) + b"".join(body.parts)
    header = MAGIC + struct.pack("<IQI", VERSION, CHECKSUMMED_FROM + len(checksummed), zlib.crc32(checksummed))
    return header + checksummed


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.offset = 0

    def take(self, fmt: str) -> tuple:
        size = struct.calcsize(fmt)
        if self.offset + size > len(self.data):
            raise PayloadError(f"truncated payload: need {size} bytes at offset {self.offset}")
        out = struct.unpack_from(fmt, self.data, self.offset)
        self.offset += size
        return out

    def u32s(self) -> list[int]:
        (count,) = self.take("<I")
        return list(self.take(f"<{count}I"))

    def string(self) -> str:
        (length,) = self.take("<I")
        if length > MAX_STRING_LENGTH:
            raise PayloadError(f"string of {length} bytes at offset {self.offset}")
        end = self.offset + length
        if end > len(self.data):
            raise PayloadError("truncated string")
        raw = self.data[self.offset : end]
        if not all(0x20 <= byte < 0x7F for byte in raw):
            raise PayloadError(f"string at offset {self.offset} is not printable ASCII")
        text = raw.decode()
        self.offset = end
        return text


def _enum(enum: type[E], code: int) -> E:
    try:
        return enum(code)
    except ValueError:
        raise PayloadError(f"unknown {enum.__name__} {code}") from None


def _read_dynamic_shapes(reader: _Reader, graph: Graph) -> None:
    """Dynamic dims come back as SymDims over symbols named s0, s1, ... at their maximum."""
    (count,) = reader.take("<I")
    symbols = [sympy.Symbol(f"s{index}", integer=True, positive=True) for index in range(count)]
    bounds = {symbol: reader.take("<qq") for symbol in symbols}
    (entries,) = reader.take("<I")
    for _ in range(entries):
        value_id, index, length = reader.take("<III")
        expr = decode(list(reader.take(f"<{length}q")), symbols)
        dims = list(graph.values[value_id].dims)
        dims[index] = SymDim(dims[index], expr, {s: bounds[s] for s in expr.free_symbols})
        graph.values[value_id].dims = tuple(dims)
    graph.size_args = reader.u32s()
    (attributes,) = reader.take("<I")
    for _ in range(attributes):
        (step_index,) = reader.take("<I")
        name = reader.string()
        entry, length = reader.take("<II")
        expr = decode(list(reader.take(f"<{length}q")), symbols)
        data = graph.steps[step_index].ints[name]
        data[entry] = SymDim(data[entry], expr, {s: bounds[s] for s in expr.free_symbols})


def deserialize(data: bytes) -> Graph:
    """Parse a payload back into a Graph (without constant data); for tests and tooling."""
    reader = _Reader(data)
    (magic,) = reader.take("<4s")
    if magic != MAGIC:
        raise PayloadError(f"bad magic {magic!r}")
    version, total, checksum = reader.take("<IQI")
    if version != VERSION:
        raise PayloadError(f"unsupported payload version {version} (this reader knows {VERSION}: export it again)")
    if total != len(data):
        raise PayloadError(f"payload says {total} bytes, got {len(data)}")
    if zlib.crc32(data[CHECKSUMMED_FROM:]) != checksum:
        raise PayloadError("checksum mismatch: the payload is damaged")
    flags, n_values, n_steps, n_inputs, n_outputs = reader.take("<5I")
    if flags & ~(FLAG_DYNAMIC | FLAG_WEIGHT_CHECKSUMS):
        raise PayloadError(f"unknown header flags {flags:#x}")
    graph = Graph()
    graph.inputs = list(reader.take(f"<{n_inputs}I"))
    graph.outputs = list(reader.take(f"<{n_outputs}I"))
    for _ in range(n_values):
        dtype, is_constant, layout, _reserved, rank = reader.take("<BBBBI")
        if rank > MAX_RANK:
            raise PayloadError(f"rank {rank} exceeds {MAX_RANK}")
        dims = reader.take(f"<{rank}q")
        key = reader.string() if is_constant else None
        checksum = reader.take("<I")[0] if is_constant and flags & FLAG_WEIGHT_CHECKSUMS else None
        graph.values.append(Value(_enum(DType, dtype), tuple(dims), key, _enum(Layout, layout), checksum))
    for _ in range(n_steps):
        (kind,) = reader.take("<I")
        step = Step(_enum(StepKind, kind), reader.u32s(), reader.u32s())
        (n_attrs,) = reader.take("<I")
        for _ in range(n_attrs):
            name = reader.string()
            code, count = reader.take("<BI")
            if code == AttributeType.I64_LIST:
                step.ints[name] = list(reader.take(f"<{count}q"))
            elif code == AttributeType.F64_LIST:
                step.floats[name] = list(reader.take(f"<{count}d"))
            else:
                raise PayloadError(f"attribute {name} has unknown type {code}")
        graph.steps.append(step)
    if flags & FLAG_DYNAMIC:
        _read_dynamic_shapes(reader, graph)
    if reader.offset != len(data):
        raise PayloadError(f"{len(data) - reader.offset} trailing bytes")
    for value_id in graph.inputs + graph.outputs:
        if value_id >= n_values:
            raise PayloadError(f"graph input/output refers to value {value_id} of {n_values}")
    return graph
