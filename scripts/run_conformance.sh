#!/usr/bin/env bash
# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
# ExecuTorch's backend conformance suite for our flows, next to XNNPACK's, with a markdown summary:
#   scripts/run_conformance.sh [--suite operators|models] [--flows a,b] [--write-md CONFORMANCE.md] ...
# (every option of backends/onednn/test/conformance/run_suite.py; --help lists them). The model suite
# needs torchvision (scripts/requirements-models.txt), installed when it is asked for into an
# environment of its own, .venv-models: next to the CPU torch, PyPI's torchvision breaks `import
# transformers` (the LLM examples and their tests) in the environment that holds it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ " $* " == *" models "* ]]; then
  export ONEDNN_VENV="${ONEDNN_MODELS_VENV:-$root/.venv-models}"
  "$root/scripts/bootstrap.sh" --requirements models
else
  "$root/scripts/bootstrap.sh"
fi
cd "$root"
exec "${ONEDNN_VENV:-$root/.venv}/bin/python" backends/onednn/test/conformance/run_suite.py "$@"
