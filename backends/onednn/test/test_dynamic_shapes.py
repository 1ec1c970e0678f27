# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Programs exported with torch.export.Dim: one payload runs at every size within the exported range."""

from __future__ import annotations

import math

import pytest
import sympy
import torch
from executorch.backends.onednn import OneDnnPartitioner
from executorch.backends.onednn.serialization.payload import Graph, PayloadError, Step, deserialize, serialize
from executorch.backends.onednn.serialization.schema import (
    CHECKSUMMED_FROM,
    FLAG_DYNAMIC,
    HEADER_SIZE,
    DType,
    StepKind,
)
from executorch.backends.onednn.serialization.shapes import (
    ShapeError,
    SymDim,
    decode,
    encode,
    largest,
    same,
    smallest,
)
from support import SIZE_ARITHMETIC_OPS
from tester import execute_each, lower, mismatch
from torch import nn
from torch.export import Dim
from torch.nn import functional as F
from torch.utils._sympy.functions import FloorDiv

S, T = sympy.symbols("s t", integer=True, positive=True)


# --- dims that carry their expression -------------------------------------------------------------------
def test_arithmetic_on_dims_keeps_the_expression() -> None:
    s = SymDim(12, S, {S: (1, 12)})
    flat = s * 3 + 1
    assert isinstance(flat, SymDim) and int(flat) == 37 and flat.expr == 3 * S + 1
    half = (s * 4) // 2
    assert int(half) == 24 and sympy.simplify(half.expr - 2 * S) == 0
    assert int(math.prod((2, s, 5))) == 120 and math.prod((2, s, 5)).expr == 10 * S
    assert s - s == 0 and not isinstance(s - s, SymDim)  # a constant again
    assert (s + 0) == s and hash(s) == hash(12)
    # Comparisons at every size, not only at the maximum where the ints are taken.
    assert same(s * 2, s + s) and not same(s, 12) and same(7, 7)
    clipped = smallest(s, 10)
    assert int(clipped) == 10 and int(clipped.expr.subs(S, 4)) == 4
    assert largest(3, 5) == 5 and not isinstance(largest(3, 5), SymDim)


def test_dims_are_compared_and_clamped_at_every_size_of_the_range() -> None:
    """A padded width (to a multiple of 8) is at least 8, so a slice clamped to it keeps a short expression,
    and a window count times the window is the padded width again: facts sympy cannot see."""
    s = SymDim(16, S, {S: (1, 16)})
    padded = s + (8 - s % 8) % 8
    assert smallest(padded, 8) == 8 and not isinstance(smallest(padded, 8), SymDim)
    assert largest(padded - 8, 0) is not None and same(largest(padded - 8, 0), padded - 8)
    assert same((padded // 8) * 8, padded) and not same(padded, s)
    windows = padded // (padded // 8)  # 8 at every size: a plain int
    assert windows == 8 and not isinstance(windows, SymDim)


def test_an_input_dim_must_give_each_size_one_to_one() -> None:
    """8 * ((s + 7) // 8) is 8 for s = 1..8: the runtime could not tell s from it."""
    s = SymDim(16, S, {S: (1, 16)})
    graph = Graph()
    x = graph.add_value(DType.F32, (s + (8 - s % 8) % 8, 8))
    y = graph.add_value(DType.F32, (s + (8 - s % 8) % 8, 8))
    graph.inputs, graph.outputs = [x], [y]
    graph.add_step(Step(StepKind.ELTWISE, [x], [y], {"alg": [0]}, {"alpha": [0.0], "beta": [0.0]}))
    with pytest.raises(PayloadError, match="no input dim gives it one to one"):
        serialize(graph)
    z = graph.add_value(DType.F32, (s * 2 + 1, 8))  # another input that gives s
    graph.inputs.append(z)
    assert deserialize(serialize(graph)).inputs == [x, z]


@pytest.mark.parametrize(
    "expr",
    [S, 3 * S + 1, S * T, FloorDiv(S * 3, 2), sympy.Mod(S, 4), sympy.Max(S, T), sympy.Min(S, 8), S**2],
    ids=["symbol", "affine", "product", "floordiv", "mod", "max", "min", "square"],
)
def test_expressions_round_trip_through_their_code(expr: sympy.Expr) -> None:
    code = encode(expr, [S, T])
    decoded = decode(code, [S, T])
    for point in ({S: 1, T: 1}, {S: 7, T: 3}, {S: 40, T: 9}):
        assert int(decoded.subs(point)) == int(expr.subs(point)), (expr, point)


def test_an_expression_without_encoding_is_refused() -> None:
    with pytest.raises(ShapeError, match="no payload encoding"):
        encode(sympy.sqrt(S), [S])


def _dynamic_graph() -> Graph:
    """x [s, 8] -> relu -> reshape [2s, 4], and its last row (offset s - 1), s in [1, 16]."""
    s = SymDim(16, S, {S: (1, 16)})
    graph = Graph()
    x = graph.add_value(DType.F32, (s, 8))
    relu = graph.add_value(DType.F32, (s, 8))
    out = graph.add_value(DType.F32, (s * 2, 4))
    last = graph.add_value(DType.F32, (1, 8))
    graph.inputs, graph.outputs = [x], [out, last]
    graph.size_args = [1]
    graph.add_step(Step(StepKind.ELTWISE, [x], [relu], {"alg": [0]}, {"alpha": [0.0], "beta": [0.0]}))
    graph.add_step(Step(StepKind.RESHAPE, [relu], [out]))
    graph.add_step(Step(StepKind.REORDER, [relu], [last], {"offsets": [s - 1, 0]}))
    return graph


def test_dynamic_payload_is_flagged_and_round_trips() -> None:
    graph = _dynamic_graph()
    data = serialize(graph)
    assert int.from_bytes(data[CHECKSUMMED_FROM : CHECKSUMMED_FROM + 4], "little") == FLAG_DYNAMIC
    back = deserialize(data)
    assert back.size_args == [1]
    (s0,) = {
        symbol
        for value in back.values
        for dim in value.dims
        if isinstance(dim, SymDim)
        for symbol in dim.expr.free_symbols
    }
    assert [tuple(int(d) for d in value.dims) for value in back.values] == [(16, 8), (16, 8), (32, 4), (1, 8)]
    assert back.values[2].dims[0].expr == 2 * s0 and back.values[2].dims[0].bounds[s0] == (1, 16)
    offset = back.steps[2].ints["offsets"][0]
    assert isinstance(offset, SymDim) and int(offset) == 15 and offset.expr == s0 - 1


def test_static_payload_has_no_dynamic_section() -> None:
    graph = Graph()
    graph.add_value(DType.F32, (4, 8))
    data = serialize(graph)
    assert int.from_bytes(data[CHECKSUMMED_FROM : CHECKSUMMED_FROM + 4], "little") == 0
    assert len(data) == HEADER_SIZE + 8 + 2 * 8  # the header and one value record: no dynamic section


# --- end to end: export with Dim, lower, run at several sizes -------------------------------------------
def run_at_sizes(
    model: nn.Module,
    example: tuple[torch.Tensor, ...],
    dynamic_shapes: object,
    input_sets: list[tuple[torch.Tensor, ...]],
    partitioner: OneDnnPartitioner | None = None,
    tolerance: float = 1e-5,
    left_outside: frozenset[str] = frozenset(),
) -> list[str]:
    """Lowers once, runs every input set on one loaded method and returns what failed (empty: all
    matched eager); the program must be one delegate call with no compute left outside but
    `left_outside`."""
    lowered = lower(model, example, partitioner, dynamic_shapes=dynamic_shapes)
    outside = set(lowered.undelegated_compute)
    assert lowered.delegate_calls == 1 and outside <= left_outside, lowered.describe()
    failures = []
    for inputs, result in zip(input_sets, execute_each(lowered.buffer, input_sets)):
        shape = tuple(inputs[0].shape)
        if isinstance(result, str):
            failures.append(f"{shape}: {result}")
            continue
        with torch.no_grad():
            expected = model(*inputs)
        problem = mismatch(str(shape), result, [expected], tolerance)
        if problem:
            failures.append(problem)
    return failures


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


def test_encoder_runs_at_every_length_including_both_bounds() -> None:
    torch.manual_seed(0)
    lengths = [1, 128, 7, 64, 1, 33, 128]  # both bounds, odd lengths, and sizes met again
    failures = run_at_sizes(
        Encoder().eval(),
        (torch.randn(2, 16, 64),),
        ({1: Dim("seq", min=1, max=128)},),
        [(torch.randn(2, n, 64),) for n in lengths],
    )
    assert not failures, failures


def test_bf16_encoder_runs_at_every_length() -> None:
    torch.manual_seed(1)
    failures = run_at_sizes(
        Encoder().eval(),
        (torch.randn(2, 16, 64),),
        ({1: Dim("seq", min=1, max=64)},),
        [(torch.randn(2, n, 64),) for n in (1, 64, 9)],
        OneDnnPartitioner(precision="bf16"),
        tolerance=5e-2,
    )
    assert not failures, failures


class Convolutions(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.pool(self.conv(x).relu()).flatten(1))


def test_dynamic_batch_of_a_convolutional_network() -> None:
    torch.manual_seed(2)
    failures = run_at_sizes(
        Convolutions().eval(),
        (torch.randn(2, 3, 16, 16),),
        ({0: Dim("batch", min=1, max=8)},),
        [(torch.randn(n, 3, 16, 16),) for n in (1, 8, 3)],
    )
    assert not failures, failures


def test_sizes_outside_the_range_are_refused_and_the_method_stays_usable() -> None:
    # (A minimum of 1 or 2 both reach the delegate as 2, and size 1 is then accepted when the program
    # lowers the same at 1: see concrete_dims.)
    lowered = lower(Convolutions().eval(), (torch.randn(4, 3, 8, 8),), dynamic_shapes=({0: Dim("b", min=3, max=6)},))
    inputs = [(torch.randn(n, 3, 8, 8),) for n in (2, 7, 3)]
    below, above, inside = execute_each(lowered.buffer, inputs)
    # Below the minimum: the delegate refuses (InvalidArgument); above the maximum ExecuTorch refuses
    # to resize the input first (its planned memory holds the maximum).
    assert isinstance(below, str) and "0x12" in below, below
    assert isinstance(above, str), above
    assert not isinstance(inside, str), inside
    assert tuple(inside[0].shape) == (3, 5)


class Attention(nn.Module):
    def __init__(self, is_causal: bool = False, gqa: bool = False) -> None:
        super().__init__()
        self.is_causal, self.gqa = is_causal, gqa

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.is_causal, enable_gqa=self.gqa)


class MaskedAttention(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


CAUSAL_MASK_OPS = frozenset(
    {
        "aten::sym_size",
        "aten::full",
        "aten::arange",
        "aten::sub",
        "aten::le",
        "aten::logical_and",
        "aten::scalar_tensor",
        "aten::where",
    }
)


def _qkv(length: int, heads: int = 4, kv_heads: int = 4, sources: int | None = None) -> tuple[torch.Tensor, ...]:
    source = length if sources is None else sources
    return torch.randn(1, heads, length, 16), torch.randn(1, kv_heads, source, 16), torch.randn(1, kv_heads, source, 16)


@pytest.mark.parametrize(
    ("is_causal", "gqa"), [(False, False), (True, False), (False, True)], ids=["full", "causal", "gqa"]
)
def test_attention_at_dynamic_lengths(is_causal: bool, gqa: bool) -> None:
    torch.manual_seed(3)
    kv_heads = 2 if gqa else 4
    length = Dim("length", min=1, max=48)
    failures = run_at_sizes(
        Attention(is_causal, gqa),
        _qkv(9, kv_heads=kv_heads),
        ({2: length}, {2: length}, {2: length}),
        [_qkv(n, kv_heads=kv_heads) for n in (1, 48, 13)],
        # A causal mask of a dynamic length is built by ExecuTorch from integer ops (known issue; at
        # a static length it is a constant) and read by the delegate as an input.
        left_outside=CAUSAL_MASK_OPS if is_causal else frozenset(),
    )
    assert not failures, failures


def test_masked_attention_with_different_query_and_key_lengths() -> None:
    torch.manual_seed(4)
    target, source = Dim("target", min=1, max=20), Dim("source", min=1, max=40)
    shapes = ({2: target}, {2: source}, {2: source}, {0: target, 1: source})
    sets = [(*_qkv(t, sources=s), torch.randn(t, s)) for t, s in ((1, 1), (20, 40), (3, 17))]
    failures = run_at_sizes(MaskedAttention(), sets[2], shapes, sets)
    assert not failures, failures


class HalfOfTheRow(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, : x.shape[1] // 2].relu() * 2


def test_a_slice_with_a_dynamic_bound_is_delegated() -> None:
    failures = run_at_sizes(
        HalfOfTheRow(),
        (torch.randn(3, 10),),
        ({1: 2 * Dim("half", min=1, max=20)},),
        [(torch.randn(3, n),) for n in (2, 40, 14)],
    )
    assert not failures, failures


class LastToken(nn.Module):
    """A decoder's last step: the logits of the last position only."""

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(16, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(x[:, -1]) + self.head(x[:, 1:-1]).mean(1)


def test_offsets_that_follow_the_length_select_the_right_rows() -> None:
    failures = run_at_sizes(
        LastToken(),
        (torch.randn(1, 9, 16),),
        ({1: Dim("tokens", min=4, max=64)},),
        [(torch.randn(1, n, 16),) for n in (4, 64, 17)],
    )
    assert not failures, failures


class SizeArithmetic(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows, width = x.shape
        pairs = x.reshape(rows * 2, width // 2)[1:]
        return pairs.reshape(-1)[: width + rows - 1 - rows % 3].relu()


def test_size_arithmetic_is_taken_with_its_users() -> None:
    example = (torch.randn(4, 8),)
    shapes = ({0: Dim("rows", min=3, max=16), 1: 2 * Dim("half", min=2, max=8)},)
    lowered = lower(SizeArithmetic(), example, dynamic_shapes=shapes)
    assert SIZE_ARITHMETIC_OPS <= lowered.delegated_ops, lowered.describe()
    failures = run_at_sizes(
        SizeArithmetic(), example, shapes, [(torch.randn(r, w),) for r, w in ((3, 4), (16, 16), (5, 6))]
    )
    assert not failures, failures


def test_a_range_without_maximum_is_not_delegated() -> None:
    lowered = lower(nn.Linear(8, 4), (torch.randn(3, 8),), dynamic_shapes=({0: Dim("rows", min=1)},))
    assert lowered.delegate_calls == 0, lowered.describe()
    assert any("no upper bound" in reason for reason in lowered.partitioner.rejections.values())


class EmbedAndPickLast(nn.Module):
    """Token ids of a dynamic length: the embedding, a projection, and the argmax of the last token."""

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.proj = nn.Embedding(50, 16), nn.Linear(16, 50)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.argmax(self.proj(self.embed(ids))[:, -1], dim=-1)


def test_host_index_steps_at_dynamic_lengths() -> None:
    torch.manual_seed(5)
    ids = [(torch.randint(0, 50, (2, n)),) for n in (1, 17, 32)]
    failures = run_at_sizes(EmbedAndPickLast().eval(), ids[1], ({1: Dim("length", min=1, max=32)},), ids)
    assert not failures, failures


class PadToWindows(nn.Module):
    """Swin's window partition: pad the map to a multiple of the window, by an amount the size decides."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        width = x.shape[-1]
        return F.pad(x, (1, (7 - width % 7) % 7), value=-1.0).relu() * 2


def test_a_pad_that_follows_the_size_is_delegated() -> None:
    example = (torch.randn(2, 10),)
    shapes = ({1: Dim("width", min=1, max=40)},)
    lowered = lower(PadToWindows(), example, dynamic_shapes=shapes)
    assert lowered.delegate_calls == 1 and "mod" in lowered.delegated_ops, lowered.describe()
    failures = run_at_sizes(PadToWindows(), example, shapes, [(torch.randn(2, n),) for n in (1, 7, 8, 40, 13)])
    assert not failures, failures


class SizeUsedAcrossPartitions(nn.Module):
    """The width of a convolution's output is read in its partition (to pad it to a multiple of 8) and,
    past cumsum (left to ExecuTorch), in the next one (to slice the padding off)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(4, 4, 4, stride=4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        width = y.shape[-1]
        padded = F.pad(y, (0, (8 - width % 8) % 8)).relu()
        return (torch.cumsum(padded, -1) * 2)[:, :, :width] + y


def test_a_size_used_by_two_partitions_is_left_to_executorch() -> None:
    """A delegate cannot return a size: ExecuTorch reads it from the convolution's output and passes it
    to the partitions that need it (the convolution's own partition splits in two around it)."""
    torch.manual_seed(2)
    model = SizeUsedAcrossPartitions().eval()
    shapes = ({2: 16 * Dim("blocks", min=1, max=4)},)
    lowered = lower(model, (torch.randn(1, 4, 32),), dynamic_shapes=shapes)
    assert lowered.delegate_calls == 3 and "aten::sym_size" in lowered.undelegated_compute, lowered.describe()
    inputs = [(torch.randn(1, 4, 16 * n),) for n in (1, 4, 3)]
    for (x,), result in zip(inputs, execute_each(lowered.buffer, inputs)):
        assert not isinstance(result, str), result
        with torch.no_grad():
            assert not mismatch(str(x.shape), result, [model(x)], 1e-5)


class PaddedToWholeBlocks(nn.Module):
    """A sequence padded to whole blocks of 8 by an op we leave to ExecuTorch (fmod): the ReLU's
    partition then sees only the padded length, 8 * ((s + 7) // 8), which is 8 for s = 1..8 (a Swin
    window mask's pieces)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        padded = F.pad(x, (0, (8 - x.shape[1] % 8) % 8))
        return torch.fmod(padded, 0.75).relu()


def test_a_partition_whose_inputs_give_a_size_many_to_one_is_left_to_executorch() -> None:
    model = PaddedToWholeBlocks().eval()
    shapes = ({1: Dim("length", min=1, max=40)},)
    lowered = lower(model, (torch.randn(2, 20),), dynamic_shapes=shapes)
    reasons = lowered.partitioner.rejections
    relu = next(name for name in reasons if "relu" in name)
    assert "one to one" in reasons[relu] and "aten::relu" in lowered.undelegated_compute, lowered.describe()
    inputs = [(torch.randn(2, n),) for n in (1, 40, 13)]
    for (x,), result in zip(inputs, execute_each(lowered.buffer, inputs)):
        assert not isinstance(result, str), result
        assert not mismatch(str(x.shape), result, [model(x)], 1e-6)


class PatchMerging(nn.Module):
    """Swin's patch merging: every other row and column of a map, side by side."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        parts = [x[:, i::2, j::2, :] for i, j in ((0, 0), (1, 0), (0, 1), (1, 1))]
        return torch.cat(parts, -1).relu()


def test_every_other_row_of_a_dynamic_dim_is_delegated() -> None:
    """A constant list of rows (how a stepped slice of a static dim is gathered) cannot follow a dynamic
    size: the dim is split into (rows // 2, 2) and one column taken."""
    torch.manual_seed(5)
    # Even sizes (torch.export proves the four parts alike only then; Swin pads to even first).
    shapes = ({1: 2 * Dim("half_height", min=2, max=6), 2: 2 * Dim("half_width", min=2, max=6)},)
    inputs = [(torch.randn(1, h, w, 3),) for h, w in ((4, 4), (12, 12), (6, 10))]
    failures = run_at_sizes(PatchMerging().eval(), (torch.randn(1, 8, 8, 3),), shapes, inputs)
    assert not failures, failures


class EveryThirdRow(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, 1::3].relu()


def test_a_step_that_does_not_divide_a_dynamic_dim_is_left_to_executorch() -> None:
    model = EveryThirdRow().eval()
    lowered = lower(model, (torch.randn(2, 12),), dynamic_shapes=({1: 4 * Dim("fours", min=2, max=5)},))
    slices = [reason for name, reason in lowered.partitioner.rejections.items() if "slice" in name]
    assert slices and "not a multiple of 3" in slices[0], lowered.describe()
    inputs = [(torch.randn(2, n),) for n in (8, 20, 12)]
    for (x,), result in zip(inputs, execute_each(lowered.buffer, inputs)):
        assert not isinstance(result, str), result
        assert not mismatch(str(x.shape), result, [model(x)], 1e-6)


class SqueezeExcitation(nn.Module):
    """A feature map scaled by channel weights computed from its mean: at a 1x1 map the scaling is no
    longer a broadcast, which must not change how it is fused (RegNet's blocks)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.squeeze = nn.Conv2d(4, 8, 3, padding=1), nn.Conv2d(8, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        scale = torch.sigmoid(self.squeeze(y.mean((2, 3), keepdim=True)))
        return y * scale + scale * y.relu()  # the scale on either side (RegNet's SE block: on the left)


def test_a_broadcast_that_vanishes_at_the_smallest_size_lowers_alike() -> None:
    torch.manual_seed(4)
    shapes = ({2: Dim("height", min=1, max=12), 3: Dim("width", min=1, max=12)},)
    failures = run_at_sizes(
        SqueezeExcitation().eval(),
        (torch.randn(1, 4, 6, 6),),
        shapes,
        [(torch.randn(1, 4, h, w),) for h, w in ((1, 1), (12, 12), (5, 3))],
    )
    assert not failures, failures
