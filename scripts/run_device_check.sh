#!/bin/bash
# Copyright (c) 2026 The executorch-onednn authors.
# SPDX-License-Identifier: BSD-3-Clause
# The one call to make on the lent AMX machine (the tool `device`): the machine, the C++ tests, every program of
# results/device/bundle.tar.xz (from `python -m examples.onednn.device_check pack`) checked and timed, and the
# kernels oneDNN picked for a few bf16/int8 programs. Carry results/device/bundle.tar.xz and run
# `bash scripts/run_device_check.sh`; it writes device_check.md, device_check.json, run.log and tests.log to $OUT.
set -u
cd "$(dirname "$0")/.."
echo "== machine"; date; nproc; grep -m1 "model name" /proc/cpuinfo
grep -o -w 'avx512f\|avx512_bf16\|avx512_vnni\|avx512_fp16\|amx_tile\|amx_bf16\|amx_int8' /proc/cpuinfo | sort | uniq -c
python3 --version; python3 -c "import numpy; print('numpy', numpy.__version__)"; ldd --version | head -1
PYTHONUNBUFFERED=1 python3 examples/onednn/device_check.py run --bundle "${BUNDLE:-results/device/bundle.tar.xz}" --out "$OUT" \
  --threads 2,all --rounds 2 --runs 15 --budget "${BUDGET:-330}" \
  > "$OUT/run.log" 2>&1
echo "run: exit $?"; head -c 3000 "$OUT/run.log"; echo; cat "$OUT/device_check.md" 2>/dev/null
grep -A3 "Failure\|kernels checked" "$OUT/tests.log" | head -60
B=/tmp/device_check/bundle
for p in llama_decode.onednn llama_decode.onednn-bf16 mlp.onednn-bf16 resnet18.onednn-bf16 resnet18.onednn-int8 \
  vit_tiny.onednn-bf16 mobilenet_v2.onednn-bf16; do
  echo "== kernels of $p (ours, 2 threads)"
  ONEDNN_VERBOSE=1 LD_LIBRARY_PATH=$B/lib timeout 60 $B/lib/onednn_runner $B/programs/$p.pte --runs 1 --warmup 0 \
    --threads 2 2>/dev/null | grep "exec,cpu" | cut -d, -f6,7 | sort | uniq -c | sort -rn | head -8
done
date
