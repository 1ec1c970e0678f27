#!/usr/bin/env bash
# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
# Writes dist/executorch_onednn-<version>-py3-none-linux_x86_64.whl: the Python package with the C++
# runtime (oneDNN linked in) and onednn_runner. Built against the torch and executorch of $PYTHON
# (default: .venv's), which must also have scikit-build-core, cmake and ninja (scripts/requirements.txt);
# the wheel then installs with one `pip install` into any environment, which brings torch and executorch.
# The first build on a machine builds oneDNN as well (backends/onednn/setup.md).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-${ONEDNN_VENV:-$root/.venv}/bin/python}"
mkdir -p "$root/dist"
rm -f "$root"/dist/executorch_onednn-*.whl
"$python" -m pip --disable-pip-version-check wheel -q --no-build-isolation --no-deps -w "$root/dist" "$root"
ls "$root"/dist/executorch_onednn-*.whl
