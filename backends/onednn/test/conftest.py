# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Shared pytest setup: the repo root on sys.path (for `examples.onednn`), fixed seeds, one worker."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[3]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
# pytest imports backends/onednn/__init__.py itself (to look for setup_module), as a top-level package
# `onednn`: that would define a second OneDnnBackend class, and ExecuTorch lowers with whichever
# BackendDetails subclass of that name it finds last. Point the name at the one package instead.
sys.modules.setdefault("onednn", importlib.import_module("executorch.backends.onednn"))

import cia_materialization  # noqa: E402  (after sys.path: it lives next to this file)

cia_materialization.install()

# The spawned worker that runs programs re-imports from these paths too.
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(REPO_ROOT), str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")) if p
)


@pytest.fixture(autouse=True)
def fixed_seed() -> None:
    torch.manual_seed(0)


@pytest.fixture(scope="session", autouse=True)
def program_worker() -> Iterator[None]:
    yield
    import tester

    tester.shutdown_worker()
