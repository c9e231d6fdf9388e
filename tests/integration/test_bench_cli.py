"""`gpudiag bench localhost` against a stand-in sglang server on 127.0.0.1: a `python -m sglang.launch_server`
process (found by the deployment probe as any live server is) whose ThreadingHTTPServer answers `/generate`
as sglang 0.5.23 streams it (`data: {json}` events, then `data: [DONE]`, srt/entrypoints/http_server.py; each
with `text` and `meta_info` holding `completion_tokens`, `spec_verify_ct`, `e2e_latency`,
srt/managers/tokenizer_manager.py), checks the Bearer api key, and logs a decode line rendered
from 0.5.23's own format string for each request it answers. Started and stopped by the test by process group."""
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from tests.probes.sglang_log_formats import rendered_lines
from tests.sglang_wheels import SkipWheel, site_packages_for

SECRET = "sk-bench-Secret0123456789"
STANDIN = r'''
import http.server, json, sys, threading, time
port = int(sys.argv[sys.argv.index("--port") + 1])
key = sys.argv[sys.argv.index("--api-key") + 1]
line = open(sys.argv[sys.argv.index("--decode-line-file") + 1]).read()
lock = threading.Lock()
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/generate" or self.headers.get("Authorization") != "Bearer " + key:
            self.send_response(401); self.send_header("Content-Length", "0"); self.end_headers(); return
        ids, params = body["input_ids"], body["sampling_params"]
        assert all(0 <= t < 1000 for t in ids) and params["ignore_eos"] is True and body["stream"] is True
        n = params["max_new_tokens"]
        with lock:
            sys.stdout.write(line); sys.stdout.flush()
        self.send_response(200); self.send_header("Content-Type", "text/event-stream"); self.end_headers()
        for done in range(4, n + 4, 4):   # one event per verify step of 4 tokens, the text so far in each
            k = min(done, n)
            event = {"text": "x" * k, "meta_info": {
                "id": "r", "finish_reason": {"type": "length", "length": n} if k == n else None,
                "prompt_tokens": len(ids), "completion_tokens": k, "cached_tokens": 0,
                "spec_verify_ct": (k + 3) // 4, "e2e_latency": 0.02}}
            time.sleep(0.002)
            self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n"); self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
    def do_GET(self):
        self.send_response(404); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
threading.Thread(target=server.serve_forever, daemon=True).start()
'''


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def decode_line():
    """One 0.5.23 decode line at #running-req 4, accept len 3.9; None when the wheel cannot be had."""
    try:
        package = site_packages_for("0.5.23") / "sglang"
    except SkipWheel:
        return None
    values = {"#running-req": 4, "gen throughput (token/s)": 512.0, "graph": True, "accept len": 3.9}
    line = [t for t in rendered_lines(package, "Decode batch", values) if "#token: " in t][-1]
    return "[2026-09-01 10:00:00 TP0] %s\n" % line


@pytest.fixture
def standin(tmp_path, request):
    bound = getattr(request, "param", "127.0.0.1")   # the --host its argv names (it listens on loopback anyway)
    root = tmp_path / "server"
    (root / "sglang").mkdir(parents=True)
    (root / "sglang" / "__init__.py").write_text("")
    (root / "sglang" / "launch_server.py").write_text(
        STANDIN + "open(%r, 'w').write('ready')\ntime.sleep(300)\n" % str(root / "ready"))
    line = decode_line()
    (root / "line").write_text(line or "request answered\n")   # one log line per answered request
    port = free_port()
    log = open(root / "server.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "sglang.launch_server", "--model-path", "/models/m-%s" % uuid.uuid4().hex[:8],
         "--speculative-algorithm", "EAGLE3", "--api-key", SECRET, "--host", bound, "--port", str(port),
         "--decode-line-file", str(root / "line")],
        stdout=log, stderr=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=str(root)), start_new_session=True)
    deadline = time.monotonic() + 15
    while not (root / "ready").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (root / "ready").exists(), "stand-in server did not start"
    yield proc, line
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    log.close()


def gpudiag(*args, timeout=240, proc_view=None):
    env = dict(os.environ, GPUDIAG_PROC_ROOT=str(proc_view)) if proc_view else None
    return subprocess.run([sys.executable, "-m", "gpudiag", *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


@pytest.fixture
def foreign_server(tmp_path):
    """Another sglang server on this machine, as other work would run one: alive, named as a server, answering
    nothing on its port. Stopped by its process group."""
    root = tmp_path / "foreign"
    (root / "sglang").mkdir(parents=True)
    (root / "sglang" / "__init__.py").write_text("")
    (root / "sglang" / "launch_server.py").write_text("import time\ntime.sleep(300)\n")
    proc = subprocess.Popen([sys.executable, "-m", "sglang.launch_server", "--model-path", "/models/other",
                             "--host", "127.0.0.1", "--port", str(free_port())],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, PYTHONPATH=str(root)), start_new_session=True)
    deadline = time.monotonic() + 10
    while b"sglang.launch_server" not in _cmdline(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert b"sglang.launch_server" in _cmdline(proc.pid), "foreign stand-in did not start"
    yield proc
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def _cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def own_proc_view(tmp_path, *pids):
    """A /proc of these processes alone (links to this host's entries, so the bench still loads them)."""
    view = tmp_path / "proc"
    view.mkdir()
    for pid in pids:
        (view / str(pid)).symlink_to("/proc/%d" % pid)
    (view / "uptime").symlink_to("/proc/uptime")
    return view


def test_bench_loads_the_live_server_per_level_and_report_shows_both(tmp_path, standin):
    proc, line = standin
    reports = str(tmp_path / "reports")
    started = time.monotonic()
    bench = gpudiag("bench", "localhost", "--concurrency", "1,4", "--requests", "8", "--input-len", "16",
                    "--output-len", "32", "--max-seconds", "60", "--reports-dir", reports, "--json",
                    proc_view=own_proc_view(tmp_path, proc.pid))
    assert time.monotonic() - started < 120     # bounded by its requests: it stops by itself
    assert bench.returncode == 0, bench.stderr
    assert "concurrency 1" in bench.stderr and "8/8 answered" in bench.stderr   # progress per level
    doc = json.loads(bench.stdout)
    mine = [r for r in doc["rows"] if r["pid"] == proc.pid]
    assert [r["concurrency"] for r in mine] == [1, 4]
    for row in mine:
        assert row["sent"] == row["answered"] == 8 and row["failed"] == 0
        assert row["output_tokens"] == 8 * 32 and row["output_throughput"] > 0
        assert row["median_accept_len"] == 4.0      # completion_tokens / spec_verify_ct = 32 / 8
        assert 0 < row["median_ttft_ms"] < row["median_latency_ms"] and row["median_itl_ms"] > 0

    run_dir = tmp_path / "reports" / "runs" / doc["run_id"]
    run = json.loads((run_dir / "run.json").read_text())
    assert run["kind"] == "bench"
    text = (run_dir / "hosts" / "localhost.json").read_text()
    assert SECRET not in text                        # used on the host, never stored
    record = json.loads(text)["probes"]["servingbench"]["data"]["servers"][str(proc.pid)]
    assert record["api_key_used"] is True and record["vocab"] == 1000
    if line is not None:  # the decode lines the server wrote during the load, through the serving parser
        assert record["log"]["decode_lines"] == 16
        assert record["log"]["buckets"]["4-7"]["median_accept_len"] == 3.9

    report = gpudiag("report", doc["run_id"], "--reports-dir", reports, "--json", timeout=120)
    shown = json.loads(report.stdout)
    rows = [r for r in shown["bench"] if r["pid"] == proc.pid]
    assert [(r["concurrency"], r["answered"]) for r in rows] == [(1, 8), (4, 8)]
    [log] = [r for r in shown["bench_log"] if r["pid"] == proc.pid]
    console = subprocess.run([sys.executable, "-m", "gpudiag", "report", doc["run_id"], "--reports-dir", reports],
                             capture_output=True, text=True, timeout=120, env=dict(os.environ, COLUMNS="250"))
    assert "Bench load" in console.stdout and "8/8" in console.stdout
    markdown = gpudiag("report", doc["run_id"], "--reports-dir", reports, "--markdown", timeout=120).stdout
    assert "## Bench load" in markdown
    assert "| localhost | pid %d port %s | 4 | 8/8 |" % (proc.pid, record["port"]) in markdown
    assert "Is speculative decoding paying off on each server?" in markdown   # beside Q10
    if line is not None:
        assert log["decode_lines"] == 16 and log["median_accept_len"] == 3.9
        assert "pid %d: 16 decode lines during the load, accept len 3.90" % proc.pid in markdown


def test_bench_stops_at_max_seconds(tmp_path, foreign_server, standin):
    """Only the test's server is loaded: a server other work runs here (the foreign stand-in, refusing every
    request) is outside the test's /proc view, so it neither spends the two seconds nor adds a row."""
    proc, _ = standin
    view = own_proc_view(tmp_path, proc.pid)
    bench = gpudiag("bench", "localhost", "--concurrency", "1", "--requests", "100000", "--max-seconds", "2",
                    "--reports-dir", str(tmp_path / "reports"), "--json", proc_view=view)
    assert foreign_server.poll() is None                 # alive throughout, and not the bench's
    rows = json.loads(bench.stdout)["rows"]
    assert {r["pid"] for r in rows} == {proc.pid}
    [row] = rows
    assert 0 < row["answered"] < 100000 and row["duration_s"] < 5


def test_ctrl_c_stops_sending_at_once_and_keeps_the_run(tmp_path, standin):
    proc, _ = standin
    log = tmp_path / "server" / "server.log"
    reports = tmp_path / "reports"
    bench = subprocess.Popen([sys.executable, "-m", "gpudiag", "bench", "localhost", "--concurrency", "2",
                              "--requests", "100000", "--max-seconds", "120", "--reports-dir", str(reports)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                             env=dict(os.environ, GPUDIAG_PROC_ROOT=str(own_proc_view(tmp_path, proc.pid))))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and log.read_text().count("\n") < 20:   # the load is under way
        time.sleep(0.1)
    os.killpg(bench.pid, signal.SIGINT)   # Ctrl-C reaches the whole foreground group
    _, err = bench.communicate(timeout=60)
    assert bench.returncode == 130 and "interrupted" in err
    time.sleep(1.0)
    answered = log.read_text().count("\n")
    time.sleep(1.5)
    assert log.read_text().count("\n") == answered        # nothing is sent after the interrupt
    [run] = (reports / "runs").iterdir()
    assert json.loads((run / "run.json").read_text())["interrupted"] is True


@pytest.mark.parametrize("standin", ["192.0.2.7", "127.0.0.1.nip.io"], indirect=True)
def test_a_server_bound_to_another_interface_is_not_loaded_and_its_row_says_why(tmp_path, standin, request):
    """Only a literal loopback address is loaded: a name that starts like one is resolved through DNS, and
    whatever it resolves to would receive the Bearer key."""
    proc, _ = standin
    bound = request.node.callspec.params["standin"]
    reports = str(tmp_path / "reports")
    bench = gpudiag("bench", "localhost", "--concurrency", "1", "--requests", "2", "--reports-dir", reports, "--json",
                    proc_view=own_proc_view(tmp_path, proc.pid))
    [row] = [r for r in json.loads(bench.stdout)["rows"] if r["pid"] == proc.pid]
    assert row["reason"] == f"listens on {bound}, not on loopback: not loaded" and "concurrency" not in row
    assert (tmp_path / "server" / "server.log").read_text() == ""      # not one request reached it
    markdown = gpudiag("report", json.loads(bench.stdout)["run_id"], "--reports-dir", reports, "--markdown").stdout
    assert f"not loaded — listens on {bound}, not on loopback" in markdown


def test_a_host_without_a_live_server_is_incomplete(tmp_path):
    empty = tmp_path / "proc"   # the deployment probe reads this /proc: no server in it
    empty.mkdir()
    bench = subprocess.run([sys.executable, "-m", "gpudiag", "bench", "localhost", "--concurrency", "1",
                            "--reports-dir", str(tmp_path / "r")], capture_output=True, text=True, timeout=240,
                           env=dict(os.environ, GPUDIAG_PROC_ROOT=str(empty), COLUMNS="200"))
    assert bench.returncode == 4, bench.stderr
    assert "localhost: incomplete" in bench.stdout and "no live sglang server on this host" in bench.stdout


def test_bench_requires_concurrency_and_scan_never_runs_it(tmp_path):
    missing = gpudiag("bench", "localhost", "--reports-dir", str(tmp_path / "r"), timeout=60)
    assert missing.returncode == 2 and "--concurrency" in missing.stderr
    bad = gpudiag("bench", "localhost", "--concurrency", "1,x", "--reports-dir", str(tmp_path / "r"), timeout=60)
    assert bad.returncode == 2 and "--concurrency: 'x' is not a whole number" in bad.stderr
    assert "Traceback" not in bad.stderr
    named = gpudiag("scan", "localhost", "--probes", "servingbench", "--reports-dir", str(tmp_path / "r"), timeout=60)
    assert named.returncode == 2 and "runs only through gpudiag bench" in named.stderr
    scan = gpudiag("scan", "localhost", "--deep", "--probes", "deployment", "--reports-dir", str(tmp_path / "r"),
                   "--json", "--timeout", "120")
    host = json.loads((tmp_path / "r" / "runs" / json.loads(scan.stdout)["run_id"] / "hosts" / "localhost.json")
                      .read_text())
    assert "copy_bench" in host["probes"] and "servingbench" not in host["probes"]
