# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Every op in OP_RULES: nn.Module -> .pte -> run through OneDnnBackend -> compare with eager."""

from __future__ import annotations

import pytest
import torch
from executorch.backends.onednn.ops import OP_RULES
from op_cases import CASES, OpCase
from support import SIZE_ARITHMETIC_OPS, Fn
from tester import op_name, run_and_compare

# Rules that torch.export + to_edge never hand to the partitioner as such (kept for other front ends).
UNREACHABLE_FROM_EXPORT = {
    "aten::transpose_copy": "export turns transpose into permute_copy",
    "aten::clone": "to_edge turns clone into dim_order_ops::_clone_dim_order",
}
# Rules whose ops only a PT2E-quantized model contains: test_int8.py runs them end to end.
COVERED_BY_TEST_INT8 = {
    "quantized_decomposed::quantize_per_tensor",
    "quantized_decomposed::dequantize_per_tensor",
    "quantized_decomposed::dequantize_per_channel",  # test_weights_too_large_to_fold_are_read_as_int8
}
# ops/affine.py's rows, keyed by name: each mode, group and embedding in test_affine_quantization.py.
COVERED_BY_TEST_AFFINE_QUANTIZATION = {
    "torchao::dequantize_affine",
    "torchao::quantize_affine",
    "torchao::choose_qparams_affine",
    "quantized_decomposed::embedding_4bit",
    "quantized_decomposed::embedding_4bit.dtype",
    "quantized_decomposed::embedding_byte",
    "quantized_decomposed::embedding_byte.dtype",
}

# ops/llm_ops.py's rows (export_llm's attention over a KV cache and the read of its start): run at
# several starts of one loaded program, against the custom op's own kernel, in test_cached_attention.py.
COVERED_BY_TEST_CACHED_ATTENTION = {"llama::custom_sdpa", "aten::_local_scalar_dense"}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_op_is_delegated_and_matches_eager(case: OpCase) -> None:
    config = case.compile_config()
    outcome = run_and_compare(case.id, case.model(), case.inputs(), case.tolerance, compile_config=config)
    outcome.assert_delegated()
    missing = set(case.ops) - outcome.lowered.delegated_ops
    assert not missing, f"{case.id}: {sorted(missing)} not inside the delegate ({outcome.lowered.describe()})"
    outcome.assert_matches()


ROUNDING = {"round": torch.round, "floor": torch.floor, "ceil": torch.ceil, "trunc": torch.trunc, "log1p": torch.log1p}


@pytest.mark.parametrize("name", sorted(ROUNDING))
def test_rounding_and_log1p_are_exact_at_the_edges(name: str) -> None:
    """Ties (round to even), signed zeros, infinities, NaN, values beyond 2^23: bit for bit as PyTorch
    computes them; log1p within an ulp, tiny values included (log(1 + x) would give 0)."""
    edges = [0.5, 1.5, 2.5, -0.5, -1.5, -0.0, 0.0, 2.0**23 + 1, -(2.0**24), 1e-10, -1e-10, 0.49999997]
    x = torch.tensor([*edges, float("inf"), float("-inf"), float("nan")])
    outcome = run_and_compare(name, Fn(lambda m, t: ROUNDING[name](t)), (x,), tolerance=0.0)
    outcome.assert_delegated()
    expected = ROUNDING[name](x)
    assert torch.equal(outcome.outputs[0].isnan(), expected.isnan())
    finite = ~expected.isnan()
    got, want = outcome.outputs[0][finite], expected[finite]
    if name == "log1p":
        torch.testing.assert_close(got, want, rtol=2.5e-7, atol=0.0)
    else:
        assert torch.equal(got, want), (got, want)
    assert torch.equal(got.signbit(), want.signbit())


def test_every_rule_has_an_op_case() -> None:
    """A row added to OP_RULES without a case in op_cases.py fails this test."""
    covered = {op for case in CASES for op in case.ops}
    rule_names = {op_name(target) for target in OP_RULES} - {"getitem"} - set(UNREACHABLE_FROM_EXPORT)
    rule_names -= COVERED_BY_TEST_INT8 | COVERED_BY_TEST_AFFINE_QUANTIZATION | COVERED_BY_TEST_CACHED_ATTENTION
    rule_names -= SIZE_ARITHMETIC_OPS
    assert not rule_names - covered, f"OP_RULES entries without an op case: {sorted(rule_names - covered)}"
