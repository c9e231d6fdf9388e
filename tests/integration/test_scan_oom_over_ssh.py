"""The OOM follow-up over real OpenSSH: a real runner on an sshd host, held busy by a hanging stand-in
nvidia-smi and killed from the test by the pid it announced; the follow-up opens its own session on the same
transport and a stand-in `dmesg` on the session's PATH prints real kernel lines (tests/fixtures/kernel_log/)
carrying that pid."""
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "kernel_log" / "global_python3_no_clock.log"
ANNOUNCED = re.compile(r"^GPUDIAG-PROCESS \S+ (\{.*\})$", re.M)


def test_an_oom_kill_over_ssh_is_confirmed_by_the_announced_pid(sshd_fleet, tmp_path):
    fleet = sshd_fleet
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    copy, kernel = shared / "runner-stderr.log", shared / "kernel.log"
    # The host's interpreter, its stderr copied to a file the test reads the runner's announcement from.
    python = fleet.script("tee-python", f"exec /bin/bash -c 'exec \"$0\" \"$@\" 2> >(tee -a {copy} >&2)' "
                                        f"{fleet.system_python} \"$@\"")
    hung = shared / "nvidia-smi.pids"  # the hanging stand-in outlives the killed runner: ended by pid below
    stand_ins = {"nvidia-smi": f"echo $$ >> {hung}\nexec sleep 60\n", "dmesg": f"exec cat {kernel}\n"}
    for name, body in stand_ins.items():
        (fleet.bin_dir / name).write_text("#!/bin/sh\n" + body)
        (fleet.bin_dir / name).chmod(0o755)
    inventory = fleet.write_inventory(tmp_path / "inventory.yaml", ["h0"], extra={"h0": {"python": str(python)}})
    reports = tmp_path / "reports"
    proc = subprocess.Popen(fleet.gpudiag_argv() + ["scan", "-i", str(inventory), "all", *fleet.fast_scan_args,
                                                    "--timeout", "60", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=fleet.env(GPUDIAG_REPORTS=str(reports)))
    try:
        found, ends = None, time.monotonic() + 30
        while found is None and time.monotonic() < ends:
            found = ANNOUNCED.search(copy.read_text() if copy.exists() else "")
            time.sleep(0.05)
        assert found, "the runner never announced its pid"
        pid = json.loads(found.group(1))["pid"]
        lines = [line for line in FIXTURE.read_text().splitlines() if not line.startswith("# ")]
        kernel.write_text("\n".join(lines).replace("Killed process 10245 ", f"Killed process {pid} ") + "\n")
        os.kill(pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=90)
    finally:
        for name in stand_ins:
            (fleet.bin_dir / name).unlink()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stray in hung.read_text().split() if hung.exists() else []:
            try:
                os.kill(int(stray), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    assert proc.returncode == 3, err
    host = fleet.load_run(max((reports / "runs").iterdir()))[1]["h0"]
    assert host["status"] == "probe_killed"
    assert host["oom"]["verdict"] == "confirmed" and host["oom"]["pid"] == pid and host["oom"]["source"] == "dmesg"
    assert host["reason"].endswith(f"; oom: confirmed (kernel: Killed process {pid} (python3) anon-rss 3.6 GiB)")
