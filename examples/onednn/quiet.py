# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Silences the third-party messages the main job would otherwise print around its table, each by its
known text, where it is produced; anything else still shows. Import before torch and executorch.

- torchao logs a warning per optional CUDA kernel library it cannot load on a CPU-only machine
  ("Failed to load .../torchao/_C_mxfp8...so");
- torch's pytree logs that registering an Enum constant (torchao's KernelPreference) is deprecated;
- exir deep-copies tree specs through the deprecated `LeafSpec` isinstance check (FutureWarning);
- ExecuTorch's threadpool logs how it read the CPU topology when it starts (C++, Info level, which the
  wheel's runtime prints): `start_threadpool_quietly()`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from collections.abc import Iterator


class _DropMessages(logging.Filter):
    """Drops a record whose message holds every one of `fragments`."""

    def __init__(self, *fragments: str) -> None:
        super().__init__()
        self.fragments = fragments

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not all(fragment in message for fragment in self.fragments)


logging.getLogger("torchao").addFilter(_DropMessages("Failed to load", "/torchao/_C"))
logging.getLogger("torch.utils._pytree").addFilter(
    _DropMessages("is an Enum subclass and is now natively supported by torch.compile")
)
warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated", category=FutureWarning)


@contextlib.contextmanager
def _stderr_discarded() -> Iterator[None]:
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def start_threadpool_quietly() -> int:
    """Starts ExecuTorch's threadpool (XNNPACK's and the optimized kernels', whose size our delegate takes by
    default) without its start-up lines; its thread count."""
    from executorch.extension.pybindings import portable_lib

    with _stderr_discarded():
        return portable_lib._threadpool_get_thread_count()
