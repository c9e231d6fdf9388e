#!/usr/bin/env bash
# GPU checks in ten minutes on one GPU, one command: versions; the fast GPU tests; copy_bench once as the
# probe (with sglang importable, so the installed strategy and its env gate are timed); the synthetic
# repro; one real sglang launch per algorithm at one draft-token value (small bundled config, dummy
# weights); the report. Every step runs under its own limit (the STEPS table; they sum to at most 600 s and
# sit above each step's own deadlines, which tests/probes/test_cuda_graph_gpu_check.py checks); a step past its
# limit is killed and the next one runs. Figures land in $OUT (default /tmp/gpudiag-gpu-check), at most
# eight files; the last screen is the summary ($OUT/summary.txt).
#
# GPU_CHECK_SGLANG: an sglang wheel (.whl) or a site-packages directory holding sglang, put on PYTHONPATH
#   for the copy_bench step (unpacked under $WORK); default: .whl/sglang-0.5.23-*.whl in the checkout when
#   one was carried there (tests/sglang_wheels.py caches it in ~/.cache/gpudiag-wheels).
# GPUDIAG_SGLANG_PYTHON: a serving venv (sglang with its runtime) for the launches; else python3's own.
# GPU_CHECK_REHEARSE=1: on a machine without CUDA, run every step anyway; GPU work is skipped with the
#   reason, and the script exits 0 when every step ran within its limit.
# Needs python3 with torch, pytest, click, rich and pyyaml; runs from the checkout without installing.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/gpudiag-gpu-check}
WORK=${GPU_CHECK_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/gpudiag-gpu-check.XXXXXX")}
REHEARSE=${GPU_CHECK_REHEARSE:-0}
mkdir -p "$OUT" "$WORK/reports"
LOG="$OUT/gpu-check.log"
: >"$LOG"
: >"$WORK/steps.tsv"

# name             limit_s  deadline_s (the most the step's own waits add up to; below its limit)
STEPS="
versions                30      25
fast-gpu-tests         140     125
copy-bench              70      60
synthetic-repro         70      60
sglang-launches        260     250
report                  30      25
"
limit_of() { awk -v n="$1" '$1 == n {print $2}' <<<"$STEPS"; }
deadline_of() { awk -v n="$1" '$1 == n {print $3}' <<<"$STEPS"; }

run_step() {   # run_step NAME FUNCTION: the function under `timeout LIMIT`, its output in the log
  local name=$1 limit started rc
  limit=$(limit_of "$name")
  echo; echo "=== $name (limit ${limit} s)" | tee -a "$LOG"
  started=$(date +%s)
  timeout --kill-after=5 "$limit" bash -c "$(declare -f); $2" 2>&1 | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  printf '%s\t%s\t%s\t%s\n' "$name" "$limit" "$(( $(date +%s) - started ))" "$rc" >>"$WORK/steps.tsv"
}
export PY OUT WORK REHEARSE STEPS

gpudiag() { "$PY" -m gpudiag "$@"; }

step_versions() {
  timeout 10 nvidia-smi --query-gpu=index,name,driver_version,memory.used,memory.total --format=csv \
    || echo "nvidia-smi: not available"
  timeout 15 "$PY" -c "import sys, torch; ok = torch.cuda.is_available()
print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', ok)
sys.exit(0 if ok or sys.argv[1] == '1' else 1)" "$REHEARSE"
}

step_fast_gpu_tests() {
  "$PY" -m pytest -m gpu -q -p no:cacheprovider -rs --junitxml="$OUT/gpu-tests.xml" \
    tests/gpu/test_torch_caps_cuda.py tests/gpu/test_synthetic_fields_gpu.py \
    "tests/gpu/test_cuda_graph_gpu.py::test_a_poisoned_context_stays_in_its_child" \
    "tests/gpu/test_cuda_graph_gpu.py::test_the_memory_cap_refuses_allocations_above_it_in_the_child" \
    "tests/gpu/test_cuda_graph_gpu.py::test_device_info_reports_memory_in_use_and_uuids"
}

step_copy_bench() {
  local site=${GPU_CHECK_SGLANG:-$(ls .whl/sglang-0.5.23-*.whl 2>/dev/null | head -1)}
  if [ -n "$site" ] && [ -f "$site" ]; then
    "$PY" -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$site" "$WORK/sglang-site"
    site="$WORK/sglang-site"
  fi
  if [ -n "$site" ]; then
    export PYTHONPATH="$PYTHONPATH:$site"; echo "sglang from $site"
  else
    echo "no GPU_CHECK_SGLANG and no .whl/sglang-0.5.23-*.whl: the installed strategy needs $PY's own sglang"
  fi
  gpudiag scan localhost --probes env,sglang_source,copy_bench --timeout "$(deadline_of copy-bench)" \
    --set copy_bench.device=cuda --set copy_bench.batch_sizes=1,32 --set copy_bench.hidden_sizes=4096 \
    --reports-dir "$WORK/reports"
  local rc=$?
  cp "$WORK/reports/runs/$(cat "$WORK/reports/latest")/hosts/localhost.json" "$OUT/copy-bench.json"
  cat "$WORK/reports/latest" >"$WORK/copy-bench.run"
  # 1 (error findings) is a result; 4 (copy_bench could not run: no CUDA) is one only in a rehearsal
  [ "$rc" -le 1 ] || { [ "$REHEARSE" = 1 ] && [ "$rc" = 4 ]; }
}

step_synthetic_repro() {
  gpudiag repro cuda-graph-crash localhost --mode synthetic --algorithm EAGLE,DFLASH --batch-sizes 1,16 \
    --draft-tokens 2-8 --cell-timeout 20 --timeout "$(deadline_of synthetic-repro)" --reports-dir "$WORK/reports"
  local rc=$?
  cp "$WORK/reports/runs/$(cat "$WORK/reports/latest")/hosts/localhost.json" "$OUT/synthetic-repro.json"
  cat "$WORK/reports/latest" >"$WORK/synthetic.run"
  # 1 (a failing cell) is a finding; 4 (nothing ran) is a result only in a rehearsal
  [ "$rc" -le 1 ] || { [ "$REHEARSE" = 1 ] && [ "$rc" = 4 ]; }
}

step_sglang_launches() {
  GPUDIAG_GPU_CHECK_OUT="$OUT" "$PY" -m pytest -m gpu -q -p no:cacheprovider -rs -s tests/gpu/test_sglang_repro_gpu.py
}

step_report() {
  local run rc=0
  : >"$OUT/FINDINGS.md"
  for run in "$WORK/copy-bench.run" "$WORK/synthetic.run"; do
    [ -f "$run" ] || continue
    timeout 12 "$PY" -m gpudiag report "$(cat "$run")" --reports-dir "$WORK/reports" --markdown >>"$OUT/FINDINGS.md"
    case $? in 0|1|3|4) ;; *) rc=1 ;; esac   # findings, failed hosts, unchecked asks: results, rendered
  done
  return $rc
}

run_step versions step_versions
run_step fast-gpu-tests step_fast_gpu_tests
run_step copy-bench step_copy_bench
run_step synthetic-repro step_synthetic_repro
run_step sglang-launches step_sglang_launches
run_step report step_report
"$PY" scripts/gpu_check_summary.py "$WORK/steps.tsv" "$OUT" | tee "$OUT/summary.txt"
exit "${PIPESTATUS[0]}"
