"""The layout the tool is for, over a real sshd: a system `python3` without torch, a serving venv with torch and
a real sglang wheel, and a stand-in server running under it as `python -m sglang.launch_server
--speculative-algorithm EAGLE …`; a second stand-in under a second venv (0.5.11 beside 0.5.23).

With no `--python`, `scan --deep` runs torch_caps, copy_bench and cuda_graph in the serving venv, and so does
`repro cuda-graph-crash`: on a CPU machine they reach the CPU path or "no CUDA device", never "torch does not
import". The host's `python3` is a wrapper in this fleet's own bin dir (first on its ssh PATH) that runs a venv
made without site packages, so it cannot import torch however this machine is set up; the wrapper also points
deployment at a /proc view holding only this test's stand-ins, so other processes on the machine stay out.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration import conftest
from tests.integration.conftest import SSHD, SSHDFleet
from tests.sglang_wheels import SkipWheel, site_packages_for

torch = pytest.importorskip("torch")

SERVING, OTHER = "0.5.23", "0.5.11"
COPY_BENCH = ["batch_sizes=[1]", "hidden_sizes=[64]", "sweep_min_bytes=1024", "sweep_max_bytes=4096",
              "samples=3", "target_us=20", "max_iters=5", "draft_tokens=4", "paths=[\"eagle_draft\"]"]
STAND_IN = "import time\ntime.sleep(900)\n"


class SystemPythonFleet(SSHDFleet):
    """A fleet whose ssh sessions resolve `python3` through PATH even where a login file puts pyenv's shims
    first (PYENV_VERSION=system makes a shim run the next `python3` on PATH: this fleet's wrapper)."""

    def _launch(self, index, host_dir, port=None):
        original = conftest.SSHD_CONFIG
        conftest.SSHD_CONFIG = original.replace("SetEnv PATH=", "SetEnv PYENV_VERSION=system PATH=")
        try:
            return super()._launch(index, host_dir, port)
        finally:
            conftest.SSHD_CONFIG = original


def make_venv(path, *pth_dirs):
    """A venv without pip and without the system's site packages; `pth_dirs` go on its path by a .pth file."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120,
                   capture_output=True)
    python = path / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    for number, folder in enumerate(pth_dirs):
        Path(site, "gpudiag-test-%02d.pth" % number).write_text(str(folder) + "\n")
    return python


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    if os.geteuid() != 0 or not os.access(SSHD, os.X_OK):
        pytest.skip("the sshd fleet needs root and OpenSSH's sshd")
    try:
        serving_site, other_site = site_packages_for(SERVING), site_packages_for(OTHER)
    except SkipWheel as exc:
        pytest.skip(str(exc))
    root = tmp_path_factory.mktemp("serving-layout")
    torch_site = os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__)))
    system = make_venv(root / "system")
    probe = subprocess.run([str(system), "-c", "import torch"], capture_output=True, timeout=60)
    if probe.returncode == 0:
        pytest.skip("a venv without site packages still imports torch here")
    serving = make_venv(root / "venv_sglang", serving_site, torch_site)
    other = make_venv(root / "venv_old", other_site, torch_site)
    # The stand-in `sglang` is found first only by the servers (`-m` puts their cwd first on sys.path); the
    # probes ask each interpreter with -I and find the real wheel.
    stand_in = root / "stand_in"
    (stand_in / "sglang").mkdir(parents=True)
    (stand_in / "sglang" / "__init__.py").write_text("")
    (stand_in / "sglang" / "launch_server.py").write_text(STAND_IN)
    servers = []
    fleet = None
    try:
        for python, port, gpus in ((serving, 30000, "0"), (other, 31000, "1")):
            servers.append(subprocess.Popen(
                [str(python), "-m", "sglang.launch_server", "--model-path", "/models/none",
                 "--speculative-algorithm", "EAGLE", "--port", str(port)],
                cwd=str(stand_in), env=dict(os.environ, CUDA_VISIBLE_DEVICES=gpus), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        proc_view = root / "proc"
        proc_view.mkdir()
        for server in servers:
            os.symlink("/proc/%d" % server.pid, str(proc_view / str(server.pid)))
        os.symlink("/proc/uptime", str(proc_view / "uptime"))
        fleet = SystemPythonFleet(1).start()
        wrapper = fleet.bin_dir / "python3"
        wrapper.write_text("#!/bin/sh\nGPUDIAG_PROC_ROOT=%s\nexport GPUDIAG_PROC_ROOT\nexec %s \"$@\"\n"
                           % (proc_view, system))
        wrapper.chmod(0o755)
        yield {"fleet": fleet, "root": root, "system": str(system), "serving": str(serving), "other": str(other),
               "servers": servers, "serving_site": str(serving_site)}
    finally:
        if fleet is not None:
            fleet.stop()
        for server in servers:
            try:
                os.killpg(server.pid, 9)
            except ProcessLookupError:
                pass
            server.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)


def chosen_python(layout):
    """The live server with the lowest pid gives the host's interpreter."""
    first = min(layout["servers"], key=lambda s: s.pid)
    return layout["serving"] if first is layout["servers"][0] else layout["other"]


def test_deep_scan_without_python_runs_torch_work_in_the_serving_venv(layout, tmp_path):
    fleet = layout["fleet"]
    inventory = fleet.write_inventory(tmp_path / "inventory.yaml", ["h0"])
    argv = ["scan", "-i", str(inventory), "h0", "--deep", "--json", "--timeout", "400"]
    for item in COPY_BENCH:
        argv += ["--set", "copy_bench." + item]
    argv += ["--set", "cuda_graph.batch_sizes=[1]", "--set", "cuda_graph.draft_tokens=[2,2]"]
    proc = fleet.run_gpudiag(*argv, timeout=500)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    _, hosts = fleet.load_run(proc)
    host = hosts["h0"]
    assert host["transport"] == "ssh" and host["python"] == layout["system"], host.get("reason")
    probes = host["probes"]
    text = json.dumps(probes)
    assert "torch does not import" not in text and "torch is not importable" not in text

    deployment = probes["deployment"]["data"]
    wanted = chosen_python(layout)
    assert deployment["interpreter"]["path"] == wanted and deployment["interpreter"]["why"] == "live_server"
    assert sorted(deployment["interpreter"]["candidates"]) == sorted([layout["serving"], layout["other"]])
    # Both servers, each with its own interpreter and sglang release, named by pid, port and GPUs.
    by_python = {group["path"]: group for group in deployment["interpreters"]}
    assert by_python[layout["serving"]]["sglang"]["version"] == SERVING
    assert by_python[layout["other"]]["sglang"]["version"] == OTHER
    assert [s["port"] for s in by_python[layout["serving"]]["servers"]] == [30000]
    assert by_python[layout["other"]]["servers"][0]["gpus"] == "1"
    assert {s["sglang"]["version"] for s in deployment["servers"]} == {SERVING, OTHER}

    source = probes["sglang_source"]["data"]
    assert source["interpreter"]["path"] == wanted and source["version"] in (SERVING, OTHER)

    caps = probes["torch_caps"]
    assert caps["status"] == "ok", caps
    assert caps["data"]["interpreter"]["path"] == wanted and caps["data"]["executable"] == wanted
    assert caps["data"]["checks"]["cpu"]["ok"] is True

    bench = probes["copy_bench"]
    assert bench["status"] == "ok", bench
    assert bench["data"]["python"] == wanted and bench["data"]["interpreter"]["ran"] == "child"
    assert bench["data"]["device"] == "cpu" and bench["data"]["gpus"][0]["status"] == "ok"

    graph = probes["cuda_graph"]
    assert graph["status"] == "ok", graph
    data = graph["data"]
    assert data["interpreter"]["path"] == wanted
    assert data["environment"]["torch"] == torch.__version__
    assert "no CUDA device" in data["skip_reason"] and wanted in data["skip_reason"]
    assert data["cells"] and all(c["status"] == "skipped" for c in data["cells"])
    # The answers name the live server whose interpreter they describe.
    first = min(layout["servers"], key=lambda s: s.pid)
    assert data["server"]["pid"] == first.pid and data["server"]["port"] in (30000, 31000)
    assert bench["data"]["server"] == data["server"]


def test_repro_without_python_runs_in_the_serving_venv(layout, tmp_path):
    fleet = layout["fleet"]
    inventory = fleet.write_inventory(tmp_path / "inventory.yaml", ["h0"])
    reports = tmp_path / "reports"
    proc = fleet.run_gpudiag("repro", "cuda-graph-crash", "-i", str(inventory), "h0", "--batch-sizes", "1",
                             "--timeout", "300", "--reports-dir", str(reports), timeout=400)
    runs = sorted((reports / "runs").iterdir())
    assert runs, proc.stderr[-3000:]
    _, hosts = fleet.load_run(runs[-1])
    probes = hosts["h0"]["probes"]
    graph = probes["cuda_graph"]
    assert graph["status"] == "ok", graph
    wanted = chosen_python(layout)
    assert graph["data"]["interpreter"]["path"] == wanted
    assert "no CUDA device" in graph["data"]["skip_reason"]
    assert "torch does not import" not in json.dumps(probes)
    assert "no CUDA device" in proc.stdout + proc.stderr
    assert "interpreter: %s (the live sglang server's interpreter); live server pid" % wanted in proc.stdout


def test_an_explicit_python_other_than_the_servers_is_used_and_both_are_shown(layout, tmp_path):
    fleet = layout["fleet"]
    inventory = fleet.write_inventory(tmp_path / "inventory.yaml", ["h0"])
    explicit = layout["other"] if chosen_python(layout) == layout["serving"] else layout["serving"]
    # --python bypasses the wrapper that points deployment at this test's /proc view: name the view here, so
    # other processes on the machine stay out.
    view = "deployment.proc_root=%s" % (layout["root"] / "proc")
    proc = fleet.run_gpudiag("scan", "-i", str(inventory), "h0", "--probes", "deployment,torch_caps",
                             "--set", "torch_caps.cuda=false", "--set", view, "--python", explicit, "--json",
                             timeout=300)
    _, hosts = fleet.load_run(proc)
    probes = hosts["h0"]["probes"]
    chosen = probes["deployment"]["data"]["interpreter"]
    assert chosen["path"] == explicit and chosen["why"] == "explicit"
    assert chosen["differs_from_live"] == [chosen_python(layout)] and "--python" in chosen["note"]
    assert probes["torch_caps"]["data"]["interpreter"]["path"] == explicit
    # The report shows both interpreters and says which one the torch facts describe.
    report = fleet.run_gpudiag("report", json.loads(proc.stdout)["run_id"], "--json", timeout=120)
    answers = {q["id"]: q["answers"][0]["answer"] for q in json.loads(report.stdout)["answers"]["questions"]}
    live = chosen_python(layout)
    assert "--python %s differs from a live server's interpreter (%s)" % (explicit, live) in answers["Q9"]
    assert "torch facts describe %s, run by server pid" % explicit in answers["Q1"]
    assert "not read for server pid" in answers["Q1"] and live in answers["Q1"]


def test_the_report_names_both_servers_and_what_was_not_read_for_each(layout, tmp_path):
    """A light scan with no flags: the report names each server by pid, port and GPUs with its own release, and
    the answers from the one sglang read say which server they describe and that the other was not read."""
    fleet = layout["fleet"]
    inventory = fleet.write_inventory(tmp_path / "inventory.yaml", ["h0"])
    proc = fleet.run_gpudiag("scan", "-i", str(inventory), "h0", "--set", "torch_caps.cuda=false", "--json",
                             timeout=300)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    report = fleet.run_gpudiag("report", json.loads(proc.stdout)["run_id"], "--json", timeout=120)
    answers = {q["id"]: q["answers"][0]["answer"] for q in json.loads(report.stdout)["answers"]["questions"]}
    wanted = chosen_python(layout)
    by_python = {layout["serving"]: (layout["servers"][0].pid, 30000, "0", SERVING),
                 layout["other"]: (layout["servers"][1].pid, 31000, "1", OTHER)}
    label = "server pid %d (port %d, GPUs %s)"
    for python, (pid, port, gpus, version) in by_python.items():
        assert "%s: EAGLE" % (label % (pid, port, gpus)) in answers["Q9"]
        assert "sglang %s in %s" % (version, python) in answers["Q9"]
    [unread] = [python for python in by_python if python != wanted]
    pid, port, gpus, version = by_python[unread]
    not_read = "not read for %s, which runs sglang %s in %s" % (label % (pid, port, gpus), version, unread)
    read_pid, read_port, read_gpus, read_version = by_python[wanted]
    described = "sglang facts describe %s, run by %s" % (wanted, label % (read_pid, read_port, read_gpus))
    for qid in ("Q2", "Q3", "Q7"):
        assert answers[qid].endswith("%s; %s" % (described, not_read)), (qid, answers[qid])
    assert "torch facts describe %s" % wanted in answers["Q1"] and not_read in answers["Q1"]
    assert "%s: not checked — sglang not read for it" % (label % (pid, port, gpus)) in answers["Q8"]
    markdown = fleet.run_gpudiag("report", json.loads(proc.stdout)["run_id"], "--markdown", timeout=120)
    assert not_read in markdown.stdout.replace("\\", "")
