"""Containers whose entrypoint runs the server: a PID-1 shell (`sh -c "python -m sglang.launch_server ...;
echo"`) or init wrapper (tini, dumb-init, docker-init) that launched it is part of that one server, never a
second server, and a wrapper's own binary (bash, tini) is never taken for the server's Python.

The first test runs a stand-in server under a real PID-1 shell in its own PID namespace (`unshare -fp
--mount-proc`) and the probe inside that namespace; the others read /proc trees laid out as such a
namespace shows them (pid 1 with ppid 0, the server its child)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from probes import deployment
from probes.context import ProbeContext

ROOT = Path(__file__).resolve().parents[2]
UNSHARE = shutil.which("unshare")
RUNNER = """\
import json, sys, time
sys.path.insert(0, sys.argv[1])
from probes import deployment
from probes.context import ProbeContext
deadline = time.monotonic() + 20
while True:
    data = deployment.collect(ProbeContext())
    if any(s["pid"] != 1 for s in data["servers"]) or time.monotonic() > deadline:
        break
    time.sleep(0.1)
print(json.dumps({"servers": data["servers"], "interpreter": data["interpreter"]}))
"""


def _namespaces_allowed() -> str | None:
    if UNSHARE is None:
        return "unshare (util-linux) is not installed"
    done = subprocess.run([UNSHARE, "-fp", "--mount-proc", "true"], capture_output=True, text=True, timeout=30)
    return None if done.returncode == 0 else f"PID namespaces are not allowed here: {done.stderr.strip()}"


def test_a_pid1_shell_entrypoint_and_its_server_are_one_server(tmp_path):
    why = _namespaces_allowed()
    if why:
        pytest.skip(why)
    package = tmp_path / "sglang"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "launch_server.py").write_text("import time\ntime.sleep(60)\n")
    (tmp_path / "runner.py").write_text(RUNNER)
    # PID 1 is the entrypoint shell; it runs the server, then (as a user's `docker exec gpudiag` would) the probe.
    entrypoint = (f"{sys.executable} -m sglang.launch_server --model-path /models/m --port 30123 & "
                  f"{sys.executable} {tmp_path / 'runner.py'} {ROOT}; kill $!; echo done")
    proc = subprocess.Popen([UNSHARE, "-fp", "--mount-proc", "--", "/bin/sh", "-c", entrypoint],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=dict(os.environ, PYTHONPATH=str(tmp_path)), cwd=tmp_path)
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert proc.returncode == 0, err
    data = json.loads(out.splitlines()[0])
    servers = data["servers"]
    assert len(servers) == 1, servers
    server = servers[0]
    assert server["pid"] != 1 and server["ppid"] == 1
    assert server["launched_via"] == {"pid": 1, "command": "sh"}
    assert server["python"] == sys.executable and server["args"]["port"] == 30123
    assert data["interpreter"]["path"] == sys.executable


def write_proc(root: Path, pid: int, ppid: int, argv: list[str], exe: str | None = None) -> None:
    """One /proc/PID entry: cmdline, and a stat line as the kernel writes it (fields past ppid zero)."""
    base = root / str(pid)
    base.mkdir(parents=True)
    (base / "cmdline").write_bytes(b"\0".join(w.encode() for w in argv) + b"\0")
    name = os.path.basename(argv[0])[:15]
    (base / "stat").write_text(f"{pid} ({name}) S {ppid} " + " ".join(["0"] * 48) + "\n")
    (base / "environ").write_bytes(b"PATH=/usr/bin:/bin\0")
    if exe:
        os.symlink(exe, base / "exe")


def servers(root: Path) -> tuple[list[dict], dict]:
    data = deployment.collect(ProbeContext(options={"deployment": {"proc_root": str(root)}}))
    return data["servers"], data["interpreter"]


SERVER = ["/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", "/models/m", "--port", "30000"]


@pytest.mark.parametrize("wrapper, command", [
    (["/bin/sh", "-c", " ".join(SERVER) + "; echo stopped"], "sh"),
    (["/bin/bash", "-c", "exec 2>&1; " + " ".join(SERVER) + " | tee /log/server.log"], "bash"),
    (["/usr/bin/tini", "--"] + SERVER, "tini"),
    (["/usr/bin/dumb-init", "--"] + SERVER, "dumb-init"),
    (["/sbin/docker-init", "--"] + SERVER, "docker-init"),
])
def test_a_pid1_wrapper_is_folded_into_its_server(tmp_path, wrapper, command):
    write_proc(tmp_path, 1, 0, wrapper, exe=wrapper[0])
    write_proc(tmp_path, 7, 1, SERVER, exe="/usr/bin/python3")
    found, _ = servers(tmp_path)
    assert [s["pid"] for s in found] == [7]
    assert found[0]["launched_via"] == {"pid": 1, "command": command}
    assert found[0]["python"] == "/usr/bin/python3" and found[0]["args"]["port"] == 30000


def test_a_wrapper_alone_never_names_its_own_binary_as_the_python(tmp_path):
    # The server child is not visible (another user's, or hidepid): the wrapper stands for the server, and
    # its interpreter is what its command names, never /usr/bin/bash or tini.
    write_proc(tmp_path, 1, 0, ["/bin/bash", "-c", "sglang serve --model-path /models/m; echo"], exe="/usr/bin/bash")
    write_proc(tmp_path, 2, 0, ["/usr/bin/tini", "--", "python3", "-m", "sglang.launch_server"], exe="/usr/bin/tini")
    found, chosen = servers(tmp_path)
    assert [s["pid"] for s in found] == [1, 2]
    assert all(s["python"] not in ("/usr/bin/bash", "/usr/bin/tini") for s in found), found
    assert chosen["path"] not in ("/usr/bin/bash", "/usr/bin/tini")
