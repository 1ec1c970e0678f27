"""ExecuTorch backend delegate running PyTorch programs on x86 CPUs through oneDNN.

Importing this package registers the C++ runtime (`OneDnnBackend`) with ExecuTorch's runtime in this
process, so `.pte` files using the delegate run through `executorch.runtime` with no further step.
"""

from ._runtime import library_path, load_runtime
from .onednn_preprocess import OneDnnBackend
from .partition import OneDnnPartitioner

try:
    load_runtime()
except ImportError as _error:  # AOT export still works without the runtime library
    import warnings

    warnings.warn(f"OneDnnBackend runtime not loaded: {_error}", RuntimeWarning, stacklevel=2)

__all__ = ["OneDnnBackend", "OneDnnPartitioner", "library_path", "load_runtime"]
