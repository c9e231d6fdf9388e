#!/usr/bin/env bash
# GPU checks in one go, for a machine with CUDA: the tests marked `gpu`, the GPU benchmarks, and a deep
# scan + report of this host. Prints every table; logs go to $OUT (default /tmp/gpudiag-gpu-check).
# Needs python3 with torch (CUDA build), click, rich and pyyaml; runs from the checkout without installing.
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
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())" || exit 1

step "GPU tests (pytest -m gpu)"
$PY -m pytest -m gpu tests/gpu -s -q -p no:cacheprovider 2>&1 | tee "$OUT/gpu-tests.log" || status=1

step "copy-strategy benchmark"
$PY benchmarks/copy_strategies.py 2>&1 | tee "$OUT/copy-strategies.log" || status=1

step "deep scan of this host and its findings report"
$PY -m gpudiag scan localhost --deep --reports-dir "$OUT/reports" 2>&1 | tee "$OUT/scan.log"
$PY -m gpudiag report --reports-dir "$OUT/reports" --markdown -o "$OUT/FINDINGS.md" 2>&1 | tail -n 5
echo "report: $OUT/FINDINGS.md"
exit $status
