# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""Loads the C++ runtime into this process so ExecuTorch's runtime can find `OneDnnBackend`, and
sets the number of threads it runs oneDNN on (ExecuTorch's Python runtime has no backend options)."""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Iterator
from pathlib import Path

LIBRARY_NAME = "libexecutorch_backend_onednn.so"
BACKEND_NAME = "OneDnnBackend"
_loaded: ctypes.CDLL | None = None


class RuntimeLibraryMissing(ImportError):
    """No runtime library at library_path(): AOT export (partition, preprocess) still works."""


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
        raise RuntimeLibraryMissing(
            f"{path} is missing: install executorch-onednn with pip (see backends/onednn/setup.md) to build the runtime"
        )
    # The pybindings and our library must share one libexecutorch.so, hence one backend registry.
    from executorch.runtime import Runtime

    try:
        library = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    except OSError as error:  # e.g. libexecutorch.so not where the RPATH says, or a broken file
        raise ImportError(f"cannot load {path}: {error}; see backends/onednn/setup.md") from error
    if not Runtime.get().backend_registry.is_available(BACKEND_NAME):
        raise ImportError(
            f"{path} loaded but {BACKEND_NAME} is not in the registry of executorch.runtime: the library was "
            "built against another executorch than the one imported here (backends/onednn/setup.md)"
        )
    _loaded = library
    return _loaded


class _DnnlVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("patch", ctypes.c_int),
                ("hash", ctypes.c_char_p), ("cpu_runtime", ctypes.c_uint)]  # fmt: skip


_DNNL_RUNTIMES = {0: "none", 1: "sequential", 2: "OpenMP", 4: "TBB", 8: "threadpool"}


def onednn_version() -> str:
    """The oneDNN the runtime runs on, e.g. "3.13.1 (5f93c2194d, threadpool)": version, commit, threading."""
    library = load_runtime()
    try:
        own = library.onednn_backend_onednn_version
    except AttributeError:  # a runtime linking a shared libdnnl (ONEDNN_BACKEND_LIBRARY, older builds)
        dnnl_version = ctypes.CDLL(None).dnnl_version
        dnnl_version.restype = ctypes.POINTER(_DnnlVersion)
        v = dnnl_version().contents
        runtime = _DNNL_RUNTIMES.get(v.cpu_runtime, str(v.cpu_runtime))
        return f"{v.major}.{v.minor}.{v.patch} ({(v.hash or b'').decode()[:10]}, {runtime})"
    own.argtypes = []
    own.restype = ctypes.c_char_p
    return own().decode()


# executorch::runtime::Error codes the thread-count functions return.
_ERROR_OK = 0x00
_ERROR_INVALID_ARGUMENT = 0x12


def _check(code: int, call: str) -> None:
    if code == _ERROR_INVALID_ARGUMENT:
        raise ValueError(f"OneDnnBackend refused {call}; its log says why")
    if code != _ERROR_OK:
        raise RuntimeError(f"OneDnnBackend: {call} failed with ExecuTorch error 0x{code:02x}; see its log")


def set_num_threads(threads: int | None) -> None:
    """Threads oneDNN may use from the next program load or execution on; None or 0: the default.

    Same as the backend option "num_threads". The default is ONEDNN_BACKEND_NUM_THREADS when set,
    else the size of ExecuTorch's threadpool. Kernels are sized for the count at load: set it first.
    """
    if threads is None:
        threads = 0
    if isinstance(threads, bool) or not isinstance(threads, int):
        raise ValueError(f"set_num_threads expects an int or None, got {threads!r}")
    if not 0 <= threads < 2**31:
        raise ValueError(f"set_num_threads expects a count >= 0 (0: the default), got {threads}")
    library = load_runtime()
    library.onednn_backend_set_num_threads.argtypes = [ctypes.c_int]
    library.onednn_backend_set_num_threads.restype = ctypes.c_int
    _check(library.onednn_backend_set_num_threads(threads), f"set_num_threads({threads})")


def get_num_threads() -> int:
    """The number of threads oneDNN runs with now (what the backend option "num_threads" reports)."""
    library = load_runtime()
    library.onednn_backend_get_num_threads.argtypes = [ctypes.POINTER(ctypes.c_int)]
    library.onednn_backend_get_num_threads.restype = ctypes.c_int
    threads = ctypes.c_int(0)
    _check(library.onednn_backend_get_num_threads(ctypes.byref(threads)), "get_num_threads()")
    return threads.value


@contextlib.contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """torch's intra-op thread count is `count` inside the block, and what it was again after it.

    From Python, ExecuTorch's bindings copy every input tensor with a torch op. With torch's pool above one
    thread that copy leaves torch's OpenMP workers spinning for milliseconds on the cores the delegate's pool
    computes on next (README, "Known issues"), so loops that time ExecuTorch run inside `torch_threads(1)`.
    """
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


# oneDNN's instruction sets, oldest to newest (runtime/CpuIsa.cpp), and "default" (no cap).
INSTRUCTION_SETS = (
    "sse41",
    "avx",
    "avx2",
    "avx2_vnni",
    "avx2_vnni_2",
    "avx512_core",
    "avx512_core_vnni",
    "avx512_core_bf16",
    "avx512_core_fp16",
    "avx512_core_amx",
    "default",
)


def set_max_isa(name: str) -> None:
    """Caps the instruction set oneDNN may use (its max-ISA control; the backend option "max_isa").

    Set it before the first program using the delegate is loaded: oneDNN refuses a new cap once it has
    generated a kernel (ValueError). The environment variable ONEDNN_MAX_CPU_ISA does the same."""
    if name not in INSTRUCTION_SETS:
        raise ValueError(f"set_max_isa expects one of {INSTRUCTION_SETS}, got {name!r}")
    library = load_runtime()
    library.onednn_backend_set_max_isa.argtypes = [ctypes.c_char_p]
    library.onednn_backend_set_max_isa.restype = ctypes.c_int
    _check(library.onednn_backend_set_max_isa(name.encode()), f"set_max_isa({name!r})")


def effective_isa() -> str:
    """The newest instruction set oneDNN dispatches to in this process (capped or not). Reading it
    fixes it, as loading a program does: call set_max_isa() first."""
    library = load_runtime()
    library.onednn_backend_effective_isa.argtypes = []
    library.onednn_backend_effective_isa.restype = ctypes.c_char_p
    return library.onednn_backend_effective_isa().decode()


def _set_choice(symbol: str, value: int, call: str) -> None:
    """Calls the runtime's `symbol(int)`, which sets one backend option; raises naming `call` if refused."""
    setter = getattr(load_runtime(), symbol)
    setter.argtypes = [ctypes.c_int]
    setter.restype = ctypes.c_int
    _check(setter(value), call)


def set_verbose(level: int) -> None:
    """oneDNN's verbose log on stdout (the backend option "verbose"): 0 off, 1 every primitive executed
    with its time, 2 also every primitive created. ONEDNN_VERBOSE sets the level a process starts with."""
    if isinstance(level, bool) or level not in (0, 1, 2):
        raise ValueError(f"set_verbose expects 0, 1 or 2, got {level!r}")
    _set_choice("onednn_backend_set_verbose", level, f"set_verbose({level})")


WINOGRAD_USES = ("never", "default", "always")


def set_winograd(use: str) -> None:
    """Where fp32 3x3 convolutions of stride 1 compute through Winograd F(4x4, 3x3) (the backend option
    "winograd", read when a program is loaded): "default" for the layers where it was measured faster
    than oneDNN's direct kernels (every such layer on AVX2 CPUs, 1.0-2.6x; on AVX-512 ones those with
    at least 24 channels each side, 1.04-2.2x); "always" for every layer it can compute, on every CPU
    with AVX2; "never". Winograd rounds differently from a direct convolution (about ten f32 ulps of the
    inputs' magnitude); a program whose inputs hold a NaN or an infinity runs the direct kernel (README,
    "Winograd convolutions")."""
    if use not in WINOGRAD_USES:
        raise ValueError(f"set_winograd expects one of {WINOGRAD_USES}, got {use!r}")
    _set_choice("onednn_backend_set_winograd", WINOGRAD_USES.index(use), f"set_winograd({use!r})")


INT4_PRODUCTS = ("fast", "exact")


def set_int4_products(products: str) -> None:
    """How several rows that a program quantizes to int8 (an 8da4w model's prompt) multiply its int4
    weights on CPUs with AMX (the backend option "int4_products", read when a program is loaded).
    "fast" (the default) runs AMX's int8 unit on the weights widened to int8 on one scale per output
    column, a block of columns at a time (each weight within 1/16 of the int4 step of its column's
    widest group), where the input features are a multiple of 64 and the groups of 32, 64, 128...;
    elsewhere AMX's bf16 unit on the weights times their group scales rounded to bf16 (2^-9 of each).
    "exact" sums the int8 x int4 products in int32, as torchao's reference and the one-row (decode)
    kernels do, at 0.3-0.5x the speed. One row at a time, and every row on CPUs without AMX, is exact;
    but for one bf16 row of a weight-only (4w) layer, which "fast" runs on the int8 unit of CPUs with
    AVX512-VNNI in two int8 slices per 32 values (each value within 2^-14 of the largest among its 32)
    and "exact" in f32 (README, "LLMs")."""
    if products not in INT4_PRODUCTS:
        raise ValueError(f"set_int4_products expects one of {INT4_PRODUCTS}, got {products!r}")
    _set_choice("onednn_backend_set_int4_products", INT4_PRODUCTS.index(products), f"set_int4_products({products!r})")


HUGE_PAGE_USES = ("never", "large", "always")


def set_huge_pages(use: str) -> None:
    """Whether the constants a program's steps read whole on every call where the program holds them
    (an LLM's 4- and 8-bit weights, their scales and biases; not an embedding table, nor weights packed
    into another layout at init) are first copied into one block of 2 MiB pages (the backend option
    "huge_pages", read when a program is loaded). Streamed in 4 KiB pages, those loads wait on the
    TLB. "large" (the default) copies them for each delegate that streams 16 MiB or more; "always" for
    every delegate; "never" reads them where the program maps them. The copy costs load time (the
    kernel clears every 2 MiB page; in a VM the host may first have to back it); a program loaded from
    a file holds no second copy, its bytes let go as each constant is copied, one loaded from a
    buffer does (README, "Huge pages for streamed weights")."""
    if use not in HUGE_PAGE_USES:
        raise ValueError(f"set_huge_pages expects one of {HUGE_PAGE_USES}, got {use!r}")
    _set_choice("onednn_backend_set_huge_pages", HUGE_PAGE_USES.index(use), f"set_huge_pages({use!r})")


# The instruction sets with VNNI, whose int8 products oneDNN accumulates in 32 bits (runtime/CpuIsa.h).
EXACT_INT8_ISAS = frozenset(
    {"avx2_vnni", "avx2_vnni_2", "avx512_core_vnni", "avx512_core_bf16", "avx512_core_fp16", "avx512_core_amx"}
)
# The instruction sets with bf16 instructions (AVX-NE-CONVERT, AVX512-BF16, AMX): oneDNN's bf16 kernels
# run natively there (runtime/CpuIsa.h).
BF16_ISAS = frozenset({"avx2_vnni_2", "avx512_core_bf16", "avx512_core_fp16", "avx512_core_amx"})


def has_bf16_instructions() -> bool:
    """Whether bf16 programs compute in bf16 here. Without bf16 instructions oneDNN's bf16 kernels are
    emulated or missing, so the runtime keeps the bf16 values between steps in f32: such a program runs
    at f32 speed, and precision="bf16" computes exactly as fp32 does (README, "Instruction sets")."""
    return effective_isa() in BF16_ISAS


def int8_products_exact() -> bool:
    """Whether int8 steps run oneDNN's int8 kernels here. Without VNNI those sum int8 products in 16 bits,
    which saturate, so the runtime computes int8 steps in f32 on the dequantized operands instead: the
    same results, at f32 speed (README, "Instruction sets")."""
    return effective_isa() in EXACT_INT8_ISAS
