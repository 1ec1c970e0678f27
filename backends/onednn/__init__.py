# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""ExecuTorch backend delegate running PyTorch programs on x86 CPUs through oneDNN.

Importing this package registers the C++ runtime (`OneDnnBackend`) with ExecuTorch's runtime in this
process, so `.pte` files using the delegate run through `executorch.runtime` with no further step.
`set_num_threads()`/`get_num_threads()` set and read how many threads it runs oneDNN on;
`set_max_isa()`/`effective_isa()` cap and read the instruction set oneDNN dispatches to
(`has_bf16_instructions()`/`int8_products_exact()` say what it can compute natively); `set_verbose()`
turns on oneDNN's log of each primitive it runs; `set_winograd()` says where 3x3 convolutions compute
through Winograd; `set_int4_products()` how an 8da4w prompt multiplies int4 weights on AMX; `set_huge_pages()` whether
streamed weights are copied into 2 MiB pages at load;
`onednn_version()` names the oneDNN inside the runtime; `torch_threads(1)` keeps torch's
thread pool off the cores while ExecuTorch runs a program from Python.
"""

from ._runtime import (
    RuntimeLibraryMissing,
    effective_isa,
    get_num_threads,
    has_bf16_instructions,
    int8_products_exact,
    library_path,
    load_runtime,
    onednn_version,
    set_huge_pages,
    set_int4_products,
    set_max_isa,
    set_num_threads,
    set_verbose,
    set_winograd,
    torch_threads,
)
from .onednn_preprocess import OneDnnBackend
from .partition import ComputeBf16FallbacksInFp32, OneDnnPartitioner

# A runtime library that is there but does not load or register fails the import, here, with its
# reason: a warning would leave every program to fail far away ("Backend OneDnnBackend is not
# registered"). Without the library (a source checkout, AOT export only) a warning is enough.
try:
    load_runtime()
except RuntimeLibraryMissing as _missing:
    import warnings

    warnings.warn(f"OneDnnBackend runtime not loaded: {_missing}", RuntimeWarning, stacklevel=2)

__all__ = [
    "ComputeBf16FallbacksInFp32",
    "OneDnnBackend",
    "OneDnnPartitioner",
    "RuntimeLibraryMissing",
    "effective_isa",
    "get_num_threads",
    "has_bf16_instructions",
    "int8_products_exact",
    "library_path",
    "load_runtime",
    "onednn_version",
    "set_huge_pages",
    "set_int4_products",
    "set_max_isa",
    "set_num_threads",
    "set_verbose",
    "set_winograd",
    "torch_threads",
]
