"""A frame the host finished writing is its answer, whatever the command does next: a grandchild that keeps
stdout open after the probe exits, or a probe that closes its output and keeps running, costs neither the
result (not `timeout`, not `unreachable`) nor the rest of the deadline. Real sshd on loopback."""
import os
import signal
import time

import pytest

WRAPPERS = {
    # a child left behind holding stdout and stderr: sshd never sees the output end
    "grandchild holds stdout": "sleep 40 &\necho $! >> {pids}\nexec {python} \"$@\"",
    # the output closed, the command still running: no exit status for 40 s
    "output closed, still running": "{python} \"$@\"\nexec >&- 2>&-\necho $$ >> {pids}\nexec sleep 40",
}


@pytest.mark.parametrize("case", list(WRAPPERS))
def test_a_finished_frame_is_kept_when_the_command_then_hangs(sshd_fleet, tmp_path, case):
    pids = tmp_path / "pids"
    script = sshd_fleet.script(f"hang-{abs(hash(case))}-{os.getpid()}",
                               WRAPPERS[case].format(pids=pids, python=sshd_fleet.system_python))
    inventory = sshd_fleet.write_inventory(tmp_path / "inventory.yaml", ["h0"], python=str(script))
    reports = tmp_path / "reports"
    started = time.monotonic()
    try:
        proc = sshd_fleet.run_gpudiag("scan", "-i", str(inventory), "all", *sshd_fleet.fast_scan_args, "--json",
                                      "--timeout", "35", env=sshd_fleet.env(GPUDIAG_REPORTS=str(reports)),
                                      timeout=90)
        took = time.monotonic() - started
        host = sshd_fleet.load_run(proc, reports)[1]["h0"]
    finally:
        for pid in (pids.read_text().split() if pids.exists() else []):
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert host["status"] == "ok", (host["status"], host.get("reason"))
    assert took < 25, f"{took:.1f} s: the scan waited for the hang"
