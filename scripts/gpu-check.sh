#!/usr/bin/env bash
# GPU checks in one call of under nine minutes on one GPU: versions; the fast GPU tests; the user's path
# (`gpudiag scan localhost --deep --timeout 130`, then `report`); copy_bench once as the probe (with sglang
# importable, so the installed strategy and its env gate are timed); the synthetic repro; one real sglang
# launch (small bundled config, dummy weights) when a runtime is there. Every step runs under its own limit
# (the STEPS table; each sits above the step's own deadlines, which tests/probes/test_cuda_graph_gpu_check.py
# checks); a step past its limit is killed and the next one runs. A step whose command succeeded still FAILS
# when its figures are missing (scripts/gpu_check_figures.py): a GPU with no timed workload, a cell without an
# outcome or none measured, Q5 or Q6 "not checked", no sglang launch where a runtime was expected. Figures land
# in $OUT (default /tmp/gpudiag-gpu-check), at most eight files; the last screen is the summary
# ($OUT/summary.txt), which prints them.
#
# GPU_CHECK_SGLANG: an sglang wheel (.whl) or a site-packages directory holding sglang, put on PYTHONPATH
#   for the copy_bench step (unpacked under $WORK); default: .whl/sglang-0.5.23-*.whl in the checkout when
#   one was carried there (tests/sglang_wheels.py caches it in ~/.cache/gpudiag-wheels).
# GPUDIAG_SGLANG_PYTHON: a serving venv (sglang with its runtime) for the launch; when set, a launch is
#   expected and the step fails without one. Else python3's own sglang, if any, and none is expected.
# GPU_CHECK_REHEARSE=1: on a machine without CUDA, run every step anyway; GPU work is skipped with the
#   reason, missing figures are printed but fail nothing, and the script exits 0 when every step ran within
#   its limit.
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
versions                15      12
fast-gpu-tests         130     125
user-path              160     150
copy-bench              70      60
synthetic-repro         50      45
sglang-launches        110     100
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
EXPECT_SGLANG=$([ -n "${GPUDIAG_SGLANG_PYTHON:-}" ] && echo 1 || echo 0)
export PY OUT WORK REHEARSE STEPS EXPECT_SGLANG

gpudiag() { "$PY" -m gpudiag "$@"; }
figures() { "$PY" scripts/gpu_check_summary.py --check "$1" "$OUT"; }   # the step's figures, or it fails
keep_host() {   # keep_host NAME: the latest run's host file as $OUT/NAME.json, its id in $WORK/NAME.run
  cp "$WORK/reports/runs/$(cat "$WORK/reports/latest")/hosts/localhost.json" "$OUT/$1.json"
  cat "$WORK/reports/latest" >"$WORK/$1.run"
}

step_versions() {
  timeout 4 nvidia-smi --query-gpu=index,name,driver_version,memory.used,memory.total --format=csv \
    || echo "nvidia-smi: not available"
  timeout 8 "$PY" -c "import sys, torch; ok = torch.cuda.is_available()
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
  keep_host copy-bench
  # 1 (error findings) is a result; 4 (copy_bench could not run: no CUDA) is one only in a rehearsal
  { [ "$rc" -le 1 ] || { [ "$REHEARSE" = 1 ] && [ "$rc" = 4 ]; }; } && figures copy-bench
}

# What a user runs first on a GPU host, with the time they would give it.
step_user_path() {
  gpudiag scan localhost --deep --timeout 130 --reports-dir "$WORK/reports"
  local rc=$?
  keep_host user-path
  timeout 10 "$PY" -m gpudiag report "$(cat "$WORK/user-path.run")" --reports-dir "$WORK/reports" --json \
    >"$OUT/user-path-report.json"
  timeout 10 "$PY" -m gpudiag report "$(cat "$WORK/user-path.run")" --reports-dir "$WORK/reports" --markdown
  # exit 0 (or 1: error findings) is what the user must get; 4 (nothing measured) only in a rehearsal
  { [ "$rc" -le 1 ] || { [ "$REHEARSE" = 1 ] && [ "$rc" = 4 ]; }; } && figures user-path
}

step_synthetic_repro() {
  gpudiag repro cuda-graph-crash localhost --mode synthetic --algorithm EAGLE,DFLASH --batch-sizes 1,16 \
    --draft-tokens 2-8 --cell-timeout 20 --timeout "$(deadline_of synthetic-repro)" --reports-dir "$WORK/reports"
  local rc=$?
  keep_host synthetic-repro
  # 1 (a failing cell) is a finding; 4 (nothing ran) is a result only in a rehearsal
  { [ "$rc" -le 1 ] || { [ "$REHEARSE" = 1 ] && [ "$rc" = 4 ]; }; } && figures synthetic-repro
}

# One launch (EAGLE): the others share its flags, and one call holds no more.
step_sglang_launches() {
  : >"$OUT/sglang-cells.json"
  GPUDIAG_GPU_CHECK_OUT="$OUT" "$PY" -m pytest -m gpu -q -p no:cacheprovider -rs -s \
    -k "launch_per_algorithm and EAGLE and not EAGLE3" tests/gpu/test_sglang_repro_gpu.py
  local rc=$?
  { [ "$rc" = 0 ] || [ "$rc" = 5 ]; } && figures sglang-launches   # 5: every test skipped (no runtime)
}

run_step versions step_versions
run_step fast-gpu-tests step_fast_gpu_tests
run_step user-path step_user_path
run_step copy-bench step_copy_bench
run_step synthetic-repro step_synthetic_repro
run_step sglang-launches step_sglang_launches
"$PY" scripts/gpu_check_summary.py "$WORK/steps.tsv" "$OUT" | tee "$OUT/summary.txt"
exit "${PIPESTATUS[0]}"
