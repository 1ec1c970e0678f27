"""Loads the C++ runtime into this process so ExecuTorch's runtime can find `OneDnnBackend`."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

LIBRARY_NAME = "libexecutorch_backend_onednn.so"
_loaded: ctypes.CDLL | None = None


def library_path() -> Path:
    """The installed runtime, or the one named by ONEDNN_BACKEND_LIBRARY (a development build)."""
    override = os.environ.get("ONEDNN_BACKEND_LIBRARY")
    return Path(override) if override else Path(__file__).resolve().parent / LIBRARY_NAME


def load_runtime() -> ctypes.CDLL:
    """Register OneDnnBackend with the ExecuTorch runtime of this process (idempotent)."""
    global _loaded
    if _loaded is not None:
        return _loaded
    path = library_path()
    if not path.exists():
        raise ImportError(
            f"{path} is missing: install executorch-onednn with pip (see backends/onednn/setup.md) to build the runtime"
        )
    # The pybindings and our library must share one libexecutorch.so, hence one backend registry.
    import executorch.extension.pybindings.portable_lib  # noqa: F401

    try:
        _loaded = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    except OSError as error:  # e.g. libdnnl.so.3 or libtbb.so.12 not where the RPATH says
        raise ImportError(f"cannot load {path}: {error}; see backends/onednn/setup.md") from error
    return _loaded
