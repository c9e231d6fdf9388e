"""A stop that stops inside a container: SIGINT to `gpudiag scan` of a `container:` host while the env probe's torch
child hangs leaves no process of the runner or of the child's group, locally and over ssh. The stand-in `docker`
runs the command as docker exec does (tests/integration/test_scan_container.py): detached under a shim that keeps
its output pipes open after the exec client is gone, so only the end of the runner's stdin tells it the control
side is gone. Checked by the PIDs the interpreter wrapper writes into the test's directory."""
import json
import os
import signal
import sys

import pytest

from tests.integration.test_scan_container import install_stand_in
from tests.integration.test_stop_over_ssh import (local_recording_python, recording_python,
                                                  stop_while_the_child_hangs)


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGKILL, -signal.SIGKILL)],
                         ids=["SIGINT", "SIGKILL"])
def test_a_stopped_container_scan_ends_the_runner_and_its_hung_child_locally(tmp_path, signum, code):
    """SIGKILL gives gpudiag no chance to close anything: its end alone closes the exec client's stdin."""
    python, runners, children = local_recording_python(tmp_path)
    bin_dir, empty_proc = tmp_path / "bin", tmp_path / "proc"
    bin_dir.mkdir()
    empty_proc.mkdir()
    install_stand_in(bin_dir, tmp_path / "docker-argv.jsonl", sys.executable)
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(json.dumps({"hosts": {"localhost": {"container": "docker:box", "python": python}}}))
    returncode, err, took, cleared, before, after = stop_while_the_child_hangs(
        [sys.executable, "-m", "gpudiag", "scan", "-i", str(inventory), "localhost", "--probes", "env",
         "--reports-dir", str(tmp_path / "reports"), "--timeout", "120"],
        dict(os.environ, GPUDIAG_PROC_ROOT=str(empty_proc), PATH="%s:%s" % (bin_dir, os.environ["PATH"])),
        runners, children, signum=signum)
    print("local+docker %s: exit after %.2f s; processes before %d, after %d (%.2f s after the signal)" % (
        signal.Signals(signum).name, took, len(before), len(after), cleared))
    assert returncode == code, err
    assert took < 10 and len(before) >= 3
    assert after == [], "left in the container: %s" % after


def test_a_stopped_container_scan_over_ssh_ends_the_runner_and_its_hung_child(sshd_fleet, tmp_path):
    fleet = sshd_fleet
    stand_in = install_stand_in(fleet.bin_dir, tmp_path / "docker-argv.jsonl", fleet.system_python)
    try:
        slow, runners, children = recording_python(fleet, tmp_path, "slow", "sleep 600")
        empty_proc = tmp_path / "proc"
        empty_proc.mkdir()
        inventory = fleet.write_inventory(tmp_path / "inventory.yaml", ["h1"],
                                          extra={"h1": {"container": "docker:box", "python": slow}})
        code, err, took, cleared, before, after = stop_while_the_child_hangs(
            fleet.gpudiag_argv() + ["scan", "-i", str(inventory), "all", "--probes", "env", "--set",
                                    "deployment.proc_root=%s" % empty_proc, "--timeout", "120"],
            fleet.env(GPUDIAG_REPORTS=str(tmp_path / "reports")), runners, children, cwd=str(fleet.home))
    finally:
        stand_in.unlink()
    print("ssh+docker SIGINT: exit after %.2f s; processes before %d, after %d (%.2f s after the signal)" % (
        took, len(before), len(after), cleared))
    assert code == 130, err
    assert took < 10 and len(before) >= 3
    assert after == [], "left in the container: %s" % after
