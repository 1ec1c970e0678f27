# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""bf16: models already in bf16, and fp32 models lowered with precision="bf16", against fp32 eager.

Every op case of test_ops runs both ways. Tolerances are stated against the fp32 reference, relative
to max(1, max|reference|): bf16 keeps 8 significant bits (a relative rounding error of 2^-9 per
value), so a handful of roundings through an op stays within 2e-2; models, with tens of layers,
are held to the issue's target of 2e-2 relative to the output's largest magnitude.
"""

from __future__ import annotations

import warnings

import executorch.exir as exir
import pytest
import torch
from executorch.backends.onednn import ComputeBf16FallbacksInFp32, OneDnnPartitioner, effective_isa
from executorch.backends.onednn.cli.zoo import MODELS
from executorch.backends.onednn.serialization.schema import DType, PostOpKind, StepKind
from op_cases import CASES, OpCase
from tester import classify, execute, flatten_outputs, lower, mismatch
from torch import nn

OP_TOLERANCE = 2e-2
# Ops whose output magnitude amplifies an input's bf16 rounding (exp, pow, division by small values).
OP_TOLERANCE_OVERRIDES = {"exp": 4e-2, "pow_tensor_scalar": 4e-2, "reciprocal_by_div": 4e-2, "div_tensor": 4e-2}
MODEL_TOLERANCE = 2e-2


def fp32_reference(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
    with torch.no_grad():
        return [t.float() for t in flatten_outputs(model.float().eval()(*(x.float() for x in inputs)))]


def as_bf16(inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    return tuple(x.to(torch.bfloat16) if x.is_floating_point() else x for x in inputs)


def check(
    name: str,
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    partitioner: OneDnnPartitioner,
    tolerance: float,
    required_ops: tuple[str, ...] = (),
    compile_config: exir.EdgeCompileConfig | None = None,
) -> None:
    lowered = lower(model, inputs, partitioner, compile_config=compile_config)
    assert lowered.delegate_calls >= 1 and not lowered.undelegated_compute, f"{name}: {lowered.describe()}"
    missing = set(required_ops) - lowered.delegated_ops
    assert not missing, f"{name}: {sorted(missing)} not inside the delegate ({lowered.describe()})"
    outputs = execute(lowered.buffer, inputs)
    with torch.no_grad():
        eager_dtypes = [t.dtype for t in flatten_outputs(model.eval()(*inputs))]
    assert [t.dtype for t in outputs] == eager_dtypes, f"{name}: output dtypes {[t.dtype for t in outputs]}"
    reference = fp32_reference(model, inputs)
    problem = mismatch(name, [t.float() for t in outputs], reference, tolerance)
    assert problem is None, f"{problem}\n  [{lowered.describe()}]"


def _tolerance(case: OpCase) -> float:
    return OP_TOLERANCE_OVERRIDES.get(case.id, OP_TOLERANCE)


FLOAT_CASES = [c for c in CASES if all(x.is_floating_point() for x in c.inputs()) and c.not_in_bf16 is None]
BF16_MODEL_CASES = [c for c in FLOAT_CASES if c.not_in_bf16_models is None]


@pytest.mark.parametrize("case", BF16_MODEL_CASES, ids=[c.id for c in BF16_MODEL_CASES])
def test_bf16_model_is_delegated_in_bf16(case: OpCase) -> None:
    model = case.model().to(torch.bfloat16)
    inputs = as_bf16(case.inputs())
    check(case.id, model, inputs, OneDnnPartitioner(), _tolerance(case), case.ops, case.compile_config())


@pytest.mark.parametrize("case", FLOAT_CASES, ids=[c.id for c in FLOAT_CASES])
def test_fp32_model_computes_in_bf16_on_request(case: OpCase) -> None:
    check(
        case.id,
        case.model(),
        case.inputs(),
        OneDnnPartitioner(precision="bf16"),
        _tolerance(case),
        case.ops,
        case.compile_config(),
    )


def test_precision_is_validated() -> None:
    with pytest.raises(ValueError, match="precision"):
        OneDnnPartitioner(precision="fp16")


# --- models --------------------------------------------------------------------------------------------
MODELS_IN_BF16 = ["resnet_small", "mobilenet_v2_small", "mlp", "unet_small", "transformer_encoder"]


@pytest.mark.parametrize("name", MODELS_IN_BF16)
def test_bf16_model_zoo_matches_fp32(name: str) -> None:
    model, inputs = MODELS[name]()
    check(name, model.to(torch.bfloat16), as_bf16(inputs), OneDnnPartitioner(), MODEL_TOLERANCE)


@pytest.mark.parametrize("name", MODELS_IN_BF16)
def test_fp32_model_zoo_in_bf16_on_request_matches_fp32(name: str) -> None:
    model, inputs = MODELS[name]()
    check(name, model, inputs, OneDnnPartitioner(precision="bf16"), MODEL_TOLERANCE)


# --- what precision="bf16" decides ----------------------------------------------------------------------
def test_matrix_steps_really_compute_in_bf16() -> None:
    """1 + 2^-10 is exact in fp32 and rounds to 1 in bf16: only a bf16 linear returns exactly 16."""
    linear = nn.Linear(16, 1, bias=False)
    with torch.no_grad():
        linear.weight.fill_(1 + 2**-10)
    inputs = (torch.ones(1, 16),)
    fp32 = execute(lower(linear, inputs).buffer, inputs)[0]
    bf16 = execute(lower(linear, inputs, OneDnnPartitioner(precision="bf16")).buffer, inputs)[0]
    assert fp32.dtype == bf16.dtype == torch.float32
    assert fp32.item() == pytest.approx(16 * (1 + 2**-10), abs=1e-6)
    if effective_isa().startswith("avx512_core"):
        assert bf16.item() == 16.0
    else:  # no bf16 matmul below AVX-512 (oneDNN 3.2, 3.13.1): init() builds it in f32 (README, Instruction sets)
        assert bf16.item() == fp32.item()


def test_precision_pass_keeps_boundaries_and_sensitive_steps_in_fp32() -> None:
    model = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.LayerNorm(32), nn.Linear(32, 8), nn.Softmax(-1))
    inputs = (torch.randn(4, 32),)
    graph = lower(model, inputs, OneDnnPartitioner(precision="bf16")).payloads()[0]
    dtype_of = {value_id: graph.values[value_id].dtype for step in graph.steps for value_id in step.outputs}
    for value_id in [*graph.inputs, *graph.outputs]:
        assert graph.values[value_id].dtype == DType.F32
    for step in graph.steps:
        out = dtype_of[step.outputs[0]]
        if step.kind in (StepKind.LAYER_NORM, StepKind.SOFTMAX) or step.outputs[0] in graph.outputs:
            assert out == DType.F32, f"{step.kind.name} output should stay fp32"
        else:
            assert out == DType.BF16, f"{step.kind.name} output should be bf16"
        if step.kind == StepKind.MATMUL:
            assert step.ints.get("compute_bf16") == [1]
    assert DType.BF16 in dtype_of.values()


class ResidualBlocks(nn.Module):
    """Two pre-norm transformer MLP blocks: x + fc2(gelu(fc1(norm(x)))), twice."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(32), nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32)) for _ in range(2)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = x + block(x)
        return x * 2


def test_residual_stream_stays_fp32() -> None:
    model, inputs = ResidualBlocks().eval(), (torch.randn(1, 8, 32),)
    graph = lower(model, inputs, OneDnnPartitioner(precision="bf16")).payloads()[0]
    residual = [
        s for s in graph.steps if s.kind == StepKind.MATMUL and any(op.kind == PostOpKind.BINARY for op in s.post_ops())
    ]
    assert len(residual) == 2, [(s.kind.name, s.ints.get("post_ops")) for s in graph.steps]
    for step in residual:
        assert step.ints.get("compute_bf16") == [1]
        assert graph.values[step.outputs[0]].dtype == DType.F32, "the residual add's result should stay fp32"
    first_fc = next(s for s in graph.steps if s.kind == StepKind.MATMUL)
    assert graph.values[first_fc.outputs[0]].dtype == DType.BF16
    (got,) = execute(lower(model, inputs, OneDnnPartitioner(precision="bf16")).buffer, inputs)
    with torch.no_grad():
        expected = model(*inputs)
    error = mismatch("residual blocks in bf16", [got], [expected], MODEL_TOLERANCE)
    assert error is None, error


def test_fp32_lowering_is_untouched_by_default() -> None:
    model = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 8))
    graph = lower(model, (torch.randn(4, 32),)).payloads()[0]
    assert all(value.dtype == DType.F32 for value in graph.values)
    assert all("compute_bf16" not in step.ints for step in graph.steps)


class CumsumBetweenLinears(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.cumsum(self.first(x), dim=-1))  # no oneDNN rule for cumsum


def test_bf16_computation_left_to_executorch_is_reported() -> None:
    model, inputs = CumsumBetweenLinears().to(torch.bfloat16), (torch.randn(2, 8, dtype=torch.bfloat16),)
    with pytest.warns(RuntimeWarning, match=r"bf16 computations .*cumsum"):
        lowered = lower(model, inputs)
    assert lowered.undelegated_compute == ["aten::cumsum"]


def test_fp32_computation_left_to_executorch_is_not_reported() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        lowered = lower(CumsumBetweenLinears(), (torch.randn(2, 8),))
    assert lowered.undelegated_compute == ["aten::cumsum"]


def test_bf16_ops_without_a_rule_compute_in_fp32_with_the_transform_pass() -> None:
    model, inputs = CumsumBetweenLinears().to(torch.bfloat16), (torch.randn(2, 8, dtype=torch.bfloat16),)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # nothing bf16 is left to ExecuTorch's kernels
        edge = exir.to_edge_transform_and_lower(
            torch.export.export(model, inputs),
            transform_passes=[ComputeBf16FallbacksInFp32()],
            partitioner=[OneDnnPartitioner()],
        )
    calls, compute, _ = classify(edge.exported_program().graph)
    assert calls == 2 and compute == ["aten::cumsum"]
    cumsum = next(node for node in edge.exported_program().graph.nodes if "cumsum" in str(node.target))
    assert cumsum.meta["val"].dtype == torch.float32
    outputs = execute(edge.to_executorch().buffer, inputs)
    assert outputs[0].dtype == torch.bfloat16
    problem = mismatch("cumsum island", [outputs[0].float()], fp32_reference(model, inputs), OP_TOLERANCE)
    assert problem is None, problem
