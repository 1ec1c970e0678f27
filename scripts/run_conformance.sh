#!/usr/bin/env bash
# ExecuTorch's backend conformance suite for our flows, next to XNNPACK's, with a markdown summary:
#   scripts/run_conformance.sh [--suite operators|models] [--flows a,b] [--write-md CONFORMANCE.md] ...
# (every option of backends/onednn/test/conformance/run_suite.py; --help lists them).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/bootstrap.sh"
venv="${ONEDNN_VENV:-$root/.venv}"
if [[ " $* " == *" models "* ]]; then
  stamp="$venv/.onednn-stamps/requirements-models"
  requirements_hash=$(sha256sum "$root/scripts/requirements-models.txt" | cut -d' ' -f1)
  if [[ "$(cat "$stamp" 2>/dev/null)" != "$requirements_hash" ]]; then
    echo "[run_conformance] installing the model suite's packages (scripts/requirements-models.txt)"
    "$venv/bin/python" -m pip --disable-pip-version-check -q install -r "$root/scripts/requirements-models.txt"
    echo "$requirements_hash" > "$stamp"
  fi
fi
cd "$root"
exec "$venv/bin/python" backends/onednn/test/conformance/run_suite.py "$@"
