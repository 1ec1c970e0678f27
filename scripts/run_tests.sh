#!/usr/bin/env bash
# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
# Every test: lint, the C++ runtime tests (gtest through ctest), the Python tests (pytest) and
# ExecuTorch's backend conformance suite for our fp32 flow, with the other x86 runtimes of
# scripts/requirements-tests.txt installed next to the delegate.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/bootstrap.sh" --tests --requirements tests
venv="${ONEDNN_VENV:-$root/.venv}"
export PATH="$venv/bin:$PATH"

echo "== ruff"
ruff check "$root/backends" "$root/examples"

echo "== clang-format (.clang-format; \`clang-format -i FILE\` applies it)"
find "$root/backends" "$root/examples" \( -name '*.cpp' -o -name '*.h' \) -print0 |
  xargs -0 clang-format --dry-run --Werror

echo "== C++ runtime tests (ctest)"
cmake -S "$root" -B "$root/build/cmake-test" -G Ninja -DEXECUTORCH_BUILD_TESTS=ON \
  -DPython3_EXECUTABLE="$venv/bin/python" >/dev/null
cmake --build "$root/build/cmake-test" -j "$(nproc)"
ctest --test-dir "$root/build/cmake-test" --output-on-failure -j "$(nproc)"

echo "== Python tests (pytest, in parallel workers: pytest-xdist)"
cd "$root"
workers=$(( $(nproc) < 4 ? $(nproc) : 4 ))
python -m pytest -n "$workers" backends/onednn/test "$@"

# On a CPU above AVX2 the int8 tests run once more capped at AVX2 (oneDNN reads ONEDNN_MAX_CPU_ISA in
# every process, the test workers' included): there int8 steps compute in f32 as on CPUs without VNNI,
# a path that machine would otherwise never take (test_winograd.py's int8 cases take Winograd on it),
# test_vector_matrix.py's rows run the AVX2 kernel, and test_affine_quantization.py's several 8da4w rows
# the f32 path of CPUs without AMX, test_cached_attention.py's the AVX2 attention kernel,
# test_transposed_linear.py the plain product its AVX-512 rule leaves there, test_group_scales.py the
# AVX2 4-bit kernels on bf16 scales, test_linear_on_avx2.py the AVX2 weight layout and host GELU,
# test_convolution_on_avx2.py the host SiLU after a convolution.
# test_isa.py checks the models under the cap.
isa=$(python -c "import executorch.backends.onednn as onednn; print(onednn.effective_isa())" 2>/dev/null | tail -1)
if [[ "$isa" != avx2 && "$isa" != avx && "$isa" != sse41 ]]; then
  echo "== int8 tests capped at AVX2 (this CPU: $isa)"
  ONEDNN_MAX_CPU_ISA=AVX2 python -m pytest -n "$workers" backends/onednn/test/test_int8.py \
    backends/onednn/test/test_dynamic_int8.py backends/onednn/test/test_int8_agreement.py \
    backends/onednn/test/test_winograd.py backends/onednn/test/test_vector_matrix.py \
    backends/onednn/test/test_affine_quantization.py backends/onednn/test/test_cached_attention.py \
    backends/onednn/test/test_transposed_linear.py backends/onednn/test/test_group_scales.py \
    backends/onednn/test/test_linear_on_avx2.py backends/onednn/test/test_convolution_on_avx2.py "$@"
fi

# ExecuTorch's backend conformance suite, operator tests, our fp32 flow: a third of its tests (the whole
# suite takes 13 minutes on 2 cores, which would bring CI to 27-30 of its 30), no failure of any kind, and
# every subtest the last full run delegated (delegated_operators.txt, from --record-delegated) delegated
# and passing.
echo "== Backend conformance suite (operators, flow onednn, shard 0/3)"
python backends/onednn/test/conformance/run_suite.py --flows onednn --shard 0/3 --require onednn \
  --expect-delegated backends/onednn/test/conformance/delegated_operators.txt --out "$root/build/conformance"
