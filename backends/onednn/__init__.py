"""ExecuTorch backend delegate running PyTorch programs on x86 CPUs through oneDNN.

Importing this package registers the C++ runtime (`OneDnnBackend`) with ExecuTorch's runtime in this
process, so `.pte` files using the delegate run through `executorch.runtime` with no further step.
`set_num_threads()`/`get_num_threads()` set and read how many threads it runs oneDNN on;
`set_max_isa()`/`effective_isa()` cap and read the instruction set oneDNN dispatches to
(`has_bf16_instructions()`/`int8_products_exact()` say what it can compute natively); `set_verbose()`
turns on oneDNN's log of each primitive it runs; `set_winograd()` says where 3x3 convolutions compute
through Winograd; `onednn_version()` names the oneDNN inside the runtime.
"""

from ._runtime import (
    effective_isa,
    get_num_threads,
    has_bf16_instructions,
    int8_products_exact,
    library_path,
    load_runtime,
    onednn_version,
    set_max_isa,
    set_num_threads,
    set_verbose,
    set_winograd,
)
from .onednn_preprocess import OneDnnBackend
from .partition import ComputeBf16FallbacksInFp32, OneDnnPartitioner

try:
    load_runtime()
except ImportError as _error:  # AOT export still works without the runtime library
    import warnings

    warnings.warn(f"OneDnnBackend runtime not loaded: {_error}", RuntimeWarning, stacklevel=2)

__all__ = [
    "ComputeBf16FallbacksInFp32",
    "OneDnnBackend",
    "OneDnnPartitioner",
    "effective_isa",
    "get_num_threads",
    "has_bf16_instructions",
    "int8_products_exact",
    "library_path",
    "load_runtime",
    "onednn_version",
    "set_max_isa",
    "set_num_threads",
    "set_verbose",
    "set_winograd",
]
