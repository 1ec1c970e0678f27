# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""serialization/step_kinds.py: every step kind has one row, the rows agree with each other, and the
passes act on what the rows say."""

from __future__ import annotations

import pytest
import torch
from executorch.backends.onednn._passes import fuse_post_ops
from executorch.backends.onednn._passes.recognize_activations import BINARY
from executorch.backends.onednn.serialization.payload import Graph, PostOp, Step
from executorch.backends.onednn.serialization.schema import BinaryAlg, DType, EltwiseAlg, PostOpKind, StepKind
from executorch.backends.onednn.serialization.step_kinds import (
    BINARY_POST_OP_HOSTS,
    COMMUTATIVE,
    POST_OP_FIXED_INPUTS,
    REQUANTIZE_HOSTS,
    STEP_KINDS,
    LayoutRole,
)


def test_every_step_kind_has_one_row_in_step_kind_order() -> None:
    missing = sorted(kind.name for kind in set(StepKind) - set(STEP_KINDS))
    assert not missing, f"StepKinds without a row in STEP_KINDS: {missing}"
    assert list(STEP_KINDS) == list(StepKind), "STEP_KINDS rows are not in StepKind order"


@pytest.mark.parametrize("kind", list(StepKind), ids=lambda kind: kind.name)
def test_step_kind_row_is_consistent(kind: StepKind) -> None:
    row = STEP_KINDS[kind]
    if row.binary_post_op_host or row.requantize_host:
        assert row.post_op_fixed_inputs is not None, f"{kind.name} hosts post-ops but has no fixed input count"
    if row.post_op_fixed_inputs is not None:
        assert row.post_op_fixed_inputs >= 1, f"{kind.name}: post-op operands must follow its own inputs"
    dtype_rules = [row.computes_in_bf16, row.keeps_fp32, row.follows_input_dtype]
    assert sum(dtype_rules) <= 1, f"{kind.name}: more than one bf16 rule (compute, keep fp32, follow input)"
    if row.host_index:
        assert row.post_op_fixed_inputs is None, f"{kind.name}: a host index step cannot take oneDNN post-ops"
        assert row.layout == LayoutRole.WRITES_PLAIN, f"{kind.name}: a host index step writes plain memory"
        assert not row.computes_in_bf16, f"{kind.name}: a host index step runs no oneDNN kernel"
    if row.layout == LayoutRole.CHOOSES:
        assert not row.reads_plain, f"{kind.name}: a primitive choosing its layout does not need plain input"


def test_requantize_hosts_are_matrix_steps_with_post_ops() -> None:
    assert REQUANTIZE_HOSTS <= BINARY_POST_OP_HOSTS, "an int8 requantize host must take the post-ops before it"


@pytest.mark.parametrize("alg", list(BinaryAlg), ids=lambda alg: alg.name)
def test_commutative_holds_exactly_the_algorithms_whose_operands_swap(alg: BinaryAlg) -> None:
    a, b = torch.randn(64), torch.randn(64)
    op = BINARY[alg]
    swaps = torch.equal(op(a, b), op(b, a))
    assert (alg in COMMUTATIVE) == swaps, f"{alg.name}: in COMMUTATIVE={alg in COMMUTATIVE}, swaps={swaps}"


# The attributes fuse_post_ops reads of a step of these kinds: a relu, an add.
OWN_ATTRIBUTES: dict[StepKind, tuple[dict[str, list[int]], dict[str, list[float]]]] = {
    StepKind.ELTWISE: ({"alg": [EltwiseAlg.RELU]}, {"alpha": [0.0], "beta": [0.0]}),
    StepKind.BINARY: ({"alg": [BinaryAlg.ADD]}, {}),
}


def host_graph(kind: StepKind, binary: BinaryAlg | None) -> tuple[Graph, Step]:
    """A step of `kind` whose result only a relu (binary is None) or a residual `binary` reads."""
    graph = Graph()
    dims = (1, 4, 3, 3)
    inputs = [graph.add_value(DType.F32, dims) for _ in range(POST_OP_FIXED_INPUTS.get(kind, 2))]
    residual = graph.add_value(DType.F32, dims)
    hosted, result = graph.add_value(DType.F32, dims), graph.add_value(DType.F32, dims)
    host = graph.add_step(Step(kind, inputs, [hosted], *OWN_ATTRIBUTES.get(kind, ({}, {}))))
    if binary is None:
        follower = Step(StepKind.ELTWISE, [hosted], [result], *OWN_ATTRIBUTES[StepKind.ELTWISE])
    else:
        follower = Step(StepKind.BINARY, [hosted, residual], [result], {"alg": [binary]})
    graph.add_step(follower)
    graph.inputs, graph.outputs = [*inputs, residual], [result]
    return graph, host


@pytest.mark.parametrize("kind", list(StepKind), ids=lambda kind: kind.name)
def test_fuse_post_ops_hosts_an_eltwise_exactly_on_kinds_taking_post_ops(kind: StepKind) -> None:
    graph, host = host_graph(kind, binary=None)
    fused = fuse_post_ops(graph)
    expected = [PostOp(PostOpKind.ELTWISE, EltwiseAlg.RELU, 0.0, 0.0)]
    if kind in POST_OP_FIXED_INPUTS:
        assert fused.steps == [host] and host.post_ops() == expected, f"relu not fused into {kind.name}"
    else:
        assert len(fused.steps) == 2, f"relu fused into {kind.name}, which takes no post-ops"


@pytest.mark.parametrize("kind", list(StepKind), ids=lambda kind: kind.name)
def test_fuse_post_ops_hosts_a_residual_add_exactly_on_binary_post_op_hosts(kind: StepKind) -> None:
    graph, host = host_graph(kind, binary=BinaryAlg.ADD)
    residual = graph.inputs[-1]
    fused = fuse_post_ops(graph)
    if kind in BINARY_POST_OP_HOSTS:
        assert fused.steps == [host], f"residual add not fused into {kind.name}"
        assert host.inputs[POST_OP_FIXED_INPUTS[kind]] == residual, f"{kind.name}: operand after the fixed inputs"
    else:
        assert len(fused.steps) == 2, f"residual add fused into {kind.name}, which takes no binary post-op"
