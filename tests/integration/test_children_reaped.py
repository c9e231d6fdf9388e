"""No child outlives the probe runner: through `gpudiag scan localhost`, a torch child whose process group would
stay behind after the runner (its interpreter is a shell that outlives the Python it starts) is gone, group
and all, when the scan returns; checked by PID."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("torch")


def lingering_python(tmp_path):
    """The runner (`-I -c ...`) runs as usual; any other process started under this interpreter (the torch
    child, `-c ...` without -I) is a shell, leader of the child's group, that logs its PID, runs Python, then
    sleeps on after it: left alone, it would outlive the runner by ten minutes."""
    log = tmp_path / "children.log"
    path = tmp_path / "python"
    path.write_text('#!/bin/sh\nif [ "$1" = "-I" ]; then exec %s "$@"; fi\necho $$ >> %s\n%s "$@"\nsleep 600\n'
                    % (sys.executable, log, sys.executable))
    path.chmod(0o755)
    return str(path), log


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open("/proc/%d/stat" % pid) as fh:
        return fh.read().rsplit(")", 1)[1].split()[0] != "Z"   # a zombie has ended


def group_members(pgid):
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name) as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(name))
    return found


def test_the_scan_leaves_no_process_of_the_torch_childs_group(tmp_path):
    python, log = lingering_python(tmp_path)
    empty_proc = tmp_path / "proc"
    empty_proc.mkdir()
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "gpudiag", "scan", "localhost", "--probes", "env", "--python", python,
                           "--reports-dir", str(tmp_path / "reports"), "--json"], capture_output=True, text=True,
                          timeout=240, env=dict(os.environ, GPUDIAG_PROC_ROOT=str(empty_proc)))
    took = time.monotonic() - started
    leaders = [int(line) for line in log.read_text().split()] if log.exists() else []
    try:
        assert leaders, "no torch child was started: %s" % proc.stderr[-2000:]
        host = json.loads(proc.stdout)
        assert proc.returncode in (0, 4), proc.stderr[-2000:]
        assert "localhost" in json.dumps(host)
        for pgid in leaders:
            assert not alive(pgid), "torch child %d outlived the runner" % pgid
            assert group_members(pgid) == []
        assert took < 200   # the runner waited within its bound, not for the sleep
    finally:
        for pgid in leaders:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
