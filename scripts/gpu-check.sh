#!/usr/bin/env bash
# GPU checks in one go, for a machine with CUDA: the tests marked `gpu`, the GPU benchmarks, and a deep
# scan + report of this host. Prints every table; logs go to $OUT (default /tmp/gpudiag-gpu-check).
# Needs python3 with torch (CUDA build), pytest, click, rich and pyyaml (paramiko only for ssh targets);
# runs from the checkout without installing. Each step has its own time limit so one stuck step cannot
# eat the others' time; exit 1 when anything failed or CUDA is absent. GPU_CHECK_REHEARSE=1 runs every
# step on a machine without CUDA (the GPU tests skip) to rehearse the script itself.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/gpudiag-gpu-check}
mkdir -p "$OUT"
status=0
step() { echo; echo "=== $*"; }

step "machine"
nvidia-smi --query-gpu=index,name,driver_version,memory.used,memory.total --format=csv || true
$PY -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available()); sys.exit(0 if torch.cuda.is_available() else 1)" \
  || { echo "gpu-check: torch sees no CUDA device"; [ "${GPU_CHECK_REHEARSE:-0}" = 1 ] || exit 1; status=1; }
$PY -c "import pytest, click, rich, yaml" || { echo "gpu-check: needs pytest, click, rich and pyyaml"; exit 1; }

step "GPU tests (pytest -m gpu)"
timeout 300 $PY -m pytest -m gpu tests/gpu -s -q -p no:cacheprovider 2>&1 | tee "$OUT/gpu-tests.log" || status=1

step "copy-strategy benchmark"
timeout 120 $PY benchmarks/copy_strategies.py 2>&1 | tee "$OUT/copy-strategies.log" || status=1

step "deep scan of this host and its findings report"
timeout 240 $PY -m gpudiag scan localhost --deep --timeout 230 --reports-dir "$OUT/reports" 2>&1 | tee "$OUT/scan.log" \
  || status=1
# report exits 1 when it has error findings: that is a result, not a failure of the check.
$PY -m gpudiag report --reports-dir "$OUT/reports" --markdown -o "$OUT/FINDINGS.md"
[ "$?" -le 1 ] || status=1
exit $status
