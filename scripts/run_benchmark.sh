#!/usr/bin/env bash
# The benchmark: our oneDNN delegate against XNNPACK, ONNX Runtime, OpenVINO (when installed), ExecuTorch
# without a delegate and eager PyTorch on the benchmark model suite; writes results/<date>/.
# Arguments go to examples/onednn/benchmark.py (e.g. --models resnet18,mlp --runs 20 --threads 2; --help).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/bootstrap.sh"
venv="${ONEDNN_VENV:-$root/.venv}"

stamp="$venv/.onednn-stamps/requirements-bench"
requirements_hash=$(sha256sum "$root/scripts/requirements-bench.txt" | cut -d' ' -f1)
if [[ "$(cat "$stamp" 2>/dev/null)" != "$requirements_hash" ]]; then
  echo "[run_benchmark] installing the benchmark's packages (scripts/requirements-bench.txt)"
  "$venv/bin/python" -m pip --disable-pip-version-check -q install -r "$root/scripts/requirements-bench.txt"
  echo "$requirements_hash" > "$stamp"
fi

cd "$root"
exec "$venv/bin/python" -m examples.onednn.benchmark "$@"
