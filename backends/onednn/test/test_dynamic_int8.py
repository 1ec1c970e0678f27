# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Dynamic int8 linear layers (`OneDnnPartitioner(dynamic_int8=True)`): weights s8 per output channel
ahead of time, activations s8 per row (per token) at run time.

Exactness is checked against an emulation of the scheme in float64 (the same roundings, so the
delegate must agree to float32 accuracy); closeness to fp32 against eager PyTorch, with tolerances
from the scheme's own error: each operand keeps ~7 bits per value relative to its row's or column's
largest magnitude, so one layer stays within 2e-2 of the output's magnitude and a transformer's
layers within 4e-2.
"""

from __future__ import annotations

import pytest
import torch
from executorch.backends.onednn import OneDnnPartitioner, int8_products_exact
from executorch.backends.onednn._passes import fuse_post_ops, passes_for, quantize_matmuls_dynamically, run_passes
from executorch.backends.onednn._passes.quantize_matmuls_dynamically import quantize_per_column
from executorch.backends.onednn.cli.zoo import MODELS
from executorch.backends.onednn.serialization.payload import Graph, Step
from executorch.backends.onednn.serialization.schema import BinaryAlg, DType, PostOpKind, StepKind
from support import describe, execute_traced
from tester import execute, lower, mismatch
from torch import nn

LAYER_TOLERANCE = 2e-2
MODEL_TOLERANCE = 4e-2


def emulated_linear(x: torch.Tensor, layer: nn.Linear) -> torch.Tensor:
    """The scheme in float64: per-row activation and per-column weight quantization, exact products."""
    max_abs = x.abs().amax(-1, keepdim=True)
    row_scale = torch.where(max_abs > 0, max_abs / 127, torch.ones_like(max_abs))
    q = torch.clamp(torch.round(x * (1 / row_scale)), -127, 127)
    weights, weight_scales = quantize_per_column(layer.weight.detach(), transpose_b=True)
    product = q.double() @ weights.double().T
    out = product * torch.tensor(weight_scales, dtype=torch.float64) * row_scale.double()
    return (out + layer.bias.double()).float() if layer.bias is not None else out.float()


def dynamic(precision: str = "fp32") -> OneDnnPartitioner:
    return OneDnnPartitioner(precision=precision, dynamic_int8=True)


# --- the payload rewrite ---------------------------------------------------------------------------------------
def _two_linears_on_one_input() -> Graph:
    graph = Graph()
    x = graph.add_value(DType.F32, (4, 8))
    graph.inputs = [x]
    outs = []
    for n in (16, 5):
        weight = graph.add_constant(torch.randn(n, 8), DType.F32)
        bias = graph.add_constant(torch.randn(n), DType.F32)
        out = graph.add_value(DType.F32, (4, n))
        graph.add_step(Step(StepKind.MATMUL, [x, weight, bias], [out], ints={"transpose_b": [1]}))
        outs.append(out)
    relu_out = graph.add_value(DType.F32, (4, 16))
    graph.add_step(
        Step(StepKind.ELTWISE, [outs[0]], [relu_out], ints={"alg": [0]}, floats={"alpha": [0.0], "beta": [0.0]})
    )
    graph.outputs = [relu_out, outs[1]]
    return graph


def test_rewrite_quantizes_each_activation_once_and_fuses_scale_bias_and_activation() -> None:
    graph = run_passes(_two_linears_on_one_input(), passes_for(dynamic_int8=True))
    relu_out, second = graph.outputs  # value ids as renumbered by drop_unused
    kinds = [step.kind for step in graph.steps]
    assert kinds == [StepKind.QUANTIZE_ROWS, StepKind.MATMUL, StepKind.MATMUL]
    quantize, first, last = graph.steps
    quantized, scales = quantize.outputs
    assert graph.values[quantized].dtype == DType.S8 and graph.values[scales].dims == (4, 1)
    for matmul, out, n in ((first, relu_out, 16), (last, second, 5)):
        assert matmul.inputs[0] == quantized and matmul.outputs == [out]
        assert graph.values[matmul.inputs[1]].dtype == DType.S8 and len(matmul.floats["weight_scales"]) == n
        assert matmul.inputs[3] == scales  # the row scales, then the bias: the first two post-ops
        post_ops = [op[:2] for op in matmul.post_ops()]
        assert post_ops[:2] == [(PostOpKind.BINARY, BinaryAlg.MUL), (PostOpKind.BINARY, BinaryAlg.ADD)]
    assert len(first.ints["post_ops"]) == 6  # relu after them


def test_rewrite_is_off_by_default_and_leaves_activation_products() -> None:
    assert quantize_matmuls_dynamically not in passes_for(dynamic_int8=False)
    assert passes_for(dynamic_int8=True).index(quantize_matmuls_dynamically) < passes_for(True).index(fuse_post_ops)
    scores = Graph()
    q, k = scores.add_value(DType.F32, (2, 4, 8)), scores.add_value(DType.F32, (2, 8, 4))
    out = scores.add_value(DType.F32, (2, 4, 4))
    scores.add_step(Step(StepKind.MATMUL, [q, k], [out]))
    assert [s.kind for s in quantize_matmuls_dynamically(scores).steps] == [StepKind.MATMUL]


@pytest.mark.parametrize("transpose_b", [True, False])
def test_weights_quantized_per_output_column(transpose_b: bool) -> None:
    weights = torch.randn(6, 10) * torch.logspace(-3, 3, 10)  # columns of very different magnitudes
    stored = weights.T.contiguous() if transpose_b else weights  # [N, K] or [K, N], N = 10
    quantized, scales = quantize_per_column(stored, transpose_b)
    assert quantized.dtype == torch.int8 and len(scales) == 10 and quantized.abs().max() == 127
    restored = (quantized.float().T if transpose_b else quantized.float()) * torch.tensor(scales)
    assert ((restored - weights).abs() <= torch.tensor(scales) / 2 + 1e-9).all()


# --- end to end ------------------------------------------------------------------------------------------------
class LinearGeluResidual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up, self.down = nn.Linear(64, 96), nn.Linear(96, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(nn.functional.gelu(self.up(x)))


def test_int8_is_exact_also_where_int8_products_would_saturate() -> None:
    """Without VNNI, oneDNN's int8 kernels add pairs of products in 16 bits and saturate (a row 30% off
    was measured on an AVX2 CPU): there the runtime widens both operands to 16 bits and adds pairs of
    products in 32 (runtime/ExactInt8Matmul.h). Rows of very different magnitudes give every row values
    near +-127."""
    layer = nn.Linear(48, 40)
    x = torch.randn(3, 48) * torch.tensor([[1.0], [1000.0], [0.01]])
    (out,) = execute(lower(layer, (x,), dynamic()).buffer, (x,))
    assert mismatch("linear", [out], [emulated_linear(x, layer)], 1e-5) is None


def test_linear_matches_the_scheme_exactly() -> None:
    layer = nn.Linear(48, 40)
    x = torch.randn(3, 7, 48)
    lowered = lower(layer, (x,), dynamic())
    steps = [step.kind for graph in lowered.payloads() for step in graph.steps]
    assert steps == [StepKind.QUANTIZE_ROWS, StepKind.MATMUL], lowered.describe()
    (out,) = execute(lowered.buffer, (x,))
    problem = mismatch("linear", [out], [emulated_linear(x, layer)], 1e-5)
    assert problem is None, problem
    with torch.no_grad():
        assert mismatch("linear vs fp32", [out], [layer(x)], LAYER_TOLERANCE) is None


@pytest.mark.parametrize("shape", [(64, 48), (1, 64, 48), (4, 16, 48), (2, 2, 16, 48)])
def test_int8_matmul_runs_an_optimized_kernel(shape: tuple[int, ...]) -> None:
    """oneDNN's int8 matmul takes the per-row scale post-op only in a [1, M, N] problem and otherwise
    falls back to its reference kernel (1000x slower): the runtime folds the batch dims into the rows.
    Without VNNI the product runs on the host (exact 16-bit products, AVX2) and no matmul primitive at
    all; the row scales and the bias after it, in no reference kernel either."""
    layer, x = nn.Linear(48, 40), torch.randn(shape)
    lowered = lower(layer, (x,), dynamic())
    outputs, trace = execute_traced(lowered.buffer, (x,))
    matmuls = [record for record in trace if record.primitive == "matmul"]
    assert len(matmuls) == (1 if int8_products_exact() else 0), describe(trace)
    assert not any(record.implementation.startswith("ref") for record in trace), describe(trace)
    assert mismatch("linear", outputs, [emulated_linear(x, layer)], 1e-5) is None


def test_each_token_keeps_its_own_scale() -> None:
    """Rows 10^6 apart in magnitude: per-tensor int8 would round the small rows to zero."""
    layer = nn.Linear(32, 16, bias=False)
    x = torch.randn(4, 32) * torch.tensor([[1e3], [1.0], [1e-3], [1e-3]])
    lowered = lower(layer, (x,), dynamic())
    (out,) = execute(lowered.buffer, (x,))
    with torch.no_grad():
        want = layer(x)
    for row in range(4):
        scale = want[row].abs().max().item()
        assert (out[row] - want[row]).abs().max().item() <= LAYER_TOLERANCE * scale, f"row {row}"


def test_fused_activation_and_residual() -> None:
    model, x = LinearGeluResidual(), torch.randn(2, 10, 64)
    lowered = lower(model, (x,), dynamic())
    kinds = [step.kind for graph in lowered.payloads() for step in graph.steps]
    assert kinds.count(StepKind.QUANTIZE_ROWS) == 2 and kinds.count(StepKind.MATMUL) == 2, kinds
    assert StepKind.BINARY not in kinds and StepKind.ELTWISE not in kinds, kinds  # all post-ops
    (out,) = execute(lowered.buffer, (x,))
    with torch.no_grad():
        problem = mismatch("linear-gelu-linear-residual", [out], [model(x)], LAYER_TOLERANCE)
    assert problem is None, problem


def test_a_non_finite_token_gives_nan_in_its_row_only() -> None:
    layer = nn.Linear(16, 8)
    x = torch.randn(3, 16)
    x[1, 5] = float("inf")
    (out,) = execute(lower(layer, (x,), dynamic()).buffer, (x,))
    assert torch.isnan(out[1]).all()
    assert torch.isfinite(out[0]).all() and torch.isfinite(out[2]).all()


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_transformer_encoder(precision: str) -> None:
    model, inputs = MODELS["transformer_encoder"]()
    lowered = lower(model, inputs, dynamic(precision))
    assert lowered.delegate_calls >= 1 and not lowered.undelegated_compute, lowered.describe()
    steps = [step for graph in lowered.payloads() for step in graph.steps]
    linears = [s for s in steps if s.kind == StepKind.MATMUL and "weight_scales" in s.floats]
    assert len(linears) >= 4 and any(s.kind == StepKind.QUANTIZE_ROWS for s in steps)
    outputs = execute(lowered.buffer, inputs)
    with torch.no_grad():
        problem = mismatch(f"transformer_encoder {precision}", outputs, [model(*inputs)], MODEL_TOLERANCE)
    assert problem is None, problem


def test_bf16_model() -> None:
    model = LinearGeluResidual().to(torch.bfloat16)
    x = torch.randn(2, 10, 64, dtype=torch.bfloat16)
    lowered = lower(model, (x,), dynamic())
    (out,) = execute(lowered.buffer, (x,))
    assert out.dtype == torch.bfloat16
    with torch.no_grad():
        want = model.float()(x.float())
    problem = mismatch("bf16 model", [out.float()], [want], MODEL_TOLERANCE)
    assert problem is None, problem
