#!/usr/bin/env bash
# ExecuTorch's backend conformance suite for our flows, next to XNNPACK's, with a markdown summary:
#   scripts/run_conformance.sh [--suite operators|models] [--flows a,b] [--write-md CONFORMANCE.md] ...
# (every option of backends/onednn/test/conformance/run_suite.py; --help lists them). The model suite
# needs torchvision (scripts/requirements-models.txt), installed here when it is asked for.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ " $* " == *" models "* ]]; then
  "$root/scripts/bootstrap.sh" --requirements models
else
  "$root/scripts/bootstrap.sh"
fi
cd "$root"
exec "${ONEDNN_VENV:-$root/.venv}/bin/python" backends/onednn/test/conformance/run_suite.py "$@"
