# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Rewrites of the lowered payload Graph, run by preprocess in this order (then compute_in_bf16 and
store_group_scales_in_bf16 when asked for, and plan_layouts last). Each module is named after the pass
it holds (fold_arithmetic holds three: drop_neutral_binaries, fold_operand_scales and
fold_channel_scales; provenance holds no pass, but how sources follow the steps through every pass)."""

from __future__ import annotations

from collections.abc import Callable

from ..serialization.payload import Graph
from .compute_in_bf16 import compute_in_bf16
from .drop_unused import drop_unused
from .fold_arithmetic import drop_neutral_binaries, fold_channel_scales, fold_operand_scales
from .fold_batch_norm import fold_batch_norm
from .fold_channel_gates import fold_channel_gates
from .fuse_attention import fuse_attention
from .fuse_interleaved_rotary import fuse_interleaved_rotary
from .fuse_post_ops import fuse_post_ops
from .fuse_requantize import fuse_requantize
from .fuse_rms_norm import fuse_rms_norm
from .plan_layouts import plan_layouts
from .provenance import keeping_sources
from .quantize_matmuls_dynamically import quantize_matmuls_dynamically
from .recognize_activations import recognize_activations
from .rotate_half_as_matmul import rotate_half_as_matmul
from .simplify_layout import simplify_layout
from .store_group_scales_in_bf16 import store_group_scales_in_bf16

GraphPass = Callable[[Graph], Graph]
PASSES: list[GraphPass] = [
    fold_batch_norm,
    simplify_layout,
    drop_neutral_binaries,
    fold_operand_scales,
    fold_channel_scales,
    fold_channel_gates,
    rotate_half_as_matmul,
    fuse_interleaved_rotary,
    fuse_rms_norm,
    fuse_post_ops,
    recognize_activations,
    fuse_attention,
    fuse_requantize,
    drop_unused,
]


def run_passes(graph: Graph, passes: list[GraphPass] | None = None) -> Graph:
    for graph_pass in PASSES if passes is None else passes:
        graph = keeping_sources(graph_pass, graph)
    return graph


def passes_for(dynamic_int8: bool) -> list[GraphPass]:
    """PASSES, with the dynamic int8 rewrite of linear layers before the fusions when asked for (and
    before rotate_half's matmuls, which stay exact in fp32)."""
    if not dynamic_int8:
        return PASSES
    at = PASSES.index(rotate_half_as_matmul)
    return [*PASSES[:at], quantize_matmuls_dynamically, *PASSES[at:]]


__all__ = [
    "PASSES",
    "compute_in_bf16",
    "drop_neutral_binaries",
    "drop_unused",
    "fold_batch_norm",
    "fold_channel_gates",
    "fold_channel_scales",
    "fold_operand_scales",
    "fuse_attention",
    "fuse_interleaved_rotary",
    "fuse_post_ops",
    "fuse_requantize",
    "fuse_rms_norm",
    "keeping_sources",
    "passes_for",
    "plan_layouts",
    "quantize_matmuls_dynamically",
    "recognize_activations",
    "rotate_half_as_matmul",
    "run_passes",
    "simplify_layout",
    "store_group_scales_in_bf16",
]
