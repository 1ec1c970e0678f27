# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""pytest plugin (`-p suite_plugin`) adding our flows to the conformance suite's registry.

The suite builds its `test_runner` fixture from `flow.all_flows()` when its conftest is imported, and
offers no registration hook; plugins named with `-p` load before any conftest, so wrapping
`all_flows` here is enough and the installed package stays untouched.
"""

from __future__ import annotations

import importlib.util
import os
import zlib
from pathlib import Path

import cia_materialization
import executorch.backends.test.suite.flow as suite_flow
import pytest
import torch
from flows import ONEDNN_FLOWS

_stock_all_flows = suite_flow.all_flows


def _all_flows_with_onednn() -> dict[str, suite_flow.TestFlow]:
    return _stock_all_flows() | {flow.name: flow for flow in ONEDNN_FLOWS}


def _declare_torchvision_ops_if_unloadable() -> None:
    """PyPI's torchvision is built against PyTorch's CUDA wheel: next to the CPU wheel its compiled ops
    (nms, roi_align, ...) fail to load, and `import torchvision` then fails registering fake kernels for
    nms and qnms. Declaring those two schemas lets the pure-Python models of the model suite import;
    calling either op still fails, with "no kernel" (the suite's classification models call neither)."""
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        return
    library = next(Path(spec.origin).parent.glob("_C.*so"), None)
    try:
        if library is not None:
            torch.ops.load_library(str(library))
            return
    except OSError:
        pass
    for op in ("nms", "qnms"):
        torch.library.define(f"torchvision::{op}", "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")


def in_shard(nodeid: str, shard: str) -> bool:
    """Whether test `nodeid` belongs to shard "K/N" (by a hash of its id: the same tests every run)."""
    index, _, count = shard.partition("/")
    return zlib.crc32(nodeid.encode()) % int(count) == int(index)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    shard = os.environ.get("ONEDNN_SUITE_SHARD")
    if not shard:
        return
    kept, dropped = [], []
    for item in items:
        (kept if in_shard(item.nodeid, shard) else dropped).append(item)
    config.hook.pytest_deselected(items=dropped)
    items[:] = kept


suite_flow.all_flows = _all_flows_with_onednn
cia_materialization.install()
_declare_torchvision_ops_if_unloadable()
