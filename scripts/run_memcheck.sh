#!/usr/bin/env bash
# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
# valgrind memcheck over the C++ runtime tests of a normal build (build/cmake-test, as run_tests.sh
# builds it, or $ONEDNN_TEST_BUILD): exits 1 on any memory error or any definitely or possibly lost block that
# backends/onednn/test/cpp/valgrind.supp does not cover. Installs Debian's valgrind when it is missing;
# the environment itself comes from scripts/bootstrap.sh --tests. Arguments go to the test binary
# (default: every test but the one that measures how threads share the CPU, which valgrind serializes).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${ONEDNN_VENV:-$root/.venv}"
build="${ONEDNN_TEST_BUILD:-$root/build/cmake-test}"

if [[ ! -x "$venv/bin/python" ]]; then
  echo "run_memcheck.sh: no environment in $venv; run scripts/bootstrap.sh --tests first" >&2
  exit 2
fi
if ! command -v valgrind >/dev/null 2>&1; then
  echo "[memcheck] installing Debian's valgrind"
  if [[ $(id -u) -ne 0 ]]; then sudo=sudo; else sudo=; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq valgrind >/dev/null
fi

cmake -S "$root" -B "$build" -G Ninja -DEXECUTORCH_BUILD_TESTS=ON -DPython3_EXECUTABLE="$venv/bin/python" >/dev/null
cmake --build "$build" -j "$(nproc)" --target onednn_backend_test

# --vex-guest-max-insns: oneDNN's JIT kernels (a depthwise convolution's) hold straight-line blocks
# too large for valgrind's translation buffer at its default of 50 ("VEX temporary storage exhausted").
(($#)) || set -- --gtest_filter=-Threads.LoweringTheCountToOneKeepsTheNextExecutionsOnTheCallingThread
exec valgrind --tool=memcheck --leak-check=full --error-exitcode=1 --vex-guest-max-insns=25 \
  --suppressions="$root/backends/onednn/test/cpp/valgrind.supp" \
  "$build/backends/onednn/test/cpp/onednn_backend_test" "$@"
