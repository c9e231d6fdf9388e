"""The one torch child of a run: env's build facts, the GPU list without nvidia-smi and torch_caps' checks come
from one child under the chosen interpreter, started once; its failure is every later question's reason.
Through the CLI, a light local scan starts one torch child (so imports torch once), counted by a wrapper
interpreter that logs every process started under it."""
import json
import os
import subprocess
import sys

import pytest

from probes import env, torch_caps
from probes.context import ProbeContext, Skip
from probes.hostinfo import gpus, torch_child

torch = pytest.importorskip("torch")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def counting_python(tmp_path):
    """A wrapper interpreter: each process started under it logs its pid, its parent's and what it runs."""
    log = tmp_path / "starts.log"
    path = tmp_path / "python"
    path.write_text('#!/bin/sh\necho "$$ $PPID $1 $(printf %%.20s "$3")" >> %s\nexec %s "$@"\n'
                    % (log, sys.executable))
    path.chmod(0o755)
    return str(path), log


def run_context(python):
    return ProbeContext(options={"torch_caps": {"cuda": False}},
                        results={"deployment": {"interpreter": {"path": python, "why": "explicit"}}})


def test_env_gpus_and_torch_caps_share_one_child(tmp_path):
    python, log = counting_python(tmp_path)
    ctx = run_context(python)
    facts = env.serving_torch_facts(ctx, 30.0)
    listed, _ = gpus.gpus_from_torch_child(python, None, 30.0, ctx.results)
    caps = torch_caps.collect(ctx)
    assert facts["version"] == torch.__version__ and facts["executable"] == sys.executable
    assert listed["source"] in ("torch", None) and "nvidia-smi not found on PATH" in listed["reason"]
    assert caps["checks"]["cpu"]["ok"] is True and caps["torch_version"] == torch.__version__
    assert len(log.read_text().splitlines()) == 1          # three questions, one child
    # Another run (another results dict) gets its own child.
    env.serving_torch_facts(run_context(python), 30.0)
    assert len(log.read_text().splitlines()) == 2
    torch_child.close_all()


def test_a_failed_child_is_every_later_questions_reason_and_is_not_restarted(tmp_path):
    log = tmp_path / "starts.log"
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\necho start >> %s\necho 'broken venv: libpython missing' >&2\nexit 3\n" % log)
    python.chmod(0o755)
    ctx = run_context(str(python))
    facts = env.serving_torch_facts(ctx, 10.0)
    assert facts["available"] is False and "exit 3 without an answer" in facts["reason"]
    assert str(python) in facts["reason"] and "broken venv" in facts["reason"]
    with pytest.raises(Skip, match="exit 3 without an answer.*broken venv"):
        torch_caps.collect(ctx)
    assert log.read_text().splitlines() == ["start"]


def test_a_job_that_fails_leaves_the_child_answering(tmp_path):
    ctx = run_context(sys.executable)
    data, why = torch_child.ask(sys.executable, ctx.results, "no-such-job", None, 30.0)
    assert data is None and why.startswith("KeyError")
    data, why = torch_child.ask(sys.executable, ctx.results, "build", None, 30.0)
    assert why is None and data["version"] == torch.__version__
    torch_child.close_all()


def test_a_light_local_scan_imports_torch_once(tmp_path):
    python, log = counting_python(tmp_path)
    (tmp_path / "proc").mkdir()     # no live server to follow: the explicit --python is the chosen one
    (tmp_path / "bin").mkdir()      # no nvidia-smi: env's GPU list comes from the torch child too
    reports = tmp_path / "reports"
    out = subprocess.run([sys.executable, "-m", "gpudiag", "scan", "localhost", "--python", python,
                          "--reports-dir", str(reports), "--set", "deployment.proc_root=%s" % (tmp_path / "proc"),
                          "--set", "torch_caps.cuda=false", "--json"],
                         cwd=str(tmp_path), capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PATH=str(tmp_path / "bin"), PYTHONPATH=ROOT))
    assert out.returncode in (0, 1, 4), out.stderr[-2000:]
    run = json.loads(out.stdout)
    assert [h["status"] for h in run["hosts"]] == ["ok"], run["hosts"]
    stored = json.loads(next((reports / "runs").glob("*/hosts/localhost.json")).read_text())
    probes = stored["probes"]
    assert probes["env"]["data"]["torch"]["version"] == torch.__version__
    assert "torch.cuda under %s" % python in probes["env"]["data"]["gpus"]["reason"]
    assert probes["torch_caps"]["status"] == "ok" and probes["torch_caps"]["data"]["checks"]["cpu"]["ok"]
    starts = [line.split() for line in log.read_text().splitlines()]
    runners = {s[0] for s in starts if s[1] not in {t[0] for t in starts}}
    # Probe children start as `PYTHON -c BOOTSTRAP` (without -I, as a server's own imports see PYTHONPATH);
    # `-I -c QUERY` lines are sglang_source's one sys.path question, which imports no torch.
    bootstraps = [s for s in starts if s[1] in runners and s[2] == "-c"]
    assert len(runners) == 1 and len(bootstraps) == 1, starts   # the runner, and one torch child under it
