"""A probe runner killed by SIGKILL, through `gpudiag scan localhost`: the control side reads the kernel's OOM
records in a follow-up on the same transport and says whether the OOM killer was it, by the pid the runner
announced. The runner is a real one, held busy by a stand-in nvidia-smi that hangs and killed from the test
by its announced pid; a stand-in `dmesg` first on PATH prints real kernel lines (tests/fixtures/kernel_log/,
each naming its source) carrying that pid."""
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "kernel_log"
ANNOUNCED = re.compile(r"^GPUDIAG-PROCESS \S+ (\{.*\})$", re.M)


def executable(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def recorded(name, old_pid, new_pid, clock_s):
    """A fixture's real lines with the recorded pid swapped for this run's and the kernel clock for now."""
    lines = [line for line in (FIXTURES / name).read_text().splitlines() if not line.startswith("# ")]
    text = "\n".join(lines).replace(f"Killed process {old_pid} ", f"Killed process {new_pid} ")
    return re.sub(r"\[\s*\d+\.\d+\]", f"[{clock_s:12.6f}]", text) + "\n"


@pytest.fixture
def host(tmp_path):
    """A bin directory first on PATH (hanging nvidia-smi, stand-in dmesg and journalctl) and an interpreter
    that copies the runner's stderr to a file the test reads the announcement from."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # the hanging stand-in outlives the killed runner: scan_and_kill ends it by its pid
    executable(bin_dir / "nvidia-smi", f"#!/bin/sh\necho $$ >> {tmp_path / 'nvidia-smi.pids'}\nexec sleep 60\n")
    executable(bin_dir / "dmesg", f"#!/bin/sh\nexec cat {tmp_path / 'kernel.log'}\n")
    executable(bin_dir / "journalctl", "#!/bin/sh\necho 'No journal files were found.' >&2\nexit 1\n")
    stderr_copy = tmp_path / "runner-stderr.log"
    python = executable(tmp_path / "python", f'#!/bin/bash\nexec {sys.executable} "$@" 2> >(tee -a {stderr_copy} >&2)\n')
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200", PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
               GPUDIAG_REPORTS=str(tmp_path / "reports"))
    return {"tmp": tmp_path, "python": python, "stderr_copy": stderr_copy, "env": env}


def scan_and_kill(host, kernel_lines):
    """Start the scan, wait for the runner's announcement, write the kernel's lines for its pid, SIGKILL it."""
    proc = subprocess.Popen([sys.executable, "-m", "gpudiag", "scan", "localhost", "--python", str(host["python"]),
                             "--probes", "env", "--set", "env.torch=false", "--timeout", "60", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=host["env"])
    try:
        ends = time.monotonic() + 30
        while time.monotonic() < ends:
            text = host["stderr_copy"].read_text() if host["stderr_copy"].exists() else ""
            found = ANNOUNCED.search(text)
            if found:
                break
            time.sleep(0.05)
        assert found, "the runner never announced its pid"
        announced = json.loads(found.group(1))
        assert announced["role"] == "runner"
        (host["tmp"] / "kernel.log").write_text(kernel_lines(announced))
        time.sleep(0.3)  # the runner is in its env probe, held by the hanging nvidia-smi
        os.kill(announced["pid"], signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        hung = host["tmp"] / "nvidia-smi.pids"
        for stray in hung.read_text().split() if hung.exists() else []:
            try:
                os.kill(int(stray), signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert proc.returncode == 3, err
    run_dir = max((host["tmp"] / "reports" / "runs").iterdir())
    result = json.loads((run_dir / "hosts" / "localhost.json").read_text())
    return announced, result


def test_an_oom_kill_of_the_runner_is_confirmed_from_the_kernel_log(host):
    announced, result = scan_and_kill(
        host, lambda a: recorded("memcg_python3.log", 140339, a["pid"], a["clock_s"] + 1.0))
    assert result["status"] == "probe_killed"
    oom = result["oom"]
    assert oom["verdict"] == "confirmed" and oom["pid"] == announced["pid"] and oom["role"] == "runner"
    assert oom["source"] == "dmesg" and oom["scope"] == "cgroup" and oom["anon_rss_kb"] == 15596
    assert result["reason"] == (
        "the probe process was killed by SIGKILL on the host; oom: confirmed (kernel, memory cgroup limit: "
        f"Killed process {announced['pid']} (python3) anon-rss 15.2 MiB)")
    report = subprocess.run([sys.executable, "-m", "gpudiag", "report", "--markdown"], capture_output=True,
                            text=True, env=host["env"], timeout=60).stdout
    assert f"- localhost: status probe_killed: {result['reason']}" in report
    assert "The kernel's OOM killer ended the probes" in report
    assert "check the kernel log" not in report            # the log was read: no advice to read it
    as_json = json.loads(subprocess.run([sys.executable, "-m", "gpudiag", "report", "--json"], capture_output=True,
                                        text=True, env=host["env"], timeout=60).stdout)
    assert as_json["hosts"][0]["oom"] == oom


def test_a_kill_the_kernel_log_does_not_record_is_not_found(host):
    # The same real lines, but for another pid and for a process from before the runner started.
    def kernel_lines(a):
        other = recorded("global_python3_no_clock.log", 10245, a["pid"] + 1, 0.0)
        # stamped well before the runner, but never before boot: a machine up for less than 10 minutes has no
        # clock of -300 s (the kernel prints none, and an unstamped kill is not told apart by time)
        earlier = recorded("kern_log_python3_reaped.log", 15784, a["pid"], max(0.0, a["clock_s"] - 600.0))
        return other + earlier
    _, result = scan_and_kill(host, kernel_lines)
    assert result["oom"] == {"verdict": "not_found", "source": "dmesg"}
    assert result["reason"].endswith("; oom: not found in the kernel log (dmesg)")


def test_a_kernel_log_no_source_can_read_says_why(host):
    executable(host["tmp"] / "bin" / "dmesg",
               "#!/bin/sh\necho 'dmesg: read kernel buffer failed: Operation not permitted' >&2\nexit 1\n")
    if any(os.access(p, os.R_OK) for p in ("/var/log/kern.log", "/var/log/messages")):
        pytest.skip("this machine has a readable syslog kernel file, the last source")
    _, result = scan_and_kill(host, lambda a: "")
    assert result["oom"]["verdict"] == "not_readable"
    assert result["reason"].startswith("the probe process was killed by SIGKILL on the host; the kernel's OOM "
                                       "killer sends SIGKILL too, look for it in the host's kernel log; oom: kernel "
                                       "log not readable (dmesg: read kernel buffer failed: Operation not permitted; "
                                       "No journal files were found.; /var/log/kern.log: No such file or directory")
