#!/usr/bin/env bash
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
requirements_hash=$(cat "$root/scripts/requirements.txt" "$root/scripts/requirements-headers.txt" | sha256sum | cut -d' ' -f1)
if [[ "$(cat "$stamp_dir/requirements" 2>/dev/null)" != "$requirements_hash" ]]; then
  echo "[bootstrap] installing pinned packages (scripts/requirements*.txt)"
  # The OpenMP build of oneDNN shares the path of libdnnl.so.3 with the TBB build we use.
  if "$venv/bin/python" -m pip show -q onednn-cpu-gomp >/dev/null 2>&1; then
    "${pip[@]}" uninstall -y onednn-cpu-gomp
  fi
  "${pip[@]}" install -r "$root/scripts/requirements.txt"
  "${pip[@]}" install --no-deps -r "$root/scripts/requirements-headers.txt"
  "${pip[@]}" install --no-deps --force-reinstall -q onednn-cpu-tbb=="$(sed -n 's/^onednn-cpu-tbb==//p' "$root/scripts/requirements-headers.txt")"
  echo "$requirements_hash" > "$stamp_dir/requirements"
fi

# Rebuild the delegate when anything that goes into it changed.
sources_hash=$(cd "$root" && find CMakeLists.txt pyproject.toml README.md backends/onednn -type f \
  -not -path '*/test/*' -not -name '*.pyc' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
if [[ "$(cat "$stamp_dir/delegate" 2>/dev/null)" != "$sources_hash" ]] \
   || ! "$venv/bin/python" -c "import executorch.backends.onednn" >/dev/null 2>&1; then
  echo "[bootstrap] building and installing executorch-onednn (CMake, oneDNN runtime)"
  "${pip[@]}" install --no-build-isolation --no-deps "$root"
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
