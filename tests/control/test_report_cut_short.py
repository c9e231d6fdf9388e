"""`gpudiag report` on a stored run whose copy_bench was built by the probe itself with a benchmark child that
measured three workloads on GPU 0 and then hung: Q5 states the kept workloads' costs and says GPU 0 was cut short,
with how many of how many and the time the rest would need, instead of "no workload was measured"."""
import copy
import json
import shutil
import sys
import time

from click.testing import CliRunner

from gpudiag.cli import cli
from probes import copy_bench
from probes.boot import local_modules
from probes.context import ProbeContext
from probes.copybench import child
from tests.probes.test_copy_bench_cut_short import STREAMS_THEN_STOPS
from tests.probes.test_copy_bench_records import RECORDED, recorded_host

RUN = "copy-bench-sglang-0.5.23-timeout-90"


def collect_cut_short(monkeypatch):
    """copy_bench's collect() on one GPU (the recorded H200 host's env and sglang_source), its child hanging after
    three workloads."""
    host = recorded_host(RUN)
    results = {name: copy.deepcopy(host["probes"][name]["data"]) for name in ("deployment", "env", "sglang_source")}
    results["deployment"]["interpreter"]["path"] = sys.executable   # the recorded venv is not on this machine
    results["env"]["torch"]["interpreter"]["path"] = results["env"]["torch"]["executable"] = sys.executable
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(child, "GRACE_S", 0.5)
    modules = local_modules()
    modules["probes.copybench.devices"] = [False, STREAMS_THEN_STOPS]
    options = {"copy_bench": {"device": "cuda", "batch_sizes": "1,8,32,128", "hidden_sizes": "4096",
                              "paths": "eagle_draft", "sweep_max_bytes": "4096"}}
    ctx = ProbeContext(options=options, results=results, deadline=time.monotonic() + 8.0, modules=modules)
    monkeypatch.setattr(copy_bench, "build_job", _with(copy_bench.build_job, measure_first=3, then="hang"))
    return host, copy_bench.collect(ctx)


def _with(build, **more):
    return lambda *args: dict(build(*args), **more)


def test_report_q5_names_the_kept_workloads_and_says_the_gpu_was_cut_short(tmp_path, monkeypatch):
    host, data = collect_cut_short(monkeypatch)
    [gpu] = data["gpus"]
    assert gpu["status"] == "timeout" and len(gpu["workloads"]) == 3
    reports = tmp_path / "reports"
    shutil.copytree(f"{RECORDED}/{RUN}", reports)
    [stored] = list((reports / "runs").glob("*/hosts/localhost.json"))
    host.pop("reason", None)
    host["probes"]["copy_bench"] = {"status": "ok", "duration_s": 8.0, "data": data}
    stored.write_text(json.dumps(host))
    run_id = stored.parent.parent.name
    result = CliRunner().invoke(cli, ["report", run_id, "--reports-dir", str(reports), "--json"])
    doc = json.loads(result.output)
    [q5] = [q for q in doc["answers"]["questions"] if q["id"] == "Q5"][0]["answers"]
    value = q5["value"]
    assert q5["status"] == "partial"
    assert value["cut_short"] == [{"gpu": "0", "measured": 3, "planned": 4, "needs_s": 0.9}]
    assert value["not_measured"] == []
    [measured] = value["gpus"]
    # The largest batch size among the three kept (1, 8, 32; 128 was never reached) prices the path.
    assert [(p["path"], p["batch_size"]) for p in measured["paths"]] == [("eagle_draft", 32)]
    text = q5["answer"]
    assert "GPU 0: copy cost per replay, CPU issue / GPU stream (eagle_draft bs 32 h4096: best grouped_foreach " \
           "72.0 µs CPU issue / grouped_foreach 7.0 µs GPU stream" in text
    assert "GPU 0: measurement cut short (3 of 4 workloads measured, about 1 s more would measure it)" in text
    assert "no workload was measured" not in text
    # Still incomplete (the rest was asked for), yet not "no GPU measured".
    assert result.exit_code == 4
    [incomplete] = doc["verdict"]["incomplete_hosts"]
    assert incomplete["reasons"][0].startswith("copy_bench: no GPU measured in full: no result within")
