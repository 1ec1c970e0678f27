# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""`run`: executes a .pte on random inputs or on .npy/.pt files; prints or saves the outputs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import torch

from ._common import CliError, input_specs, load_method, load_program, random_inputs, read_inputs


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run a .pte once and print (or save) its outputs",
        description="Run a .pte (any ExecuTorch program; the oneDNN runtime is registered) once.",
    )
    parser.add_argument("pte", type=Path)
    parser.add_argument(
        "--inputs",
        type=Path,
        nargs="+",
        default=[],
        help=".npy or .pt files, in input order "
        "(a .pt may hold a tuple of tensors); default: random inputs of the expected shapes",
    )
    parser.add_argument("--method", default="forward")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    parser.add_argument("--save", type=Path, help="write the outputs to this .pt file (a tuple of tensors)")
    parser.set_defaults(run=run)


def check_inputs(program: Any, method: str, inputs: tuple[torch.Tensor, ...]) -> None:
    """Refuses inputs of the wrong count, shape or dtype with what was expected."""
    expected = input_specs(program, method)
    if len(inputs) != len(expected):
        raise CliError(f"method {method!r} takes {len(expected)} input(s), got {len(inputs)}")
    for index, (got, (dtype, sizes)) in enumerate(zip(inputs, expected)):
        if (dtype is not None and got.dtype != dtype) or tuple(got.shape) != sizes:
            raise CliError(
                f"input {index}: expected {dtype} {sizes}, got {got.dtype} {tuple(got.shape)} "
                "(a dynamic dim's example size is checked here; run the program from Python for other sizes)"
            )


def describe(tensor: torch.Tensor) -> str:
    line = f"{str(tensor.dtype).removeprefix('torch.')} {tuple(tensor.shape)}"
    if tensor.numel() == 0:
        return line
    values = tensor.detach().float()
    finite = values[torch.isfinite(values)]
    line += f" min {values.min().item():.6g} max {values.max().item():.6g}"
    if finite.numel():
        line += f" mean {finite.mean().item():.6g}"
    non_finite = values.numel() - finite.numel()
    if non_finite:
        line += f" ({non_finite} NaN or inf)"
    head = ", ".join(f"{v:.5g}" for v in values.flatten()[:6].tolist())
    return f"{line}\n    [{head}{', ...' if values.numel() > 6 else ''}]"


def run(args: argparse.Namespace) -> int:
    program = load_program(args.pte)
    inputs = read_inputs(args.inputs) if args.inputs else random_inputs(program, args.method, args.seed)
    if args.inputs:
        check_inputs(program, args.method, inputs)
    method = load_method(program, args.method)
    try:
        outputs = tuple(method.execute(list(inputs)))
    except RuntimeError as error:
        raise CliError(f"execute failed (the log above says why): {error}") from error
    for index, output in enumerate(outputs):
        print(f"output {index}: {describe(output) if isinstance(output, torch.Tensor) else repr(output)}")
    if args.save is not None:
        torch.save(tuple(o.clone() if isinstance(o, torch.Tensor) else o for o in outputs), args.save)
        print(f"wrote {args.save}")
    del method  # before the program, which it reads from
    return 0
