# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
"""The command line of the oneDNN delegate: `python -m executorch.backends.onednn` or `executorch-onednn`.

    executorch-onednn export resnet_small -o resnet.pte --precision bf16
    executorch-onednn export-llm base.params=params.json base.checkpoint=model.pth model.use_kv_cache=True
    executorch-onednn run resnet.pte
    executorch-onednn bench resnet.pte            # or: bench --model resnet_small
    executorch-onednn inspect resnet.pte --html report.html

Each subcommand has --help. A problem the user can fix ends the command with exit status 2 and one
line saying what to do.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import _bench, _export, _export_llm, _inspect, _run
from ._common import CliError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="executorch-onednn",
        description="Export, run, time and inspect ExecuTorch programs delegated to oneDNN.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in (_export, _export_llm, _run, _bench, _inspect):
        command.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except CliError as error:
        print(f"executorch-onednn {args.command}: error: {error}", file=sys.stderr)
        return 2


__all__ = ["CliError", "build_parser", "main"]
