"""Progress through the CLI: a scan's stderr (a pipe, not a terminal) shows one plain line per step as the
host reports it, in order, locally and over a real sshd; results stay on stdout; a host's hostile or
flooding event lines never reach the terminal as they were sent."""
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gpudiag.bundle import ALL_PROBES
from gpudiag.transports.events import BURST

ROOT = Path(__file__).resolve().parents[2]
SMALL_BENCH = ["batch_sizes=[1]", "hidden_sizes=[64]", "sweep_min_bytes=1024", "sweep_max_bytes=4096",
               "samples=3", "target_us=20", "max_iters=5", "draft_tokens=4", "device=cpu", "strategies=loop"]


def bench_settings():
    return [arg for item in SMALL_BENCH for arg in ("--set", "copy_bench." + item)]


def torch_here():
    return subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0


def event_lines(stderr, host):
    return [line[len(host) + 2:] for line in stderr.splitlines() if line.startswith(host + ": ") and
            ("probe " in line or ": device " in line or ": cell " in line)]


def run_order(host):
    """The probes of a stored host result in the order the runner ran them (the file sorts them)."""
    return [name for name in ALL_PROBES if name in host["probes"]]


def run_local(tmp_path, *args, env=None):
    empty_proc = tmp_path / "proc"
    empty_proc.mkdir(exist_ok=True)   # no server elsewhere on this machine chooses the interpreter
    argv = [sys.executable, "-m", "gpudiag", "scan", "localhost", "--reports-dir", str(tmp_path / "reports"),
            "--json", "--set", "deployment.proc_root=%s" % empty_proc, *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=str(tmp_path),
                          env=env or dict(os.environ, PYTHONPATH=str(ROOT), TERM="xterm"))


def test_a_light_local_scan_streams_each_probe_in_order(tmp_path):
    proc = run_local(tmp_path)
    assert proc.returncode == 0, proc.stderr
    run = json.loads(proc.stdout)                      # results on stdout, unbroken by progress
    assert "GPUDIAG-EVENT" not in proc.stdout + proc.stderr
    host = json.loads((tmp_path / "reports" / "runs" / run["run_id"] / "hosts" / "localhost.json").read_text())
    order = run_order(host)
    lines = event_lines(proc.stderr, "localhost")
    expected = []
    for number, name in enumerate(order, 1):
        expected += [f"probe {number}/{len(order)} {name} started",
                     f"probe {number}/{len(order)} {name} finished: {host['probes'][name]['status']}"]
    assert [line.split(" (")[0] for line in lines] == expected
    # The host's own line comes after its steps.
    assert proc.stderr.index("[1/1] localhost: ok") > proc.stderr.index(expected[-1])


@pytest.mark.skipif(not torch_here(), reason="torch is not importable here")
def test_a_copy_bench_scan_shows_its_device_steps(tmp_path):
    proc = run_local(tmp_path, "--probes", "copy_bench", *bench_settings())
    assert proc.returncode == 0, proc.stderr
    steps = [line.split(" (")[0] for line in event_lines(proc.stderr, "localhost")]
    bench = steps.index("probe 3/3 copy_bench started")
    assert steps[bench:] == ["probe 3/3 copy_bench started", "copy_bench: device 1/1 cpu started",
                             "copy_bench: device 1/1 cpu finished: ok", "probe 3/3 copy_bench finished: ok"]


STANDIN = '''#!%(python)s
"""A host that sends hostile progress lines, then a valid frame."""
import json, os, sys
payload = json.loads(sys.stdin.buffer.readline())
tag = ("GPUDIAG-EVENT %%s " %% payload["nonce"]).encode()
def event(doc):
    os.write(2, tag + json.dumps(doc).encode() + b"\\n")
event({"probe": "env\\x1b]0;owned\\x07\\x1b[2J", "step": "probe", "state": "started", "i": 1, "n": 1})
os.write(2, tag + b"{broken\\n")
os.write(2, tag + b'{"probe": "' + b"A" * 300000 + b'"}\\n')
for k in range(5000):
    event({"probe": "flood", "step": "cell", "state": "started", "i": k, "n": 5000})
os.write(2, b"plain stderr line\\n")
doc = {"schema": 1, "host": "standin", "probes": {"env": {"status": "ok", "duration_s": 0.0, "data": {}}}}
frame = "\\nGPUDIAG-BEGIN %%s\\n%%s\\nGPUDIAG-END %%s\\n" %% (payload["nonce"], json.dumps(doc), payload["nonce"])
os.write(1, frame.encode())
'''


def test_hostile_event_lines_are_sanitised_bounded_and_rate_limited(tmp_path):
    standin = tmp_path / "hostile-python"
    standin.write_text(STANDIN % {"python": sys.executable})
    standin.chmod(standin.stat().st_mode | stat.S_IXUSR)
    proc = run_local(tmp_path, "--python", str(standin), "--probes", "env")
    assert json.loads(proc.stdout)["hosts"][0]["status"] == "ok", proc.stderr
    err = proc.stderr
    assert "\x1b" not in err and "\x07" not in err and "AAAA" not in err and "broken" not in err
    assert "localhost: probe 1/1 env started\n" in err    # the escapes are gone, the text stays
    flood = [line for line in err.splitlines() if "flood: cell" in line]
    assert 0 < len(flood) <= BURST + 100
    assert max(len(line) for line in err.splitlines()) < 600


def test_an_ssh_scan_streams_each_hosts_steps_in_order(sshd_fleet, tmp_path):
    inventory = sshd_fleet.write_inventory(tmp_path / "inventory.yaml", ["h0", "h1"])
    args = ["scan", "-i", str(inventory), "h0", "h1", "--json", "--probes", "env", "--set", "env.torch=false"]
    with_bench = torch_here()
    if with_bench:   # copy_bench's device step over ssh, in an interpreter that has torch
        args += ["--probes", "env,copy_bench", "--python", sys.executable, *bench_settings()]
    proc = sshd_fleet.run_gpudiag(*args, timeout=300)
    assert proc.stdout.strip(), proc.stderr
    _, hosts = sshd_fleet.load_run(proc)
    for name in ("h0", "h1"):
        assert hosts[name]["status"] == "ok", hosts[name].get("reason")
        steps = [line.split(" (")[0] for line in event_lines(proc.stderr, name)]
        order = run_order(hosts[name])
        assert steps[:2] == [f"probe 1/{len(order)} {order[0]} started",
                             f"probe 1/{len(order)} {order[0]} finished: ok"]
        assert steps[-1] == f"probe {len(order)}/{len(order)} {order[-1]} finished: ok"
        if with_bench:
            at = steps.index(f"probe {len(order)}/{len(order)} copy_bench started")
            assert steps[at + 1:at + 3] == ["copy_bench: device 1/1 cpu started",
                                            "copy_bench: device 1/1 cpu finished: ok"]


def test_a_dumb_terminal_gets_plain_lines_and_a_real_one_a_live_display(tmp_path):
    import pty
    outputs = {}
    for term in ("dumb", "xterm"):
        main, secondary = pty.openpty()
        env = dict(os.environ, PYTHONPATH=str(ROOT), TERM=term, COLUMNS="160")
        argv = [sys.executable, "-m", "gpudiag", "scan", "localhost", "--probes", "deployment",
                "--reports-dir", str(tmp_path / "reports")]
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=secondary,
                                 cwd=str(tmp_path), env=env)
        os.close(secondary)
        data = b""
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:   # the terminal closed with the child
                break
            if not chunk:
                break
            data += chunk
        child.wait(timeout=120)
        os.close(main)
        outputs[term] = data.decode("utf-8", "replace")
    assert "localhost: probe 1/1 deployment started" in outputs["dumb"]
    assert "localhost: probe 1/1 deployment started" not in outputs["xterm"]
