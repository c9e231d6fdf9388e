"""torch_caps and env's torch section under the host's chosen Python: a real child under that interpreter; when
it cannot answer (missing, crashing, hung, no torch) torch_caps is skipped with a reason naming it."""
import json
import os
import stat
import subprocess
import sys

import pytest

from probes import env, torch_caps
from probes.context import ProbeContext, Skip
from probes.hostinfo import interpreter

torch = pytest.importorskip("torch")


def script(path, body):
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def served_by(python, why="live_server", options=None):
    return ProbeContext(options=options or {"torch_caps": {"cuda": False}},
                        results={"deployment": {"interpreter": {"path": python, "why": why}}})


def forbid_local_checks(monkeypatch):
    def here(ctx):
        raise AssertionError("the checks ran in the probing Python")
    monkeypatch.setattr(torch_caps, "collect_here", here)


def test_choice_comes_from_deployment_else_from_the_same_rule(tmp_path):
    assert interpreter.target(served_by("/opt/venv/bin/python")) == {"path": "/opt/venv/bin/python",
                                                                     "why": "live_server"}
    empty_proc = ProbeContext(options={"deployment": {"proc_root": str(tmp_path)}})
    chosen = interpreter.target(empty_proc)
    assert chosen["path"] == sys.executable and chosen["why"] == "default" and chosen["candidates"] == []
    assert chosen["reason"] == interpreter.WHY_TEXT["default"]


def test_explicit_python_is_the_requested_one_not_the_probing_one(tmp_path):
    """The bundle runs under whatever python3 started it: its --python names the interpreter to use."""
    servers = [{"pid": 9, "python": "/srv/venv/bin/python", "python_exists": True, "same_root": True}]
    chosen = interpreter.choose({"python": "/opt/other/python", "python_explicit": True}, servers)
    assert chosen["path"] == "/opt/other/python" and chosen["why"] == "explicit"
    assert chosen["differs_from_live"] == ["/srv/venv/bin/python"] and "--python" in chosen["note"]
    bare = interpreter.choose({"python": "sh", "python_explicit": True}, [])
    assert os.path.isabs(bare["path"]) and bare["path"].endswith("/sh")


def test_several_servers_lowest_pid_wins_and_every_python_is_listed():
    servers = [{"pid": 30, "python": "/b/python", "python_exists": True},
               {"pid": 12, "python": "/a/python", "python_exists": True},
               {"pid": 40, "python": "/a/python", "python_exists": True},
               {"pid": 50, "python": "/gone/python", "python_exists": False}]
    chosen = interpreter.choose({}, servers)
    assert chosen["path"] == "/a/python" and chosen["pid"] == 12 and chosen["why"] == "live_server"
    assert chosen["candidates"] == ["/a/python", "/b/python"]
    assert chosen["servers_by_python"] == {"/a/python": [12, 40], "/b/python": [30]}
    assert "2 live servers" in chosen["note"]


def test_which_interpreters_count_as_another(tmp_path):
    assert interpreter.is_other(sys.executable) is False
    assert interpreter.is_other(str(tmp_path / "missing" / "python")) is False
    assert interpreter.is_other("python3") is False  # not a path this probe can trust
    assert interpreter.is_other(script(tmp_path / "python", 'exec %s "$@"\n' % sys.executable)) is True
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = %s\n" % os.path.dirname(sys.executable))
    os.symlink(sys.executable, str(venv / "bin" / "python"))
    # Another venv over the same binary sees other packages, whether or not this Python is a venv itself.
    assert interpreter.is_other(str(venv / "bin" / "python")) is True


def test_checks_run_under_the_servers_python(tmp_path, monkeypatch):
    python = script(tmp_path / "python", 'exec %s "$@"\n' % sys.executable)
    forbid_local_checks(monkeypatch)
    data = torch_caps.collect(served_by(python))
    assert data["interpreter"] == {"path": python, "why": "live_server", "ran": "child"}
    assert data["executable"] == sys.executable and data["torch_version"] == torch.__version__
    cpu = data["checks"]["cpu"]
    assert cpu["ok"] is True and cpu["paths"]["contiguous_same_dtype"]["path"] == "per_tensor"


def test_the_probing_python_too_runs_the_checks_in_a_child(monkeypatch):
    forbid_local_checks(monkeypatch)
    data = torch_caps.collect(served_by(sys.executable, why="default"))
    assert data["interpreter"]["ran"] == "child" and data["checks"]["cpu"]["ok"] is True


def test_a_python_that_cannot_answer_is_a_skip_naming_it(tmp_path, monkeypatch):
    python = script(tmp_path / "python", "echo 'broken venv: libpython missing' >&2\nexit 3\n")
    forbid_local_checks(monkeypatch)
    with pytest.raises(Skip) as caught:
        torch_caps.collect(served_by(python))
    message = str(caught.value)
    assert message.startswith("under %s (live_server): " % python)
    assert "exit 3 without an answer" in message and "broken venv: libpython missing" in message


def test_a_missing_python_is_a_skip_naming_it(tmp_path, monkeypatch):
    forbid_local_checks(monkeypatch)
    missing = str(tmp_path / "nowhere" / "python")
    with pytest.raises(Skip, match="under %s .*cannot start" % missing):
        torch_caps.collect(served_by(missing))


def test_a_servers_python_without_torch_is_a_skip(tmp_path, monkeypatch):
    python = script(tmp_path / "python", 'exec %s -S "$@"\n' % sys.executable)  # -S: no site-packages, no torch
    forbid_local_checks(monkeypatch)
    with pytest.raises(Skip, match="skipped: torch is not importable"):
        torch_caps.collect(served_by(python))


def test_a_hung_child_is_cut_by_its_timeout(tmp_path):
    python = script(tmp_path / "python", "exec sleep 30\n")
    with pytest.raises(Skip, match="no answer within 2 s"):
        torch_caps.collect(served_by(python, options={"torch_caps": {"cuda": False, "child_timeout": 2}}))


def test_env_torch_section_follows_the_servers_python(tmp_path, monkeypatch):
    python = script(tmp_path / "python", 'exec %s "$@"\n' % sys.executable)
    monkeypatch.setattr(env, "torch_facts", lambda: {"available": False, "reason": "ran in the probing Python"})
    facts = env.serving_torch_facts(served_by(python), 10.0)
    assert facts["available"] is True and facts["version"] == torch.__version__
    assert facts["interpreter"] == {"path": python, "why": "live_server", "ran": "child"}
    # The probing Python itself: still a child, never an import in this process.
    here = env.serving_torch_facts(served_by(sys.executable, why="default"), 10.0)
    assert here["available"] is True and here["version"] == torch.__version__
    assert here["interpreter"] == {"path": sys.executable, "why": "default", "ran": "child"}


def test_env_torch_section_says_why_when_the_child_gives_nothing(tmp_path, monkeypatch):
    python = script(tmp_path / "python", "exit 5\n")
    monkeypatch.setattr(env, "torch_facts", lambda: pytest.fail("torch was read in the probing Python"))
    facts = env.serving_torch_facts(served_by(python), 10.0)
    assert facts["available"] is False and facts["version"] is None
    assert facts["interpreter"] == {"path": python, "why": "live_server", "ran": "child"}
    assert python in facts["reason"] and "exit 5" in facts["reason"]


def venv_seeing_our_packages(venv):
    """A new venv whose Python sees the packages this test's Python sees (torch included), in a venv or not.

    `--system-site-packages` would not do: a venv made from inside a venv is based on the *base* Python,
    so it would see the system's packages, not this venv's. A .pth that adds our site directories (with
    their own .pth files) gives it exactly ours.
    """
    import site
    import sysconfig
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    ours = [p for p in site.getsitepackages() + [sysconfig.get_paths()["purelib"]] if os.path.isdir(p)]
    lines = ["import site; site.addsitedir(%r)" % p for p in dict.fromkeys(ours)]
    with open(os.path.join(purelib, "gpudiag-test-our-packages.pth"), "w") as handle:
        handle.write("\n".join(lines) + "\n")
    return python


def test_a_nested_venv_sees_what_this_python_sees(tmp_path):
    python = venv_seeing_our_packages(tmp_path / "venv")
    out = subprocess.run([python, "-I", "-c", "import torch, sys; print(torch.__version__, sys.prefix)"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [torch.__version__, str(tmp_path / "venv")]


def test_through_the_probe_cli_a_live_server_in_a_venv(tmp_path):
    """`python -m probes`: a stand-in server runs under a venv; env and torch_caps describe that venv's torch."""
    venv = tmp_path / "venv"
    python = venv_seeing_our_packages(venv)
    stand_in = tmp_path / "stand_in" / "sglang"
    stand_in.mkdir(parents=True)
    (stand_in / "__init__.py").write_text("")
    (stand_in / "launch_server.py").write_text("import time\ntime.sleep(120)\n")
    server = subprocess.Popen([python, "-m", "sglang.launch_server", "--model-path", "/m"],
                              env=dict(os.environ, PYTHONPATH=str(tmp_path / "stand_in")))
    try:
        # Only this server in the probe's /proc view: other stand-ins on this machine stay out of it.
        proc = tmp_path / "proc"
        proc.mkdir()
        os.symlink("/proc/%d" % server.pid, str(proc / str(server.pid)))
        os.symlink("/proc/uptime", str(proc / "uptime"))
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        out = subprocess.run([sys.executable, "-m", "probes", "--probes", "env,deployment,torch_caps",
                              "--nonce", "T", "--set", "deployment.proc_root=" + str(proc),
                              "--set", "torch_caps.cuda=false", "--set", "env.command_timeout=5"],
                             cwd=root, capture_output=True, text=True, timeout=300)
    finally:
        server.kill()
        server.wait(timeout=10)
    text = out.stdout.split("GPUDIAG-BEGIN T\n", 1)[1].split("\nGPUDIAG-END T", 1)[0]
    probes = json.loads(text)["probes"]
    assert probes["deployment"]["data"]["interpreter"]["path"] == python
    expected = {"path": python, "why": "live_server", "ran": "child"}
    assert expected.items() <= probes["env"]["data"]["torch"]["interpreter"].items()
    assert probes["env"]["data"]["torch"]["executable"] == python
    caps = probes["torch_caps"]["data"]
    assert expected.items() <= caps["interpreter"].items() and caps["interpreter"]["pid"] == server.pid
    assert caps["executable"] == python and caps["checks"]["cpu"]["ok"]


def test_the_chosen_server_is_the_one_whose_interpreter_is_used():
    servers = [{"pid": 5, "python": "/a/python", "args": {"speculative_eagle_topk": 4}},
               {"pid": 9, "python": "/b/python", "args": {"speculative_eagle_topk": 8}}]
    by_pid = {"deployment": {"servers": servers, "interpreter": {"path": "/b/python", "pid": 9}}}
    assert interpreter.chosen_server(by_pid)["pid"] == 9
    by_path = {"deployment": {"servers": servers, "interpreter": {"path": "/b/python", "why": "explicit"}}}
    assert interpreter.chosen_server(by_path)["pid"] == 9
    other = {"deployment": {"servers": servers, "interpreter": {"path": "/c/python", "why": "explicit"}}}
    assert interpreter.chosen_server(other)["pid"] == 5
    assert interpreter.chosen_server({}) is None
    from probes.copybench import options
    assert options.server_args(by_pid) == {"speculative_eagle_topk": 8}
