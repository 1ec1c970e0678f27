"""Rewrites of the lowered payload Graph, run by preprocess in this order."""

from __future__ import annotations

from collections.abc import Callable

from ..serialization.payload import Graph
from .compact import drop_unused
from .fold_arithmetic import drop_neutral_binaries, fold_operand_scales
from .fold_batch_norm import fold_batch_norm
from .fuse_post_ops import fuse_post_ops
from .fuse_requantize import fuse_requantize
from .mixed_precision import compute_in_bf16
from .simplify_layout import simplify_layout

GraphPass = Callable[[Graph], Graph]
PASSES: list[GraphPass] = [
    fold_batch_norm,
    simplify_layout,
    drop_neutral_binaries,
    fold_operand_scales,
    fuse_post_ops,
    fuse_requantize,
    drop_unused,
]


def run_passes(graph: Graph, passes: list[GraphPass] | None = None) -> Graph:
    for graph_pass in PASSES if passes is None else passes:
        graph = graph_pass(graph)
    return graph


__all__ = [
    "PASSES",
    "compute_in_bf16",
    "drop_neutral_binaries",
    "drop_unused",
    "fold_batch_norm",
    "fold_operand_scales",
    "fuse_post_ops",
    "fuse_requantize",
    "run_passes",
    "simplify_layout",
]
