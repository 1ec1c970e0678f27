# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""What the subcommands share: finding a model, reading and making inputs, loading a program, and
telling the user what went wrong and what to do."""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn

T = TypeVar("T")

# ExecuTorch ScalarType codes (MethodMeta's tensor dtypes) -> torch dtypes.
SCALAR_TYPES = {
    0: torch.uint8,
    1: torch.int8,
    3: torch.int32,
    4: torch.int64,
    6: torch.float32,
    7: torch.float64,
    11: torch.bool,
    15: torch.bfloat16,
}


class CliError(Exception):
    """A problem the user can fix; its message says how."""


def load_model(spec: str, shapes: Sequence[Sequence[int]] = ()) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """A zoo name (`cli/zoo.py`), or `package.module:attr` naming an nn.Module, a class or function
    building one, or a function returning (module, example inputs). `shapes` makes random example
    inputs, and replaces the zoo's or the function's."""
    from .zoo import MODELS

    if ":" not in spec:
        if spec not in MODELS:
            raise CliError(f"unknown model {spec!r}: use one of {', '.join(MODELS)} or module:attr for your own")
        model, inputs = MODELS[spec]()
    else:
        module_name, _, attr = spec.partition(":")
        sys.path.insert(0, str(Path.cwd()))
        try:
            target: Any = importlib.import_module(module_name)
        except ImportError as error:
            raise CliError(f"cannot import {module_name!r} ({error}): run from the folder that holds it") from error
        finally:
            sys.path.pop(0)
        for part in attr.split("."):
            if not hasattr(target, part):
                raise CliError(f"{module_name} has no attribute {attr!r}")
            target = getattr(target, part)
        built = target if isinstance(target, nn.Module) else target()
        model, inputs = built if isinstance(built, tuple) else (built, ())
        if not isinstance(model, nn.Module):
            raise CliError(f"{spec} gave a {type(model).__name__}, not an nn.Module (or a function returning one)")
    if shapes:
        inputs = tuple(torch.randn(*shape) for shape in shapes)
    if not inputs:
        raise CliError(f"{spec} comes with no example inputs: give their shapes with --shape, e.g. --shape 1x3x224x224")
    return model.eval(), tuple(inputs)


def parse_shape(text: str) -> tuple[int, ...]:
    """argparse's type for --shape: its error ends the command with usage and exit status 2."""
    try:
        dims = tuple(int(d) for d in text.lower().split("x"))
    except ValueError:
        dims = ()
    if not dims or any(d <= 0 for d in dims):
        raise argparse.ArgumentTypeError(f"shape {text!r}: write positive sizes joined by x, e.g. 1x3x224x224")
    return dims


def read_inputs(paths: Sequence[Path]) -> tuple[torch.Tensor, ...]:
    """Tensors from .npy files or .pt files (a tensor, or a tuple/list of them), in order."""
    tensors: list[torch.Tensor] = []
    for path in paths:
        if not path.exists():
            raise CliError(f"input file {path} does not exist")
        if path.suffix == ".npy":
            import numpy

            tensors.append(torch.from_numpy(numpy.load(path)))
            continue
        if path.suffix != ".pt":
            raise CliError(f"input file {path}: expected .npy or .pt")
        loaded = torch.load(path, weights_only=True)
        tensors.extend(loaded if isinstance(loaded, (tuple, list)) else [loaded])
    return tuple(tensors)


def load_program(path: Path, data_path: Path | None = None) -> Any:
    """The ExecuTorch Program in `path` (with its external weights), the oneDNN runtime registered."""
    import executorch.backends.onednn  # noqa: F401  (registers OneDnnBackend)
    from executorch.runtime import Runtime

    if not path.exists():
        raise CliError(f"{path} does not exist")
    if data_path is None and path.with_suffix(".ptd").exists():
        data_path = path.with_suffix(".ptd")
    try:
        if data_path is not None:
            return Runtime.get().load_program(path.read_bytes(), data_path=str(data_path))
        return Runtime.get().load_program(path.read_bytes())
    except RuntimeError as error:
        raise CliError(f"{path} is not a program ExecuTorch can load ({error})") from error


def input_specs(program: Any, method: str = "forward") -> list[tuple[torch.dtype | None, tuple[int, ...]]]:
    """(dtype, sizes) of each input the method declares; dtype None for an ExecuTorch type not mapped here."""
    meta = program.metadata(method)
    tensors = [meta.input_tensor_meta(index) for index in range(meta.num_inputs())]
    return [(SCALAR_TYPES.get(tensor.dtype()), tuple(tensor.sizes())) for tensor in tensors]


def random_inputs(program: Any, method: str = "forward", seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Inputs of the shapes and dtypes the method expects: normal floats, small integers, booleans."""
    generator = torch.Generator().manual_seed(seed)
    inputs = []
    for index, (dtype, sizes) in enumerate(input_specs(program, method)):
        if dtype is None:
            raise CliError(f"input {index} has an ExecuTorch dtype not handled here: give it in a file with --inputs")
        if dtype.is_floating_point:
            inputs.append(torch.randn(sizes, generator=generator).to(dtype))
        elif dtype == torch.bool:
            inputs.append(torch.rand(sizes, generator=generator) > 0.5)
        else:
            inputs.append(torch.randint(0, 8, sizes, generator=generator, dtype=dtype))
    return tuple(inputs)


def load_method(program: Any, method: str = "forward") -> Any:
    if method not in program.method_names:
        raise CliError(f"the program has no method {method!r}; it has {', '.join(sorted(program.method_names))}")
    try:
        return program.load_method(method)
    except RuntimeError as error:
        raise CliError(f"loading method {method!r} failed (the log above says why): {error}") from error


def progress(items: Iterable[T], total: int, label: str) -> Iterator[T]:
    """Yields `items`, drawing a bar on stderr: `label [#####-----] k/total`."""
    width = 24
    for done, item in enumerate(items):
        filled = width * done // max(total, 1)
        print(f"\r{label} [{'#' * filled}{'-' * (width - filled)}] {done}/{total}", end="", file=sys.stderr, flush=True)
        yield item
    print(f"\r{label} [{'#' * width}] {total}/{total}", file=sys.stderr, flush=True)


class Stage:
    """`with Stage("exporting"):` prints what runs, then how long it took, on stderr."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.start = 0.0

    def __enter__(self) -> Stage:
        print(f"{self.label}...", end="", file=sys.stderr, flush=True)
        self.start = time.perf_counter()
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        outcome = "failed" if kind is not None else "done"
        print(f" {outcome} in {time.perf_counter() - self.start:.1f} s", file=sys.stderr, flush=True)
