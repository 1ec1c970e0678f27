#!/usr/bin/env bash
# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
# The main job: export a built-in model with the oneDNN delegate, run it through the ExecuTorch runtime,
# check it against eager PyTorch and compare its latency with XNNPACK and the non-delegated runtime.
# Arguments go to examples/onednn/run_model.py (e.g. --model mlp --runs 50).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/bootstrap.sh"
cd "$root"
exec "${ONEDNN_VENV:-$root/.venv}/bin/python" -m examples.onednn.run_model "$@"
