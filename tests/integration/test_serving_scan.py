"""Q10 and the serving findings through `gpudiag scan localhost` and `gpudiag report`: stand-in sglang servers
whose stdout is a log of decode lines rendered from sglang 0.5.23's own format strings (the real wheel, read
as AST: tests/probes/sglang_log_formats.py), with the figures of the investigation this tool automates —
DFlash at 86 tok/s vs 65 for the baseline at concurrency 1, 1146 vs 1493 at 128, graphs off — and an EAGLE3
server that accepts no draft token. Other processes on this machine may be sglang servers too: every
assertion names the stand-ins' own pids, and each run uses model names no other process has."""
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

RELEASE = "0.5.23"


def decode_lines(seconds, running, accept, tput, graph):
    try:
        package = site_packages_for(RELEASE) / "sglang"
    except SkipWheel as exc:
        pytest.skip(str(exc))
    values = {"#running-req": running, "gen throughput (token/s)": tput, "graph": graph}
    if accept is not None:
        values["accept len"] = accept
    line = [t for t in rendered_lines(package, "Decode batch", values) if "#token: " in t][-1]
    if accept is None:  # a server without speculation prints no acceptance fields
        line = line.split(", accept len")[0] + ", " + line.split("block accept len: 9.25, 7, ")[1]
    return "".join("[2026-09-01 10:%02d:%02d TP0] %s\n" % (s // 60, s % 60, line) for s in seconds)


class Server:
    """`python -m sglang.launch_server ARGS` whose stdout is a file holding `log`; idles until killed."""

    def __init__(self, root, log, args):
        (root / "sglang").mkdir(parents=True)
        (root / "sglang" / "__init__.py").write_text("")
        (root / "sglang" / "launch_server.py").write_text(
            "import sys, time\nsys.stdout.write(open(%r).read()); sys.stdout.flush()\n"
            "open(%r, 'w').write('ready')\ntime.sleep(300)\n" % (str(root / "log.src"), str(root / "ready")))
        (root / "log.src").write_text(log)
        self.out = open(root / "server.log", "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "sglang.launch_server", *args], stdout=self.out,
                                     stderr=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=str(root)),
                                     start_new_session=True)
        deadline = time.monotonic() + 15
        while not (root / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (root / "ready").exists(), "stand-in server did not start"

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)
        self.out.close()


@pytest.fixture
def servers(tmp_path):
    started = []

    def start(name, log, *args):
        started.append(Server(tmp_path / name, log, args))
        return started[-1]
    yield start
    for server in started:
        server.stop()


def test_scan_answers_q10_and_finds_what_speculation_costs(tmp_path, servers):
    model = "/models/Qwen3-8B-%s" % uuid.uuid4().hex[:8]
    spec = servers("dflash", decode_lines(range(0, 8), 1, 3.81, 86.0, False)
                   + decode_lines(range(60, 68), 128, 3.52, 1146.0, False),
                   "--model-path", model, "--speculative-algorithm", "DFLASH",
                   "--speculative-num-draft-tokens", "8", "--port", "30001")
    base = servers("baseline", decode_lines(range(0, 8), 1, None, 65.0, True)
                   + decode_lines(range(60, 68), 128, None, 1493.0, True), "--model-path", model, "--port", "30002")
    stuck = servers("eagle3", decode_lines(range(0, 8), 4, 1.0, 300.0, True),
                    "--model-path", model + "-other", "--speculative-algorithm", "EAGLE3",
                    "--speculative-num-draft-tokens", "4", "--port", "30003")
    reports = tmp_path / "reports"
    scan = subprocess.run([sys.executable, "-m", "gpudiag", "scan", "localhost", "--probes", "deployment",
                           "--reports-dir", str(reports), "--json"], capture_output=True, text=True, timeout=240)
    run = json.loads(scan.stdout)
    host = json.loads((reports / "runs" / run["run_id"] / "hosts" / "localhost.json").read_text())
    logs = host["probes"]["deployment"]["data"]["server_logs"]
    figures = logs[str(spec.proc.pid)]["serving"]
    assert figures["buckets"]["1"]["median_gen_throughput"] == 86.0
    assert figures["buckets"]["128+"] == {"count": 8, "steady": 7, "median_gen_throughput": 1146.0,
                                          "median_accept_len": 3.52}
    assert figures["graph"] == {"true": 0, "false": 16, "absent": 0}
    assert logs[str(base.proc.pid)]["serving"]["median_accept_len"] is None

    report = subprocess.run([sys.executable, "-m", "gpudiag", "report", run["run_id"], "--reports-dir",
                             str(reports), "--json"], capture_output=True, text=True, timeout=120)
    doc = json.loads(report.stdout)
    [q10] = [q for q in doc["answers"]["questions"] if q["id"] == "Q10"]
    assert q10["question"] == "Is speculative decoding paying off on each server?"
    [answer] = q10["answers"]
    by_pid = {s["pid"]: s for s in answer["value"]["servers"]}
    assert by_pid[spec.proc.pid]["algorithm"] == "DFLASH" and by_pid[spec.proc.pid]["median_accept_len"] == 3.665
    assert by_pid[spec.proc.pid]["drafts_accepted"] is True
    assert by_pid[stuck.proc.pid]["drafts_accepted"] is False
    assert by_pid[base.proc.pid]["checked"] is False and "speculation off" in by_pid[base.proc.pid]["reason"]
    assert "DFLASH, 8 draft tokens, accept len 3.67 over 16 decode lines" in answer["answer"]
    assert "accept len 1.00 — no draft token accepted" in answer["answer"]

    findings = doc["findings"]
    mine = lambda fid, pid: [f for f in findings if f["id"] == fid and any(  # noqa: E731
        "pid %d " % pid in e["text"] for e in f["evidence"])]
    [loses] = mine("serving.speculation_loses", spec.proc.pid)
    assert loses["title"] == ("speculative decoding (DFLASH) loses from #running-req 128+: 0.77× the baseline "
                              "(1146 vs 1493 tok/s); CUDA graphs also differ (off vs on)")
    table = loses["evidence"][0]["table"]
    assert table[0] == ["#running-req", "DFLASH tok/s", "baseline tok/s", "ratio", "accept len"]
    assert table[1:] == [["1", "86", "65", "1.32×", "3.81"], ["128+", "1146", "1493", "0.77×", "3.52"]]
    assert "graphs alone can explain the gap" in loses["recommendation"]
    [rejected] = mine("serving.no_draft_accepted", stuck.proc.pid)
    assert rejected["severity"] == "error" and "--speculative-draft-model-path" in rejected["recommendation"]
    # Its decode lines ran with graphs; no sglang is installed for the stand-in, so the legacy switch is named.
    assert "compare a run with --disable-cuda-graph" in rejected["recommendation"]
    assert "accept len 1.00" in rejected["title"]
    [eager] = mine("serving.graphs_off_in_log", spec.proc.pid)
    assert "16 of 16 decode lines say `cuda graph: False`" in eager["evidence"][0]["text"]
    assert not mine("serving.graphs_off_in_log", base.proc.pid)
    assert scan.returncode == 1   # the error finding: drafts all rejected


SECRET = "sk-serving-Secret0123456789"
# sglang 0.5.23's /server_info: the resolved server args (api key included), then internal_states per DP rank.
HTTP_SERVER = r'''
import http.server, json, sys, threading
port = int(sys.argv[sys.argv.index("--port") + 1])
key = sys.argv[sys.argv.index("--api-key") + 1]
info = json.dumps({"api_key": key, "speculative_algorithm": "EAGLE3", "version": "0.5.23",
                   "internal_states": [{"avg_spec_accept_length": 2.74, "last_gen_throughput": 410.5}]}).encode()
metrics = (b"# TYPE sglang:spec_accept_length gauge\n"
           b'sglang:spec_accept_length{model_name="m",tp_rank="0"} 2.74\n')
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ok = self.path == "/metrics" or self.headers.get("Authorization") == "Bearer " + key
        body = (metrics if self.path == "/metrics" else info) if ok else b"{}"
        self.send_response(200 if ok and self.path in ("/server_info", "/metrics") else (401 if not ok else 404))
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
threading.Thread(target=server.serve_forever, daemon=True).start()
'''


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_servers_endpoints_answer_when_its_log_cannot_be_found(tmp_path):
    port = free_port()
    root = tmp_path / "eagle3"
    (root / "sglang").mkdir(parents=True)
    (root / "sglang" / "__init__.py").write_text("")
    (root / "sglang" / "launch_server.py").write_text(
        HTTP_SERVER + "open(%r, 'w').write('ready')\nimport time; time.sleep(300)\n" % str(root / "ready"))
    argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", "/models/m-%s" % uuid.uuid4().hex[:8],
            "--speculative-algorithm", "EAGLE3", "--api-key", SECRET, "--enable-metrics", "--host", "127.0.0.1",
            "--port", str(port)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,   # a pipe: no log to read
                            env=dict(os.environ, PYTHONPATH=str(root)), start_new_session=True)
    try:
        deadline = time.monotonic() + 15
        while not (root / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        reports = tmp_path / "reports"
        scan = subprocess.run([sys.executable, "-m", "gpudiag", "scan", "localhost", "--probes", "deployment",
                               "--reports-dir", str(reports), "--json"], capture_output=True, text=True, timeout=240)
        run = json.loads(scan.stdout)
        text = (reports / "runs" / run["run_id"] / "hosts" / "localhost.json").read_text()
        assert SECRET not in text                      # used on the host, never stored
        record = json.loads(text)["probes"]["deployment"]["data"]["serving_endpoints"][str(proc.pid)]
        assert record["info_route"] == "/server_info" and record["api_key_used"] is True
        assert record["avg_spec_accept_length"] == [2.74] and record["last_gen_throughput"] == [410.5]
        assert record["metrics"]["spec_accept_length"]["samples"] == [2.74]
        report = subprocess.run([sys.executable, "-m", "gpudiag", "report", run["run_id"], "--reports-dir",
                                 str(reports), "--json"], capture_output=True, text=True, timeout=120)
        [q10] = [q for q in json.loads(report.stdout)["answers"]["questions"] if q["id"] == "Q10"]
        [mine] = [s for a in q10["answers"] for s in a["value"]["servers"] if s["pid"] == proc.pid]
        assert mine["endpoint"]["accept_len"] == [2.74] and mine["checked"] is True
        assert "stdout is pipe" in mine["reason"]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
