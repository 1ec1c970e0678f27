# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""ExecuTorch's LLM custom ops (`executorch.extension.llm.custom_ops`, what export_llm writes with
`model.use_sdpa_with_kv_cache=True`).

`llama::custom_sdpa(q, k_cache, v_cache, start_pos, None, 0.0, is_causal)` attends the S queries at
positions start_pos .. start_pos + S - 1 ([B, S, H, D]) to the first start_pos + S entries of the
caches ([B, L, Hkv, D]). start_pos is a SymInt read from a tensor (`input_pos[0].item()`: a
`_local_scalar_dense` of an int64 value), so it changes from call to call without new shapes:

    custom_sdpa(q, k, v, _local_scalar_dense(p), ...)   ->  CACHED_ATTENTION(q, k, v, p; causal, scale)

The `_local_scalar_dense` lowers to nothing (the step reads p's one element at run time); it is taken
only when custom_sdpa is its only user, so no SymInt crosses the delegate's boundary.
The ops are matched by name: importing the delegate does not load the custom-ops library.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch.fx import Node

from ..serialization.schema import MAX_ATTENTION_VALUE_WIDTH, StepKind
from .affine import op_name
from .arguments import arg
from .context import LoweringContext, Unsupported, fake_tensor
from .rules import OpRule

CUSTOM_SDPA = "llama::custom_sdpa"
READ_SCALAR = "aten::_local_scalar_dense"
INDICES = {torch.int64}


def _start_tensor(node: Node) -> Node:
    """The int64 value whose one element is custom_sdpa's start position."""
    start = arg(node, 3, "start_pos")
    if not isinstance(start, Node) or op_name(start) != READ_SCALAR:
        raise Unsupported(f"{node.name}: start_pos={start!r}, expected a value read from an int64 tensor")
    source = start.args[0]
    if not isinstance(source, Node) or fake_tensor(source).dtype != torch.int64 or fake_tensor(source).numel() != 1:
        raise Unsupported(f"{node.name}: start_pos read from {source!r}, expected one int64 value")
    return source


def lower_custom_sdpa(ctx: LoweringContext, node: Node) -> None:
    q, k, v = (arg(node, i, name) for i, name in enumerate(("query", "key", "value")))
    for name, operand in (("query", q), ("key cache", k), ("value cache", v)):
        if not isinstance(operand, Node) or fake_tensor(operand).dtype != torch.float32:
            raise Unsupported(f"{node.name}: the {name} must be a float32 tensor")
        if fake_tensor(operand).dim() != 4:
            raise Unsupported(f"{node.name}: the {name} must have rank 4")
    if arg(node, 4, "attn_mask") is not None:
        raise Unsupported(f"{node.name}: custom_sdpa with an attention mask")
    if arg(node, 5, "drpout_p", 0.0) != 0.0:
        raise Unsupported(f"{node.name}: custom_sdpa with dropout")
    causal = arg(node, 6, "is_causal", False)
    scale = arg(node, 7, "scale")
    query, key = fake_tensor(q), fake_tensor(k)
    if key.shape[2] == 0 or query.shape[2] % key.shape[2] != 0:
        raise Unsupported(f"{node.name}: query heads {query.shape[2]} not a multiple of key heads {key.shape[2]}")
    if fake_tensor(v).shape[3] > MAX_ATTENTION_VALUE_WIDTH:
        raise Unsupported(f"{node.name}: value width {fake_tensor(v).shape[3]} > {MAX_ATTENTION_VALUE_WIDTH}")
    width = int(query.shape[3])
    ints = {"causal": [int(bool(causal))]}
    floats = {"scale": [1.0 / math.sqrt(width) if scale is None else float(scale)]}
    inputs = [ctx.value(q), ctx.value(k), ctx.value(v), ctx.value(_start_tensor(node), INDICES)]
    ctx.emit(StepKind.CACHED_ATTENTION, inputs, [ctx.output(node)], ints, floats)


def lower_nothing(ctx: LoweringContext, node: Node) -> None:
    """A start position: custom_sdpa's lowering reads through it."""


def read_by_custom_sdpa_only(node: Node, supported: Callable[[Node], bool]) -> str | None:
    if not node.users or any(op_name(user) != CUSTOM_SDPA or not supported(user) for user in node.users):
        return f"{node.name}: a scalar read for an op other than a delegated custom_sdpa"
    return None


LLM_OP_RULES: dict[object, OpRule] = {
    CUSTOM_SDPA: OpRule(lower_custom_sdpa),
    READ_SCALAR: OpRule(lower_nothing, compute=False, users_ok=read_by_custom_sdpa_only, pattern_member=True),
}
