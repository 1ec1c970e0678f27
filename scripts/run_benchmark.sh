#!/usr/bin/env bash
# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
# The benchmark: our oneDNN delegate against XNNPACK, ONNX Runtime, OpenVINO (when installed), ExecuTorch
# without a delegate and eager PyTorch on the benchmark model suite; writes results/<date>/.
# Arguments go to examples/onednn/benchmark.py (e.g. --models resnet18,mlp --runs 20 --threads 2; --help).
# --llm first: the LLM benchmark instead, examples/onednn/llm_benchmark.py (--dim 2048 --layers 16; --help).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/bootstrap.sh" --requirements bench
venv="${ONEDNN_VENV:-$root/.venv}"

cd "$root"
if [[ "${1:-}" == "--llm" ]]; then
  shift
  exec "$venv/bin/python" -m examples.onednn.llm_benchmark "$@"
fi
exec "$venv/bin/python" -m examples.onednn.benchmark "$@"
