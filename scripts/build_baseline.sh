#!/usr/bin/env bash
# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
# Builds this repository's delegate at another git revision, in an environment of its own, for the
# benchmark to run next to the current build (scripts/run_benchmark.sh --baseline-library PATH).
#   scripts/build_baseline.sh [REV]   default: 7fdc3cf, the last revision on oneDNN 3.2 (TBB wheels)
# Prints the path of the baseline's runtime library. The revision's own scripts/bootstrap.sh makes its
# environment (${EXECUTORCH_ONEDNN_CACHE:-~/.cache/executorch-onednn}/venv-baseline-REV), so it gets the
# packages that revision pinned.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rev="${1:-7fdc3cf}"
cache="${EXECUTORCH_ONEDNN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/executorch-onednn}"
tree="$cache/tree-baseline-$rev"
venv="$cache/venv-baseline-$rev"
if [[ ! -d "$tree" ]]; then
  git -C "$root" worktree add --detach "$tree" "$rev" >&2
fi
ONEDNN_VENV="$venv" "$tree/scripts/bootstrap.sh" >&2
"$venv/bin/python" - <<'PY'
import executorch.backends.onednn as onednn
print(onednn.library_path())
PY
