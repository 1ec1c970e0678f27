#!/usr/bin/env bash
# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
# The C++ runtime tests under AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer: the
# delegate and the tests built with EXECUTORCH_ONEDNN_SANITIZE=ON by gcc 12 in build/cmake-asan, then
# ctest there. Any report fails its test. The environment comes from scripts/bootstrap.sh --tests.
# Arguments go to ctest (e.g. -R Reliability).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${ONEDNN_VENV:-$root/.venv}"
build="$root/build/cmake-asan"

if [[ ! -x "$venv/bin/python" ]]; then
  echo "run_sanitizers.sh: no environment in $venv; run scripts/bootstrap.sh --tests first" >&2
  exit 2
fi
compiler="$(command -v g++-12 || command -v g++)"

cmake -S "$root" -B "$build" -G Ninja -DEXECUTORCH_BUILD_TESTS=ON -DEXECUTORCH_ONEDNN_SANITIZE=ON \
  -DCMAKE_CXX_COMPILER="$compiler" -DPython3_EXECUTABLE="$venv/bin/python" >/dev/null
cmake --build "$build" -j "$(nproc)"
# A UB report names its file and line either way; the stack shows how the program got there.
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" "$@"
