"""ExecuTorch backend delegate running PyTorch programs on x86 CPUs through oneDNN.

Importing this package registers the C++ runtime (`OneDnnBackend`) with ExecuTorch's runtime in this
process, so `.pte` files using the delegate run through `executorch.runtime` with no further step.
`set_num_threads()`/`get_num_threads()` set and read how many threads it runs oneDNN on.
"""

from ._runtime import get_num_threads, library_path, load_runtime, set_num_threads
from .onednn_preprocess import OneDnnBackend
from .partition import OneDnnPartitioner

try:
    load_runtime()
except ImportError as _error:  # AOT export still works without the runtime library
    import warnings

    warnings.warn(f"OneDnnBackend runtime not loaded: {_error}", RuntimeWarning, stacklevel=2)

__all__ = [
    "OneDnnBackend",
    "OneDnnPartitioner",
    "get_num_threads",
    "library_path",
    "load_runtime",
    "set_num_threads",
]
