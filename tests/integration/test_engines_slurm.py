"""contrib/slurm/ for real: the probe bundle through a live one-node Slurm (the sbatch script with
`sbatch --wait`, `srun --label` by hand, one file per node, a step cancelled mid-run), each output ingested
and reported like a scan. Skips where Slurm cannot run here (see slurm_cluster.py); CI runs it."""
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from gpudiag.engines import frames
from tests.integration.slurm_cluster import SlurmCluster, SlurmUnavailable, skip_or_fail, unavailable_reason

ROOT = Path(__file__).resolve().parents[2]
SBATCH_SCRIPT = ROOT / "contrib" / "slurm" / "gpudiag-scan.sbatch"
FAST = ["--probes", "env", "--set", "env.torch=false"]   # plumbing runs: quick on any host


@pytest.fixture(scope="module")
def slurm():
    reason = unavailable_reason()
    if reason:
        skip_or_fail(reason)
    # Short and private: munged's socket path must fit a unix socket name, and its dirs must be root's alone.
    directory = Path(tempfile.mkdtemp(prefix="gpudiag-slurm-"))
    try:
        cluster = SlurmCluster.start(directory)
    except SlurmUnavailable as exc:
        shutil.rmtree(directory, ignore_errors=True)
        skip_or_fail(f"the one-node Slurm did not start: {exc}")
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def work(slurm, tmp_path_factory):
    """A submission directory holding the bundle (the light probe set), as on a login node."""
    work = tmp_path_factory.mktemp("slurm-work")
    (work / "home").mkdir()
    built = gpudiag(slurm, work, "bundle", "-o", str(work / "gpudiag-probes.pyz"))
    assert built.returncode == 0, built.stderr
    return work


def gpudiag(slurm, work, *args, reports="reports"):
    script = Path(sys.executable).parent / "gpudiag"
    argv = [str(script)] if script.is_file() else [sys.executable, "-m", "gpudiag"]
    return slurm.run(argv + [str(a) for a in args], env_for(slurm, work, reports), work)


def env_for(slurm, work, reports="reports"):
    """Jobs inherit this environment: their `python3` is the one a direct `scan localhost` runs, and the
    deployment probe reads an empty /proc (GPUDIAG_PROC_ROOT), so sglang servers that other processes on
    this machine start or stop cannot change the answers between two runs."""
    empty_proc = work / "empty-proc"
    empty_proc.mkdir(exist_ok=True)
    return slurm.env(GPUDIAG_REPORTS=str(work / reports), HOME=str(work / "home"), GPUDIAG_PROC_ROOT=str(empty_proc))


def ingested(slurm, work, reports, *sources):
    proc = gpudiag(slurm, work, "ingest", *sources, "--json", reports=reports)
    assert proc.returncode in (0, 3), proc.stderr
    run = json.loads(proc.stdout)
    return run, {h["name"]: h for h in run["hosts"]}


def report_json(slurm, work, reports):
    proc = gpudiag(slurm, work, "report", "--json", reports=reports)
    assert proc.returncode in (0, 3), proc.stderr
    return json.loads(proc.stdout)


def answers(report, host):
    """Every answer with this run's host name taken out, for comparing runs that name the host differently."""
    out = []
    for question in report["answers"]["questions"]:
        for a in question["answers"]:
            # The command carries its own run's --python (the direct scan names one, the batch job does not).
            words = a["command"].split()
            if "--python" in words:
                del words[words.index("--python"):words.index("--python") + 2]
            command = " ".join("HOST" if word == host else word for word in words)
            out.append((question["id"], a["status"], a["answer"], command, ["HOST" if h == host else h
                                                                          for h in a["hosts"]]))
    return out


def host_doc(work, reports, run_id, name):
    return json.loads((work / reports / "runs" / run_id / "hosts" / f"{name}.json").read_text())


def facts(doc):
    env = doc["probes"]["env"]["data"]
    return {"status": doc["status"], "probes": {k: v["status"] for k, v in doc["probes"].items()},
            "python": doc["python"], "env": {k: env[k] for k in ("hostname", "os", "kernel", "cpu_count")}}


def test_sbatch_script_ingested_like_a_direct_scan(slurm, work):
    # Both runs name the interpreter, so neither depends on which python3 or server it finds.
    python = shutil.which("python3", path=env_for(slurm, work)["PATH"])
    env = env_for(slurm, work) | {"GPUDIAG_ARGS": f"--python {python}"}
    proc = slurm.run(["sbatch", "--wait", "--parsable", str(SBATCH_SCRIPT)], env, work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job = proc.stdout.strip().split(";")[0]
    output = work / f"gpudiag-slurm-{job}.out"
    run, hosts = ingested(slurm, work, "reports-sbatch", output)
    assert run["kind"] == "ingest" and run["source"]["engines"] == ["srun"]
    assert [(h["name"], h["status"]) for h in run["hosts"]] == [(slurm.node, "ok")]
    report = report_json(slurm, work, "reports-sbatch")
    assert report["summary"]["hosts"] == {"by_status": {"ok": 1}, "total": 1}

    direct = gpudiag(slurm, work, "scan", "localhost", "--python", python, "--json", reports="reports-direct")
    assert direct.returncode == 0, direct.stderr
    direct_run = json.loads(direct.stdout)
    expected = report_json(slurm, work, "reports-direct")
    assert answers(report, slurm.node) == answers(expected, "localhost")
    assert report["verdict"]["exit_code"] == expected["verdict"]["exit_code"] == 0
    assert facts(host_doc(work, "reports-sbatch", run["run_id"], slurm.node)) == \
        facts(host_doc(work, "reports-direct", direct_run["run_id"], "localhost"))
    # The script's last step removed the node-local copy: nothing stays on the node.
    assert not Path(f"/tmp/gpudiag-probes-{job}.pyz").exists()


def test_srun_label_and_one_file_per_node(slurm, work):
    bundle = ["python3", "gpudiag-probes.pyz", *FAST]
    labelled = slurm.run(["srun", "--label", "--ntasks-per-node=1", *bundle], env_for(slurm, work), work)
    assert labelled.returncode == 0, labelled.stderr
    (work / "gpudiag.out").write_text(labelled.stdout)          # srun --label ... > gpudiag.out
    assert labelled.stdout.splitlines()[-1].startswith("0: GPUDIAG-")
    per_node = slurm.run(["srun", "--ntasks-per-node=1", "--output=gpudiag-%N.out", *bundle],
                         env_for(slurm, work), work)
    assert per_node.returncode == 0, per_node.stderr
    for source, engine in (("gpudiag.out", "srun"), (f"gpudiag-{slurm.node}.out", "file")):
        run, hosts = ingested(slurm, work, f"reports-{engine}", source)
        assert run["source"]["engines"] == [engine]
        assert [(h["name"], h["status"]) for h in run["hosts"]] == [(socket.gethostname(), "ok")], source


def test_cancelled_step_is_a_frame_error_beside_the_finished_task(slurm, work):
    """Two tasks on the node: task 0 finishes, task 1 hangs in nvidia-smi until its step is cancelled."""
    hang = work / "hang"
    hang.mkdir()
    (hang / "nvidia-smi").write_text("#!/bin/sh\nexec sleep 120\n")
    (hang / "nvidia-smi").chmod(0o755)
    bundle = f"python3 gpudiag-probes.pyz {' '.join(FAST)}"
    task = (f'if [ "$SLURM_PROCID" = 1 ]; then PATH={hang}:$PATH exec {bundle} --set env.command_timeout=600; '
            f"else exec {bundle}; fi")
    name = f"gpudiag-cancel-{time.time_ns()}"
    output = work / "cancelled.out"
    with open(output, "w") as sink:                               # srun ... > cancelled.out 2>&1
        srun = subprocess.Popen(["srun", f"--job-name={name}", "--label", "-N1", "-n2", "--overcommit",
                                 "--kill-on-bad-exit=0", "/bin/sh", "-c", task], stdout=sink,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env_for(slurm, work),
                                cwd=work)
    try:
        wait_for(output, lambda text: "\n0: GPUDIAG-END " in text and
                 re.search(r'^1: GPUDIAG-EVENT \S+ \{.*"probe":"env","state":"started"', text, re.M))
        job = slurm.run(["squeue", "-h", "-n", name, "-o", "%i"], env_for(slurm, work), work).stdout.strip()
        cancel = slurm.run(["scancel", f"{job}.0"], env_for(slurm, work), work)
        assert cancel.returncode == 0, cancel.stderr
        srun.wait(timeout=60)
    finally:
        if srun.poll() is None:
            srun.kill()
            srun.wait()
    assert srun.returncode != 0
    run, hosts = ingested(slurm, work, "reports-cancel", output)
    assert hosts[slurm.node]["status"] == "ok"
    killed = hosts[f"{slurm.node}-2"]
    assert killed["status"] == "frame_error"
    assert re.search(rf"srun: error: {re.escape(slurm.node)}: task 1: (Killed|Terminated)", killed["reason"])
    assert re.search(r"\(last step: probe \d+/\d+ env started\)$", killed["reason"])
    report = gpudiag(slurm, work, "report", reports="reports-cancel")
    assert report.returncode in (0, 3), report.stderr
    assert "Traceback" not in report.stderr
    assert slurm.node in report.stdout and f"{slurm.node}-2" in report.stdout and "frame_error" in report.stdout


def test_task_without_the_interpreter_is_python_missing(slurm, work):
    task = ('if [ "$SLURM_PROCID" = 1 ]; then exec /opt/none/bin/python3 gpudiag-probes.pyz; fi; '
            f"exec python3 gpudiag-probes.pyz {' '.join(FAST)}")
    proc = subprocess.run(["srun", "--label", "-N1", "-n2", "--overcommit", "--kill-on-bad-exit=0", "/bin/sh", "-c",
                           task], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL,
                          env=env_for(slurm, work), cwd=work, timeout=180)
    assert proc.returncode != 0
    (work / "no-python.out").write_text(proc.stdout)              # srun ... > no-python.out 2>&1
    _, hosts = ingested(slurm, work, "reports-no-python", "no-python.out")
    assert hosts[slurm.node]["status"] == "ok"
    missing = hosts[f"{slurm.node}-2"]
    assert missing["status"] == "python_missing"
    assert "/opt/none/bin/python3" in missing["reason"]


def wait_for(path, ready, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready(path.read_text(errors="replace")):
            return
        time.sleep(0.2)
    pytest.fail(f"{path.name} never got there within {timeout} s:\n{path.read_text(errors='replace')[-2000:]}")


# -- how srun's own lines are read, without a cluster -------------------------------------------------
def test_srun_task_lists():
    assert frames.task_numbers("0-2,5") == ["0", "1", "2", "5"]
    assert frames.task_numbers("3") == ["3"]
    assert frames.task_numbers("5-2") == [] and frames.task_numbers("0-999999999") == []


def test_srun_notes_name_no_host_in_unlabelled_output():
    """Unlabelled frames cannot be told apart by task: a note about task 1 must not invent a second host."""
    text = ("\nGPUDIAG-BEGIN n1\n" + json.dumps({"host": "gpu-1", "probes": {}}) + "\nGPUDIAG-END n1\n"
            "srun: error: gpu-1: task 0: Exited with exit code 2\n")
    parsed = frames.parse_text(text)
    assert [f.host_hint() for f in parsed.frames] == ["gpu-1"] and parsed.frameless == {}
