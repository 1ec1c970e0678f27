# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Elementwise steps and residual binaries become post-ops of the step producing their input.

oneDNN applies post-ops to a convolution's or matmul's result while it is still in registers or cache:
conv -> relu -> add(residual) is one pass over memory instead of three. Which kinds take post-ops, and
how many fixed inputs come before the post-op operands, is a column of serialization/step_kinds.py.
"""

from __future__ import annotations

from ..serialization.payload import Graph, Step
from ..serialization.schema import HOST_ELTWISE_ALGS, NO_VALUE, EltwiseAlg, PostOpKind, StepKind
from ..serialization.shapes import same_dims
from ..serialization.step_kinds import BINARY_POST_OP_HOSTS, COMMUTATIVE, POST_OP_FIXED_INPUTS

# oneDNN (3.2, 3.13.1) turns a NaN into a number in these. A standalone step puts it back; a post-op chain can be
# guarded only for relu and clamp (the runtime reruns the step up to the clamp, then the rest of the
# chain with the clamps on the host), so these stay standalone, and a clamp fuses only when it keeps
# the zeros that pad a blocked layout.
NAN_LOSING_POST_OPS = {EltwiseAlg.EXP, EltwiseAlg.HARDSIGMOID}


def fuse_post_ops(graph: Graph) -> Graph:
    """Fold elementwise steps and residual binaries into the step producing their input."""
    index = 0
    while index < len(graph.steps):
        step = graph.steps[index]
        host = _fusion_host(graph, index, step)
        if host is None:
            index += 1
            continue
        host_step, operand, reshape = host
        params = (step.floats["alpha"][0], step.floats["beta"][0]) if step.kind == StepKind.ELTWISE else (0.0, 0.0)
        kind = PostOpKind.ELTWISE if step.kind == StepKind.ELTWISE else PostOpKind.BINARY
        host_step.ints.setdefault("post_ops", []).extend([kind, step.ints["alg"][0]])
        host_step.floats.setdefault("post_op_params", []).extend(params)
        if operand is not None:
            fixed = POST_OP_FIXED_INPUTS[host_step.kind]
            while len(host_step.inputs) < fixed:
                host_step.inputs.append(NO_VALUE)
            host_step.inputs.append(operand)
        if reshape is None:
            host_step.outputs = list(step.outputs)
        else:  # the host's result goes on through the reshape, which now yields the eltwise's result
            reshape.outputs = list(step.outputs)
            host_step.sources |= step.sources  # the eltwise's time is now the host's
        del graph.steps[index]
    return graph


def _fusion_host(graph: Graph, index: int, step: Step) -> tuple[Step, int | None, Step | None] | None:
    """The earlier step this one can become a post-op of, the binary operand it brings, and the reshape
    between them, if any."""
    if step.kind == StepKind.ELTWISE and _fusable_eltwise(step):
        candidates = [(step.inputs[0], None)]
        hosts = frozenset(POST_OP_FIXED_INPUTS)
    elif step.kind == StepKind.BINARY and "post_ops" not in step.ints:
        src0, src1 = step.inputs
        candidates = [(src0, src1)]
        if step.ints["alg"][0] in COMMUTATIVE:
            candidates.append((src1, src0))
        hosts = BINARY_POST_OP_HOSTS
    else:
        return None
    producers, consumers = graph.producers(), graph.consumers()
    out_dims = graph.values[step.outputs[0]].dims
    for src, operand in candidates:
        if src not in producers or src in graph.outputs or consumers.get(src) != [index]:
            continue
        host_index = producers[src]
        host, reshape = graph.steps[host_index], None
        if operand is None and host.kind == StepKind.RESHAPE:
            # An eltwise commutes with a reshape: Hugging Face's Conv1D computes a 2-D matmul and
            # reshapes it before the activation.
            reshape, reshape_index, src = host, host_index, host.inputs[0]
            if src not in producers or src in graph.outputs or consumers.get(src) != [reshape_index]:
                continue
            host_index = producers[src]
            host = graph.steps[host_index]
            out_dims = graph.values[src].dims
        if host.kind not in hosts or not same_dims(graph.values[src].dims, out_dims):
            continue
        if operand is not None and (operand == src or producers.get(operand, -1) >= host_index):
            continue
        return host, operand, reshape
    return None


def _fusable_eltwise(step: Step) -> bool:
    alg, alpha, beta = step.ints["alg"][0], step.floats["alpha"][0], step.floats["beta"][0]
    if alg in HOST_ELTWISE_ALGS or alg in NAN_LOSING_POST_OPS:
        return False
    return alg != EltwiseAlg.CLIP or alpha <= 0.0 <= beta
