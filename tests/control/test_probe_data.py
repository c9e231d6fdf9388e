"""Probe data declared in code: every probe that can run on a CPU, run for real through the CLI, fits its
declaration; sglang_source on real wheels fits; a misfit is one line naming the field; the docs are current."""
import copy
import glob
import json
import os
import subprocess
import sys

import pytest

from gpudiag.probe_data import ProbeDataError, check_host_document, fitted, fitted_host, host_problems, probe_problem
from probes import schemas
from probes.probe_info import SHAPES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FLEET = os.path.join(ROOT, "tests", "fixtures", "runs", "fleet3", "hosts")
CPU_PROBES = ("env", "torch_caps", "deployment", "sglang_source", "copy_bench", "cuda_graph")
SMALL_BENCH = ["device=cpu", "batch_sizes=[1]", "hidden_sizes=[64]", "samples=3", "max_iters=3",
               "sweep_max_bytes=4096", "target_us=20"]


@pytest.fixture(scope="module")
def scanned(tmp_path_factory):
    """One real scan of this machine with every probe, stored as gpudiag stores it."""
    pytest.importorskip("torch")
    reports = tmp_path_factory.mktemp("reports")
    argv = [sys.executable, "-m", "gpudiag", "scan", "localhost", "--probes", ",".join(CPU_PROBES),
            "--reports-dir", str(reports), "--json"]
    for item in SMALL_BENCH:
        argv += ["--set", "copy_bench." + item]
    empty_proc = tmp_path_factory.mktemp("proc")   # servers other work runs here choose no interpreter
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env=dict(os.environ, GPUDIAG_PROC_ROOT=str(empty_proc)))
    assert proc.returncode in (0, 1, 4), proc.stderr[-2000:]   # 4: the GPU-only check could not run here
    [path] = glob.glob(str(reports / "runs" / "*" / "hosts" / "localhost.json"))
    return path, json.load(open(path, encoding="utf-8"))


def test_every_probe_that_runs_on_a_cpu_fits_its_declaration(scanned):
    path, doc = scanned
    assert sorted(doc["probes"]) == sorted(CPU_PROBES)
    statuses = {name: r["status"] for name, r in doc["probes"].items()}
    assert all(statuses[name] == "ok" for name in CPU_PROBES if name != "cuda_graph"), statuses
    assert statuses["cuda_graph"] in ("ok", "skipped")   # without a GPU it measures nothing
    check_host_document(doc, path)   # raises on the first misfit
    assert host_problems(doc) == []


def test_a_renamed_or_retyped_key_in_real_output_fails_naming_the_field(scanned):
    path, doc = scanned
    renamed = copy.deepcopy(doc)
    gpu = renamed["probes"]["copy_bench"]["data"]["gpus"][0]
    gpu["workloads"][0]["fields"][0]["buffer_dtype"] = gpu["workloads"][0]["fields"][0].pop("dtype")
    with pytest.raises(ProbeDataError) as err:
        check_host_document(renamed, path)
    assert str(err.value) == f"{path}: probes.copy_bench.data.gpus[0].workloads[0].fields[0].dtype: missing"
    retyped = copy.deepcopy(doc)
    retyped["probes"]["env"]["data"]["gpus"]["count"] = "0"
    assert host_problems(retyped) == ["probes.env.data.gpus.count: expected int, got str '0'"]


@pytest.mark.parametrize("version", ("0.5.11", "0.5.14", "0.5.23"))
def test_sglang_source_on_real_wheels_fits_its_declaration(version):
    from probes import sglang_source
    from probes.context import ProbeContext
    from tests.sglang_wheels import require, site_packages_for
    require(version)
    site = str(site_packages_for(version))
    data = sglang_source.collect(ProbeContext(options={"sglang_source": {"site_packages": site}}))
    assert data["found"] is True and data["version"] == version
    assert probe_problem("sglang_source", {"status": "ok", "data": data}) is None


def test_misfits_are_one_line_naming_the_field():
    spec = schemas.obj({"rows": schemas.lst(schemas.obj({"n": schemas.i(), "kind": schemas.enum(("a", "b"))})),
                        "note": schemas.s().null().opt()})
    assert schemas.check(spec, {"rows": [{"n": 1, "kind": "a"}]}, "x") is None
    assert schemas.check(spec, {"rows": [{"n": 1, "kind": "a"}], "note": None}, "x") is None
    assert schemas.check(spec, {"rows": [{"n": True, "kind": "a"}]}, "x") == "x.rows[0].n: expected int, got bool true"
    assert schemas.check(spec, {"rows": [{"n": 1, "kind": "c"}]}, "x") == "x.rows[0].kind: expected a|b, got str 'c'"
    assert schemas.check(spec, {"rows": {}}, "x") == "x.rows: expected list of object, got dict"
    assert schemas.check(spec, {"rows": [], "note": 3}, "x") == "x.note: expected str or null, got int 3"
    assert schemas.check(spec, {"rows": [{"n": 1}]}, "x") == "x.rows[0].kind: missing"
    assert schemas.fits(spec, {"rows": [{"n": 1, "kind": "a"}]}) and not schemas.fits(spec, {"rows": [{"n": True}]})
    # Undeclared probes and results that are not ok carry nothing to check.
    assert probe_problem("future_probe", {"status": "ok", "data": 1}) is None
    assert probe_problem("env", {"status": "error", "error": {}}) is None


def test_every_recorded_run_fits_the_declarations():
    paths = sorted(glob.glob(os.path.join(ROOT, "tests", "fixtures", "runs", "*", "hosts", "*.json")))
    assert len(paths) >= 3
    for path in paths:
        check_host_document(json.load(open(path, encoding="utf-8")), path)


def test_the_recorded_fleet_is_what_the_probes_produce_now():
    """scripts/record-fleet.py --check reruns the light probes for real (the sglang wheels of the fleet's
    releases, its nvidia-smi outputs, its servers) and merges the recorded GPU segments: a probe whose
    output changed shape, or a segment that no longer fits, fails here, naming the field."""
    pytest.importorskip("torch")
    from tests.sglang_wheels import require
    for version in ("0.5.11", "0.5.23"):
        require(version)
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "record-fleet.py"), "--check"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _record_fleet():
    import importlib.util
    spec = importlib.util.spec_from_file_location("record_fleet", os.path.join(ROOT, "scripts", "record-fleet.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_drifted_fixture_is_named_down_to_the_field():
    record = _record_fleet()
    fixture = json.load(open(os.path.join(FLEET, "gpu-a.json"), encoding="utf-8"))
    drifted = copy.deepcopy(fixture)
    drifted["probes"]["env"]["data"]["gpus"]["gpu_count"] = drifted["probes"]["env"]["data"]["gpus"].pop("count")
    assert record.first_difference(fixture, drifted) == \
        "$.probes.env.data.gpus.count: in the fixture, no longer produced"
    drifted = copy.deepcopy(fixture)
    drifted["probes"]["torch_caps"]["data"]["checks"]["cpu"]["ok"] = 1
    assert record.first_difference(fixture, drifted) == \
        "$.probes.torch_caps.data.checks.cpu.ok: bool in the fixture, int now"
    assert record.first_difference(fixture, copy.deepcopy(fixture)) is None


def test_a_segment_the_release_cannot_produce_is_cleaned_or_refused():
    """0.5.11 has no env-gated fast path: its copy_bench rows carry no on/off timings; a recorded check on a
    live server's GPU is refused."""
    record = _record_fleet()
    fixture = json.load(open(os.path.join(FLEET, "gpu-a.json"), encoding="utf-8"))
    bench = fixture["probes"]["copy_bench"]["data"]
    assert bench["installed"]["release"] == "0.5.11"
    assert all("env" not in w["strategies"]["installed"] for g in bench["gpus"] for w in g["workloads"])
    env, deployment = fixture["probes"]["env"]["data"], fixture["probes"]["deployment"]["data"]
    segment = {"cuda_checks": {"cuda:0": {"status": "ok", "ok": True}}}
    with pytest.raises(record.RecordError, match="checks on GPUs the policy leaves alone: cuda:0"):
        record.merge_torch_caps({"checks": {}}, segment, env, deployment)


def test_a_misfit_probe_is_that_probes_error_and_the_host_keeps_the_rest(tmp_path):
    """A stored probe whose data does not fit is that probe's error naming the field: the host keeps its other
    probes (its sglang answers stay), and the verdict calls it incomplete, never unreadable."""
    import shutil
    from click.testing import CliRunner
    from gpudiag.cli import cli
    run = tmp_path / "fleet3"
    shutil.copytree(os.path.dirname(FLEET), run)
    doc = json.load(open(run / "hosts" / "gpu-b.json", encoding="utf-8"))
    del doc["probes"]["env"]["data"]["gpus"]["count"]
    (run / "hosts" / "gpu-b.json").write_text(json.dumps(doc), encoding="utf-8")
    result = CliRunner().invoke(cli, ["report", str(run), "--json"])
    assert "Traceback" not in result.output
    out = json.loads(result.output)
    hosts = {h["name"]: h for h in out["hosts"]}
    assert hosts["gpu-a"]["status"] == "ok" and hosts["gpu-b"]["status"] == "ok"
    incomplete = {h["name"]: h["reasons"] for h in out["verdict"]["incomplete_hosts"]}
    assert "env: its data does not fit its declaration: probes.env.data.gpus.count: missing" in incomplete["gpu-b"]
    q3 = next(q for q in out["answers"]["questions"] if q["id"] == "Q3")
    assert any("gpu-b" in a["hosts"] and a["status"] == "answered" for a in q3["answers"])


def test_fitted_fills_only_what_hand_written_data_lacks():
    for name in SHAPES:
        assert probe_problem(name, {"status": "ok", "data": fitted(name, {})}) is None, name
    env = fitted("env", {"hostname": "lone", "python": {"version": "3.10.12"}, "gpus": {"devices": [{"index": 3}]}})
    assert env["hostname"] == "lone" and env["python"]["version"] == "3.10.12"
    assert env["gpus"]["devices"][0]["index"] == 3 and env["gpus"]["devices"][0]["uuid"] is None
    assert probe_problem("env", {"status": "ok", "data": env}) is None
    doc = fitted_host({"name": "h", "probes": {"env": {"status": "ok", "data": {}},
                                               "torch_caps": {"status": "skipped", "reason": "no torch"}}})
    assert doc["probes"]["torch_caps"] == {"status": "skipped", "reason": "no torch"}
    assert host_problems(doc) == []
    wrong = fitted("env", {"cpu_count": "many"})       # a wrong type stays wrong: fitted() adds, never converts
    assert probe_problem("env", {"status": "ok", "data": wrong}) == \
        "probes.env.data.cpu_count: expected int or null, got str 'many'"


def _judged_one(name, data):
    from gpudiag.models import ProbeResult
    from gpudiag.probe_data import judged
    return judged({name: ProbeResult(status="ok", duration_s=1.0, data=data)})[name]


def test_a_misfitting_record_costs_that_record_named_never_the_probes_other_data():
    """The recorded H200 run lost cuda_graph's whole data to `cells[0].algorithm: missing`; one GPU's record
    missing its name would have thrown away every other GPU's copy timings."""
    from gpudiag.probe_data import DROPPED, data_errors
    good = {"path": "eagle_draft", "algorithm": "EAGLE", "batch_size": 1, "draft_tokens": 16, "status": "ok"}
    bad = {"path": "eagle_draft", "batch_size": 4, "draft_tokens": 16, "status": "skipped"}
    result = _judged_one("cuda_graph", dict(fitted("cuda_graph", {}), cells=[bad, good]))
    assert result.status == "ok" and result.data["cells"] == [good]
    assert result.data[DROPPED] == ["probes.cuda_graph.data.cells[0].algorithm: missing"]
    assert data_errors({"cuda_graph": result}) == [
        "cuda_graph: 1 record(s) did not fit the declaration and were left out: "
        "probes.cuda_graph.data.cells[0].algorithm: missing"]
    gpus = [{"index": 0, "status": "timeout"}, fitted("copy_bench", {"gpus": [{"index": 1, "name": "H200",
                                                                                "status": "ok"}]})["gpus"][0]]
    kept = _judged_one("copy_bench", dict(fitted("copy_bench", {}), gpus=gpus))
    assert kept.status == "ok" and [g["index"] for g in kept.data["gpus"]] == [1]
    assert kept.data[DROPPED][0].startswith("probes.copy_bench.data.gpus[0].")
    # Stored with its dropped records named, the data reads back as it was kept.
    assert _judged_one("copy_bench", kept.data).data == kept.data


def test_a_misfit_outside_any_record_still_refuses_the_probes_data():
    data = fitted("cuda_graph", {"cells": []})
    data["modes"] = "synthetic"
    result = _judged_one("cuda_graph", data)
    assert result.status == "error" and "probes.cuda_graph.data.modes: expected list" in result.error["message"]
