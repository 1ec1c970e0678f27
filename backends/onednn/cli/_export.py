# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""`export`: a zoo model or the user's own → a .pte delegated to oneDNN (and a .ptd on request), with a
record of what the partitioner left to ExecuTorch and why, which `inspect` reads."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch

from ._common import CliError, Stage, load_model, parse_shape, progress

PRECISIONS = ("fp32", "bf16", "int8")


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "export",
        help="export a model to a .pte delegated to oneDNN",
        description="Export a model to a .pte whose supported parts run in the oneDNN delegate.",
    )
    from .zoo import MODELS

    parser.add_argument("model", help=f"a zoo model ({', '.join(MODELS)}) or module:attr of your own code")
    parser.add_argument("-o", "--out", type=Path, help="the .pte to write (default: MODEL.pte)")
    parser.add_argument(
        "--shape",
        action="append",
        type=parse_shape,
        default=[],
        help="an example input shape, e.g. 1x3x224x224 (once per input; replaces the model's own example inputs)",
    )
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="fp32",
        help="fp32, bf16 (computed in bf16 inside the delegate), or int8 (static, calibrated)",
    )
    parser.add_argument(
        "--calibration",
        type=int,
        default=8,
        help="int8: random calibration batches shaped like the example inputs (default 8)",
    )
    parser.add_argument("--calibration-data", type=Path, help="int8: a .pt file holding a list of input tuples")
    parser.add_argument(
        "--dynamic",
        action="append",
        default=[],
        metavar="INPUT:DIM:MIN:MAX",
        help="let dim DIM of input INPUT take any size in [MIN, MAX] (repeatable)",
    )
    parser.add_argument(
        "--dynamic-int8",
        action="store_true",
        help="linear layers in int8 with per-row scales computed at run time (no calibration)",
    )
    parser.add_argument("--external-weights", action="store_true", help="put the weights in OUT.ptd next to the .pte")
    parser.add_argument("--weight-checksums", action="store_true", help="refuse damaged weights at load time")
    parser.set_defaults(run=run)


def _dynamic_shapes(specs: list[str], inputs: tuple[torch.Tensor, ...]) -> tuple[dict[int, Any], ...] | None:
    if not specs:
        return None
    shapes: list[dict[int, Any]] = [{} for _ in inputs]
    for spec in specs:
        try:
            index, dim, low, high = (int(part) for part in spec.split(":"))
        except ValueError as error:
            raise CliError(f"--dynamic {spec!r}: write INPUT:DIM:MIN:MAX, e.g. 0:1:1:128") from error
        if not 0 <= index < len(inputs) or not 0 <= dim < inputs[index].dim():
            raise CliError(f"--dynamic {spec!r}: the model has {len(inputs)} input(s); input {index} has no dim {dim}")
        if not low <= inputs[index].shape[dim] <= high:
            raise CliError(
                f"--dynamic {spec!r}: the example size {inputs[index].shape[dim]} lies outside [{low}, {high}]"
            )
        shapes[index][dim] = torch.export.Dim(f"input{index}_dim{dim}", min=low, max=high)
    return tuple(shapes)


def _quantized(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], args: argparse.Namespace) -> torch.nn.Module:
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from ..quantizer import OneDnnQuantizer

    if args.calibration_data is not None:
        batches = torch.load(args.calibration_data, weights_only=True)
        if not isinstance(batches, (list, tuple)) or not batches:
            raise CliError(f"{args.calibration_data}: expected a non-empty list of input tuples")
        batches = [tuple(b) if isinstance(b, (list, tuple)) else (b,) for b in batches]
    else:
        generator = torch.Generator().manual_seed(0)
        batches = [inputs] + [
            tuple(torch.randn(x.shape, generator=generator) for x in inputs) for _ in range(args.calibration - 1)
        ]
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), OneDnnQuantizer())
    with torch.no_grad():
        for batch in progress(batches, len(batches), "calibrating"):
            prepared(*batch)
    return convert_pt2e(prepared)


def run(args: argparse.Namespace) -> int:
    from executorch.exir import to_edge_transform_and_lower

    from ..partition import OneDnnPartitioner

    model, inputs = load_model(args.model, args.shape)
    out: Path = args.out or Path(f"{args.model.split(':')[-1].split('.')[-1]}.pte")
    if args.precision == "int8" and (args.dynamic or args.dynamic_int8):
        raise CliError("--precision int8 takes neither --dynamic nor --dynamic-int8")
    if args.calibration_data is not None and not args.calibration_data.exists():
        raise CliError(f"--calibration-data {args.calibration_data} does not exist")
    dynamic_shapes = _dynamic_shapes(args.dynamic, inputs)
    if args.precision == "int8":
        model = _quantized(model, inputs, args)
    partitioner = OneDnnPartitioner(
        precision="bf16" if args.precision == "bf16" else "fp32",
        dynamic_int8=args.dynamic_int8,
        weight_checksums=args.weight_checksums,
        external_weights=out.stem if args.external_weights else None,
    )
    with Stage(f"exporting {args.model} ({args.precision})"):
        exported = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes)
        program = to_edge_transform_and_lower(exported, partitioner=[partitioner]).to_executorch()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(program.buffer)
    if args.external_weights:
        program.write_tensor_data_to_file(str(out.parent))
    left = [{"node": name, "reason": reason} for name, reason in partitioner.rejections.items()]
    record = {"model": args.model, "precision": args.precision, "left_to_executorch": left}
    Path(f"{out}.onednn.json").write_text(json.dumps(record, indent=1))
    weights = f" and {out.with_suffix('.ptd')}" if args.external_weights else ""
    print(f"wrote {out} ({out.stat().st_size} bytes){weights}")
    print(f"{len(left)} op(s) left to ExecuTorch; `inspect {out}` says which and why")
    return 0
