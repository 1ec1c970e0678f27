# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Linear layers quantized as export_llm quantizes them (torchao's affine quantization for qmode 8da4w,
8da8w, 4w; its own weight-only int8 module for qmode=int8): each becomes one COMPRESSED_MATMUL whose
weights stay 4- or 8-bit in the program, and the delegate computes what the eager quantized module
computes.

The eager module quantizes each activation row to int8 and multiplies by the dequantized weights in f32;
the delegate quantizes the rows the same way (bit for bit) and sums the int4 x int8 products exactly per
group, so the two differ by f32 rounding only: 1e-5 of the output's magnitude. On CPUs with AMX several
quantized rows at once, on CPUs with VNNI or AMX, run int8 products on the weights widened to s8 per
column by default (`set_int4_products("fast")`; on AMX, bf16 products where K is not a multiple of 64),
which round each weight: the tests here load their programs on "exact", but for the one on that
setting."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import torch
from executorch.backends.onednn import OneDnnPartitioner, effective_isa, int8_products_exact, set_int4_products
from executorch.backends.onednn.serialization.schema import DType, StepKind
from support import execute_with_int4_products
from tester import lower
from torch import nn

TOLERANCE = 1e-5
IN_FEATURES, OUT_FEATURES = 128, 48


def execute(buffer: bytes, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    return execute_with_int4_products(buffer, inputs, "exact")


def quantized_linear(
    mode: str, group: int = 32, bias: bool = True, in_features: int = IN_FEATURES, out_features: int = OUT_FEATURES
) -> nn.Module:
    from torchao.quantization.granularity import PerGroup
    from torchao.quantization.quant_api import (
        Int8DynamicActivationIntxWeightConfig,
        IntxWeightOnlyConfig,
        quantize_,
    )

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(in_features, out_features, bias=bias)).eval()
    configs = {
        "8da4w": Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4, weight_granularity=PerGroup(group)),
        "8da8w": Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int8, weight_granularity=PerGroup(group)),
        "4w": IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(group)),
    }
    quantize_(model, configs[mode])
    return model


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return float((actual - expected).abs().max() / expected.abs().max())


ROWS = [(1, IN_FEATURES), (5, IN_FEATURES), (2, 3, IN_FEATURES)]
MODES = [("8da4w", DType.S4, 32), ("8da4w", DType.S4, 64), ("8da4w", DType.S4, 128), ("8da8w", DType.S8, 32)]


@pytest.mark.parametrize("rows", ROWS, ids=["one_row", "rows", "3d"])
@pytest.mark.parametrize(("mode", "weight_dtype", "group"), [*MODES, ("4w", DType.S4, 32)])
def test_quantized_linear_runs_compressed_and_matches_the_eager_module(
    mode: str, weight_dtype: DType, group: int, rows: tuple[int, ...]
) -> None:
    model = quantized_linear(mode, group)
    x = torch.randn(rows) * 3
    lowered = lower(model, (x,))
    assert lowered.delegate_calls == 1 and not lowered.undelegated_compute, lowered.describe()
    (step,) = lowered.steps()
    assert step.kind == StepKind.COMPRESSED_MATMUL and step.ints["group_size"] == [group]
    assert step.ints["quantize_rows"] == [int(mode.startswith("8da"))]
    (graph,) = lowered.payloads()
    assert graph.values[step.inputs[1]].dtype == weight_dtype
    with torch.no_grad():
        expected = model(x)
    (actual,) = execute(lowered.buffer, [x])
    assert relative_error(actual, expected) < TOLERANCE


@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
@pytest.mark.parametrize("in_features", [IN_FEATURES, 96], ids=["widened", "bf16"])
def test_several_quantized_rows_on_the_fast_setting_stay_within_their_rounding(bias: bool, in_features: int) -> None:
    # K a multiple of 64, with VNNI or AMX (int8_products_exact()): the weights widened to s8 on a grid per column
    # (runtime/Int4Widening.h), each within 0.502 of s_col = max |group scale| * 8 / 127. Other K, on
    # AMX: AMX's bf16 products, each weight times its group scale rounded to bf16 (2^-9 of it).
    # Elsewhere the setting changes nothing: the rows are quantized, dequantized and multiplied in f32.
    model = quantized_linear("8da4w", 32, bias=bias, in_features=in_features)
    x = torch.randn(40, in_features) * 3 + 0.5
    with torch.no_grad():
        expected = model(x)
        weights = model[0].weight.dequantize()
    (actual,) = execute_with_int4_products(lower(model, (x,)).buffer, [x], "fast")
    slack = 1e-5 * expected.abs().max()
    if in_features % 64 == 0 and int8_products_exact():
        # The quantized rows lie within half a step (at most max |x| / 255) of x.
        row_magnitudes = x.abs().sum(-1, keepdim=True) + in_features * x.abs().amax(-1, keepdim=True) / 255
        grid = model[0].weight.scale.abs().amax(-1) * 8 / 127
        bound = row_magnitudes * 0.502 * grid + slack
    elif in_features % 64 != 0 and effective_isa() == "avx512_core_amx":
        # Each product off by at most 2^-9 of it, the row quantized within half a step of x: a bound of
        # 2^-8 of the products' magnitudes leaves room for both.
        bound = 2**-8 * (x.abs() @ weights.abs().T) + slack
    else:
        assert relative_error(actual, expected) < TOLERANCE
        return
    assert bool(((actual - expected).abs() <= bound).all())
    assert relative_error(actual, expected) > TOLERANCE  # the rounding kernel ran, not the exact one


def slices_bound(x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """The bf16-row kernel's bound (runtime/Int4VectorMatrix.h): each value of the row within 2^-14 of
    the largest magnitude among its 32, times the weights' magnitudes, per output column."""
    largest = x.double().abs().view(-1, 32).amax(-1).repeat_interleave(32)
    return (weights.double().abs() @ (largest * 2**-14)).view(1, -1)


def test_one_bf16_row_of_int4_weights_runs_in_two_int8_slices_on_the_fast_setting() -> None:
    """precision="bf16", a decode step's row through a 4w linear: on AVX-512 with VNNI the "fast" int4
    products (the default) take the row in bf16, split it per 32 values into two int8 slices on one power
    of two (each value within 2^-14 of its segment's largest magnitude) and run the int8 unit; "exact"
    runs the f32 kernel on the row in f32 (here the program's f32 input, as it is) and gives eager's f32
    result. They differ where a segment spans more than the slices hold."""
    isa = effective_isa()
    if not isa.startswith(("avx512_core_bf16", "avx512_core_fp16", "avx512_core_amx", "avx10")):
        pytest.skip(f"the bf16-row kernel needs AVX-512 with AVX512-VNNI and bf16 compute; oneDNN runs {isa} here")
    model = quantized_linear("4w", 32, in_features=256, out_features=512)
    x = torch.randn(1, 256)
    x[0, ::7] *= 30  # segments spanning 2^17: the slices round their small values
    x[0, ::11] *= 2**-12
    with torch.no_grad():
        weights = model[0].weight.dequantize()
        bias = model[0].bias
    buffer = lower(model, (x,), partitioner=OneDnnPartitioner(precision="bf16")).buffer
    (fast,) = execute_with_int4_products(buffer, [x], "fast")
    (exact,) = execute_with_int4_products(buffer, [x], "exact")
    with torch.no_grad():
        assert relative_error(exact, model(x)) < TOLERANCE
    row = x.bfloat16().double()  # the bf16 row the fast path takes
    expected = row @ weights.double().T + bias.double()
    rounding = 1e-5 * (row.abs() @ weights.double().abs().T)  # the result stays f32: the program's output
    assert bool(((fast.double() - expected).abs() <= rounding + slices_bound(row, weights)).all())
    # Beyond f32 rounding of the bf16 row's products: the slices ran, not the f32 kernel on the bf16 row.
    assert relative_error(fast.double(), expected) > TOLERANCE


def widened_weights(weight: torch.Tensor) -> torch.Tensor:
    """The int4 weights as the runtime widens them to s8 on a grid per column (runtime/Int4Widening.h),
    in f64: w8 = (16 q r16 + 2^14) >> 15 with r16 = round(scale * 2^11 / s_col), times s_col."""
    q = weight.qdata.to(torch.int64)
    scales = weight.scale.float()
    rows, k = q.shape
    group = k // scales.shape[1]
    grid = scales.abs().amax(-1) * 8 / 127
    ratios = torch.round(scales * (2048.0 / grid)[:, None]).to(torch.int64)
    widened = (16 * q.view(rows, -1, group) * ratios[:, :, None] + 2**14) >> 15
    return widened.view(rows, k).double() * grid.double()[:, None]


def test_widened_rows_compute_the_widened_weights_products_to_f32_rounding() -> None:
    # What the fast setting computes, exactly: the rows quantized as torchao does, times the widened
    # weights (int32 sums, then f32 scaling), for K 2048 (on 2 threads a block of 32 columns and a narrower last).
    if not int8_products_exact():
        pytest.skip(f"the weights are widened only with VNNI or AMX; effective ISA {effective_isa()}")
    from torchao.quantization.quant_primitives import MappingType, choose_qparams_affine, quantize_affine

    model = quantized_linear("8da4w", 32, bias=True, in_features=2048)
    x = torch.randn(40, 2048) * 3 + 0.5
    block = (1, 2048)
    scales, zero_points = choose_qparams_affine(
        x, MappingType.ASYMMETRIC, block, torch.int8, -128, 127, eps=torch.finfo(torch.float32).eps
    )
    q = quantize_affine(x, block, scales, zero_points, torch.int8, -128, 127).double()
    rows = (q - zero_points.double().view(-1, 1)) * scales.double().view(-1, 1)
    expected = rows @ widened_weights(model[0].weight).T + model[0].bias.double()
    (actual,) = execute_with_int4_products(lower(model, (x,)).buffer, [x], "fast")
    assert relative_error(actual.double(), expected) < TOLERANCE


def weight_only_int8_model() -> nn.Module:
    """Two linears quantized by export_llm's qmode=int8 (`WeightOnlyInt8QuantHandler`): int8 weights,
    one bf16 scale per output channel applied to the result."""
    from executorch.examples.models.llama.source_transformation.quantize import WeightOnlyInt8QuantHandler

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(IN_FEATURES, OUT_FEATURES * 8, bias=False),
        nn.SiLU(),
        nn.Linear(OUT_FEATURES * 8, OUT_FEATURES, bias=False),
    )
    return WeightOnlyInt8QuantHandler(model).quantized_model().eval()


@pytest.mark.parametrize("rows", ROWS, ids=["one_row", "rows", "3d"])
def test_weight_only_int8_linears_run_compressed_with_their_channel_scales_folded(rows: tuple[int, ...]) -> None:
    model = weight_only_int8_model()
    x = torch.randn(rows) * 3
    lowered = lower(model, (x,))
    assert lowered.delegate_calls == 1 and not lowered.undelegated_compute, lowered.describe()
    (graph,) = lowered.payloads()
    matmuls = lowered.steps(StepKind.COMPRESSED_MATMUL)
    assert len(matmuls) == 2 and not lowered.steps(StepKind.BINARY)  # each result's scaling folded in
    for step, linear in zip(matmuls, (model[0], model[2])):
        n, k = linear.weight.shape
        assert step.ints["group_size"] == [k] and step.ints["quantize_rows"] == [0]
        assert graph.values[step.inputs[1]].dtype == DType.S8 and graph.values[step.inputs[2]].dims == (n, 1)
    # One byte a weight: the cast to f32 is never folded into a copy of the weights.
    weights = IN_FEATURES * OUT_FEATURES * 8 + OUT_FEATURES * 8 * OUT_FEATURES
    assert len(lowered.buffer) < 1.25 * weights + 16384
    with torch.no_grad():
        expected = model(x)
    (actual,) = execute(lowered.buffer, [x])
    assert relative_error(actual, expected) < TOLERANCE


def test_set_int4_products_refuses_an_unknown_setting() -> None:
    with pytest.raises(ValueError, match="set_int4_products expects one of"):
        set_int4_products("approximate")


def test_four_bit_weights_take_half_a_byte_each_in_the_program() -> None:
    x = torch.randn(1, IN_FEATURES)
    fp32 = lower(nn.Linear(IN_FEATURES, OUT_FEATURES * 8).eval(), (x,)).buffer
    model = quantized_linear("8da4w")
    model[0] = nn.Linear(IN_FEATURES, OUT_FEATURES * 8).eval()
    from torchao.quantization.granularity import PerGroup
    from torchao.quantization.quant_api import Int8DynamicActivationIntxWeightConfig, quantize_

    quantize_(model, Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4, weight_granularity=PerGroup(32)))
    int4 = lower(model, (x,)).buffer
    weights = IN_FEATURES * OUT_FEATURES * 8
    # 4 bytes a weight against half a byte plus an f32 scale per 32 (1/8 byte).
    assert len(fp32) - len(int4) > weights * (4 - 0.5 - 0.125) - 4096


def test_rows_with_a_nan_give_nan_not_a_number() -> None:
    model = quantized_linear("8da4w")
    x = torch.randn(3, IN_FEATURES)
    x[1, 7] = float("nan")
    (actual,) = execute(lower(model, (x,)).buffer, [x])
    with torch.no_grad():
        expected = model(torch.nan_to_num(x))
    assert bool(actual[1].isnan().all())
    assert relative_error(actual[[0, 2]], expected[[0, 2]]) < TOLERANCE


def test_a_dequantized_weight_read_by_another_op_stays_out_of_the_delegate() -> None:
    """The weights are never unpacked to f32 inside the delegate: when another op needs them dequantized
    (here a sum over the weight matrix), the partitioner leaves the dequantize (and so the linear) out.
    ExecuTorch has no kernel of its own for torchao's ops, so such a program is refused at to_executorch:
    only the partitioner's decision is checked."""
    from executorch import exir
    from executorch.backends.onednn import OneDnnPartitioner
    from torchao.quantization.quant_primitives import dequantize_affine

    class ReadsWeights(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("data", torch.randint(-8, 8, (OUT_FEATURES, IN_FEATURES), dtype=torch.int8))
            self.register_buffer("scales", torch.rand(OUT_FEATURES, IN_FEATURES // 32) + 0.1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            w = dequantize_affine(self.data, [1, 32], self.scales, None, torch.int8, -8, 7)
            return torch.nn.functional.linear(x, w) + w.sum()

    partitioner = OneDnnPartitioner()
    ep = torch.export.export(ReadsWeights().eval(), (torch.randn(2, IN_FEATURES),))
    exir.to_edge_transform_and_lower(ep, partitioner=[partitioner])
    reasons = [reason for name, reason in partitioner.rejections.items() if "dequantize_affine" in name]
    assert reasons and "would need" in reasons[0], partitioner.rejections


class QuantizedEmbedding(nn.Module):
    """ExecuTorch's quantized embedding ops as export_llm's embedding_quantize writes them."""

    def __init__(self, bits: int, group: int | None, zero_points: bool, with_dtype: bool = True) -> None:
        super().__init__()
        import executorch.exir.passes._quant_patterns_and_replacements  # noqa: F401  (registers the ops)

        rows, dim = 50, 64
        columns = 1 if group is None else dim // group
        torch.manual_seed(1)
        if bits == 4:
            self.register_buffer("weight", torch.randint(0, 256, (rows, dim // 2), dtype=torch.uint8))
        else:
            self.register_buffer("weight", torch.randint(-128, 128, (rows, dim), dtype=torch.int8))
        scales = torch.rand(rows, columns) * 0.1 + 0.01
        self.register_buffer("scales", scales if group is not None else scales.reshape(rows))
        self.register_buffer("zero_points", torch.randint(-3, 4, scales.shape).float().reshape(self.scales.shape))
        self.bits, self.use_zero_points, self.with_dtype = bits, zero_points, with_dtype

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        ops = torch.ops.quantized_decomposed
        zeros = self.zero_points if self.use_zero_points else None
        op = ops.embedding_4bit if self.bits == 4 else ops.embedding_byte
        quant_range = (-8, 7) if self.bits == 4 else (-128, 127)
        if self.with_dtype:
            return op.dtype(self.weight, self.scales, zeros, *quant_range, indices, dtype=torch.float32) * 2
        return op.default(self.weight, self.scales, zeros, *quant_range, indices) * 2


@pytest.mark.parametrize("with_dtype", [True, False], ids=["dtype_overload", "default_overload"])
@pytest.mark.parametrize(
    ("bits", "group", "zero_points"), [(4, 32, False), (4, 16, True), (8, None, False), (8, 32, True)]
)
def test_quantized_embeddings_gather_compressed_rows_exactly(
    bits: int, group: int | None, zero_points: bool, with_dtype: bool
) -> None:
    model = QuantizedEmbedding(bits, group, zero_points, with_dtype).eval()
    indices = torch.tensor([[3, 0, 49, 3, 17]])
    lowered = lower(model, (indices,))
    assert lowered.delegate_calls == 1 and not lowered.undelegated_compute, lowered.describe()
    gathers = lowered.steps(StepKind.GATHER)
    (graph,) = lowered.payloads()
    assert len(gathers) == 1 and graph.values[gathers[0].inputs[0]].dtype == (DType.S4 if bits == 4 else DType.S8)
    with torch.no_grad():
        expected = model(indices)
    (actual,) = execute(lowered.buffer, [indices])
    assert torch.equal(actual, expected)


def test_four_bit_weights_beyond_their_declared_range_are_kept_in_eight_bits() -> None:
    """dequantize_affine does not clamp: a value outside [-8, 7] (a hand-made program) keeps its byte."""
    from torchao.quantization.quant_primitives import dequantize_affine

    class Linear(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            data = torch.randint(-8, 8, (OUT_FEATURES, IN_FEATURES), dtype=torch.int8)
            data[3, 5] = 12
            self.register_buffer("data", data)
            self.register_buffer("scales", torch.rand(OUT_FEATURES, IN_FEATURES // 32) + 0.1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            w = dequantize_affine(self.data, [1, 32], self.scales, None, torch.int8, -8, 7)
            return torch.nn.functional.linear(x, w)

    model, x = Linear().eval(), torch.randn(2, IN_FEATURES)
    lowered = lower(model, (x,))
    (step,) = lowered.steps()
    (graph,) = lowered.payloads()
    assert step.kind == StepKind.COMPRESSED_MATMUL and graph.values[step.inputs[1]].dtype == DType.S8
    with torch.no_grad():
        expected = model(x)
    (actual,) = execute(lowered.buffer, [x])
    assert relative_error(actual, expected) < TOLERANCE
