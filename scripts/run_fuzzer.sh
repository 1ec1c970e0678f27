#!/usr/bin/env bash
# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
# Fuzzes the payload parser and init(): builds backends/onednn/test/fuzz/ with clang-15 (libFuzzer,
# AddressSanitizer, UndefinedBehaviorSanitizer) in build/cmake-fuzz, installing Debian's clang-15 when
# it is missing, writes the seeds when backends/onednn/test/fuzz/seeds/ is empty, and runs the fuzzer
# until it has run --runs inputs or --max-total-time seconds, whichever comes first. The corpus it
# grows lives in build/cmake-fuzz/corpus (the seeds are read, never written); crashes, timeouts and
# out-of-memory inputs land in build/cmake-fuzz/artifacts/. Once the runtime is fixed, copy such an
# input into backends/onednn/test/fuzz/regressions/: ctest replays it from then on (onednn_fuzz_replay).
#
#   scripts/run_fuzzer.sh [--runs N] [--max-total-time S] [--timeout S] [--rss-limit-mb MB]
#                         [--jobs N] [-- LIBFUZZER_ARGS...]
#
# Defaults: --runs 1000000 --max-total-time 1800 --timeout 10 (seconds per input) --rss-limit-mb 4096,
# one job. --jobs N runs N fuzzer processes on the shared corpus (libFuzzer's -jobs/-workers).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${ONEDNN_VENV:-$root/.venv}"
build="$root/build/cmake-fuzz"
fuzz_dir="$root/backends/onednn/test/fuzz"

runs=1000000
max_total_time=1800
timeout=10
rss_limit_mb=4096
jobs=1
extra=()
while (($#)); do
  case "$1" in
    --runs) runs="$2"; shift ;;
    --max-total-time) max_total_time="$2"; shift ;;
    --timeout) timeout="$2"; shift ;;
    --rss-limit-mb) rss_limit_mb="$2"; shift ;;
    --jobs) jobs="$2"; shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "run_fuzzer.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

if ! command -v clang++-15 >/dev/null 2>&1; then
  echo "[run_fuzzer] installing Debian's clang-15 (libFuzzer ships with it)"
  if [[ $(id -u) -ne 0 ]]; then sudo=sudo; else sudo=; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq clang-15 >/dev/null
fi
if [[ ! -x "$venv/bin/python" ]]; then
  "$root/scripts/bootstrap.sh"
fi

echo "[run_fuzzer] building onednn_payload_fuzzer in $build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++-15 -DEXECUTORCH_ONEDNN_FUZZ=ON -DEXECUTORCH_BUILD_TESTS=OFF \
  -DPython3_EXECUTABLE="$venv/bin/python" >/dev/null
cmake --build "$build" -j "$(nproc)" --target onednn_payload_fuzzer
fuzzer="$build/backends/onednn/test/fuzz/onednn_payload_fuzzer"

if ! compgen -G "$fuzz_dir/seeds/*.odnn" >/dev/null; then
  echo "[run_fuzzer] writing the seed corpus (make_seeds.py)"
  PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" "$venv/bin/python" "$fuzz_dir/make_seeds.py" "$fuzz_dir/seeds"
fi

mkdir -p "$build/corpus" "$build/artifacts"
# Leaks are checked at exit only (oneDNN's and TBB's caches live as long as the process); every UB
# report aborts; a failed allocation throws (the runtime turns it into MemoryAllocationFailed).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:abort_on_error=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
args=(
  -runs="$runs" -max_total_time="$max_total_time" -timeout="$timeout" -rss_limit_mb="$rss_limit_mb"
  -malloc_limit_mb="$rss_limit_mb" -max_len=16384 -print_final_stats=1
  -dict="$fuzz_dir/payload.dict" -artifact_prefix="$build/artifacts/"
)
if ((jobs > 1)); then
  args+=(-jobs="$jobs" -workers="$jobs")
fi
echo "[run_fuzzer] $fuzzer ${args[*]} ${extra[*]:-} $build/corpus $fuzz_dir/seeds $fuzz_dir/regressions"
cd "$build"
start=$(date +%s)
status=0
"$fuzzer" "${args[@]}" "${extra[@]}" "$build/corpus" "$fuzz_dir/seeds" "$fuzz_dir/regressions" || status=$?
echo "[run_fuzzer] exit status $status after $(( $(date +%s) - start )) s;" \
  "corpus: $(ls "$build/corpus" | wc -l) inputs; artifacts: $(ls "$build/artifacts" | wc -l) in $build/artifacts"
exit "$status"
