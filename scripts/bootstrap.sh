#!/usr/bin/env bash
# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
# Makes the environment ready, installing only what is missing: a virtual environment in .venv with the
# pinned packages, Debian's gtest (with --tests), the packages of scripts/requirements-NAME.txt (with
# --requirements NAME, any number of times), and this repository's delegate built and installed into
# that environment (rebuilt when its sources change). Safe to run any number of times.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${ONEDNN_VENV:-$root/.venv}"
python="${PYTHON:-python3}"

tests=0
extras=()
while (($#)); do
  case "$1" in
    --tests) tests=1 ;;
    --requirements) extras+=("$2"); shift ;;
    *) echo "bootstrap.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

if ((tests)) && ! dpkg -s libgtest-dev >/dev/null 2>&1; then
  echo "[bootstrap] installing Debian's libgtest-dev"
  if [[ $(id -u) -ne 0 ]]; then sudo=sudo; else sudo=; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq libgtest-dev >/dev/null
fi

if [[ ! -x "$venv/bin/python" ]]; then
  echo "[bootstrap] creating $venv"
  "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)

stamp_dir="$venv/.onednn-stamps"
mkdir -p "$stamp_dir"
requirements_hash=$(sha256sum "$root/scripts/requirements.txt" | cut -d' ' -f1)
if [[ "$(cat "$stamp_dir/requirements" 2>/dev/null)" != "$requirements_hash" ]]; then
  echo "[bootstrap] installing pinned packages (scripts/requirements.txt)"
  # What the delegate needed before it built oneDNN itself (oneDNN 3.2's TBB wheels): a libtbb or
  # libdnnl.so.3 left in the environment is one more library another package could shadow.
  for stale in onednn-cpu-tbb onednn-cpu-gomp onednn-devel-cpu-gomp tbb-devel tbb intel-cmplr-lib-rt; do
    if "$venv/bin/python" -m pip show -q "$stale" >/dev/null 2>&1; then
      "${pip[@]}" uninstall -y "$stale"
    fi
  done
  "${pip[@]}" install -r "$root/scripts/requirements.txt"
  echo "$requirements_hash" > "$stamp_dir/requirements"
fi

# Rebuild the delegate when anything that goes into it changed: the wheel (scripts/build_wheel.sh),
# installed into the environment. The first build on a machine also builds oneDNN (about 40 minutes
# on 2 cores), cached for every later one (backends/onednn/setup.md).
sources_hash=$(cd "$root" && find CMakeLists.txt pyproject.toml README.md backends/onednn -type f \
  -not -path '*/test/*' -not -name '*.pyc' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
if [[ "$(cat "$stamp_dir/delegate" 2>/dev/null)" != "$sources_hash" ]] \
   || ! "$venv/bin/python" -c "import executorch.backends.onednn" >/dev/null 2>&1; then
  echo "[bootstrap] building the executorch-onednn wheel (CMake; oneDNN too on a machine's first build)"
  PYTHON="$venv/bin/python" "$root/scripts/build_wheel.sh"
  wheel=$(ls -t "$root"/dist/executorch_onednn-*.whl | head -n 1)
  echo "[bootstrap] installing $(basename "$wheel")"
  "${pip[@]}" install --no-deps --force-reinstall "$wheel"
  echo "$sources_hash" > "$stamp_dir/delegate"
fi

for extra in "${extras[@]}"; do
  file="$root/scripts/requirements-$extra.txt"
  extra_hash=$(sha256sum "$file" | cut -d' ' -f1)
  if [[ "$(cat "$stamp_dir/requirements-$extra" 2>/dev/null)" != "$extra_hash" ]]; then
    echo "[bootstrap] installing scripts/requirements-$extra.txt"
    "${pip[@]}" install -r "$file"
    echo "$extra_hash" > "$stamp_dir/requirements-$extra"
  fi
done
