"""The spec-vs-baseline verdict at sglang's real log cadence, through `gpudiag scan localhost` and `gpudiag report`.

Two stand-in servers of one model: DFLASH with CUDA graphs off and a baseline with them on (as the investigation
this tool automates ran them). Their stdout is the log a real server would print: one decode line every
--decode-log-interval steps, each step adding #running-req x accept len tokens, so two lines of a rank stand
interval x running x accept / throughput seconds apart (17 s for DFLASH at 128 requests, accept 3.8 and 1,146 tok/s).
The figures are the investigation's: 86 vs 65 tok/s at concurrency 1, 1,146 vs 1,493 at 128, DFLASH accepting
3.5-4.1 tokens a step. Lines carry sglang 0.5.11's own field names and order (read from the wheel's format
string, tests/probes/sglang_log_formats.py). At interval 40 and at interval 20 the verdict is the same.
"""
import json
import subprocess
import sys
import uuid

import pytest

from tests.integration.test_serving_scan import servers  # noqa: F401 - the stand-in server fixture
from tests.probes.sglang_log_formats import rendered_lines
from tests.sglang_wheels import SkipWheel, site_packages_for

RELEASE = "0.5.11"
# The fields sglang 0.5.11 prints on a plain decode or prefill line (no disaggregation, MFU or forward counter).
PLAIN = ("#running-req", "#token", "token usage", "accept len", "accept rate", "cuda graph", "gen throughput (token/s)",
         "#queue-req", "#new-seq", "#new-token", "#cached-token", "input throughput (token/s)")


def line_format(kind, speculative):
    """The release's own line with every optional field dropped: a format with {running}, {tput}, {accept}."""
    try:
        package = site_packages_for(RELEASE) / "sglang"
    except SkipWheel as exc:
        pytest.skip(str(exc))
    values = {"#running-req": 1111, "gen throughput (token/s)": 2222.0, "accept len": 3.33}
    text = rendered_lines(package, kind + " batch", values)[-1]
    head, _, rest = text.partition(", ")
    keep = [pair for pair in rest.split(", ") if pair.split(": ")[0] in PLAIN
            and (speculative or not pair.startswith("accept"))]
    return (head.split(" [")[0] + ", " + ", ".join(keep)).replace("1111", "{running}").replace(
        "2222.00", "{tput:.2f}").replace("3.33", "{accept:.2f}")


class Log:
    """A server's stdout: its launch line, then phases of load, each line stamped when a real server at that
    throughput would print it."""

    def __init__(self, interval, speculative, graphs):
        self.interval, self.speculative, self.now, self.lines = interval, speculative, 0.0, []
        self.decode, self.prefill = line_format("Decode", speculative), line_format("Prefill", speculative)
        self.graph = "True" if graphs else "False"
        self.say("server_args=ServerArgs(model_path='/models/Qwen3-8B', decode_log_interval=%d, "
                 "disable_cuda_graph=%s)" % (interval, not graphs))
        self.say("The server is fired up and ready to roll!")

    def say(self, text):
        whole = int(self.now)
        self.lines.append("[2026-09-01 %02d:%02d:%02d] %s" % (10 + whole // 3600, whole // 60 % 60, whole % 60, text))

    def idle(self, seconds, running=0):
        self.now += seconds
        self.say(self.prefill.format(running=running, tput=500.0, accept=0).replace("cuda graph: False",
                                                                                    "cuda graph: " + self.graph))

    def load(self, running, rates, accepts, lines):
        for n in range(lines):
            tput, accept = rates[n % len(rates)], accepts[n % len(accepts)] if self.speculative else 1.0
            self.now += self.interval * running * accept / tput
            self.say(self.decode.format(running=running, tput=tput, accept=accept).replace(
                "cuda graph: False", "cuda graph: " + self.graph))
            if n % 3 == 2 and running > 1:
                self.say(self.prefill.format(running=running - 1, tput=500.0, accept=0).replace(
                    "cuda graph: False", "cuda graph: " + self.graph))

    def text(self):
        return "\n".join(self.lines) + "\n"


def around(center, spread):
    """Rates symmetric about `center`: their median is `center`."""
    return [center, center - spread, center + spread, center - 2 * spread, center + 2 * spread]


def fleet_logs(interval):
    spec, base = Log(interval, True, graphs=False), Log(interval, False, graphs=True)
    accepts = [3.5, 3.8, 4.1, 3.7, 3.9]
    for log, low, high in ((spec, 86.0, 1146.0), (base, 65.0, 1493.0)):
        log.idle(30)
        log.load(1, around(low, 1.0), accepts, 24)
        log.idle(120)
        log.load(128, around(high, 8.0), accepts, 24)
    # Bursts of 80 requests into the empty DFLASH server, one decode line each: lines at 64-127, none steady.
    for _ in range(3):
        spec.idle(300)
        spec.load(80, [900.0], accepts, 1)
    base.idle(60)
    base.load(80, around(1300.0, 5.0), accepts, 10)
    return spec.text(), base.text()


@pytest.mark.parametrize("interval", [40, 20])
def test_speculation_loses_at_128_with_the_graphs_confound_at_any_log_interval(tmp_path, servers, interval):  # noqa: F811
    model = "/models/Qwen3-8B-%s" % uuid.uuid4().hex[:8]
    spec_log, base_log = fleet_logs(interval)
    flags = ["--decode-log-interval", str(interval)] if interval != 40 else []
    spec = servers("dflash", spec_log, "--model-path", model, "--speculative-algorithm", "DFLASH",
                   "--disable-cuda-graph", "--port", "30011", *flags)
    base = servers("baseline", base_log, "--model-path", model, "--port", "30012", *flags)
    reports = tmp_path / "reports"
    scan = subprocess.run([sys.executable, "-m", "gpudiag", "scan", "localhost", "--probes", "deployment",
                           "--reports-dir", str(reports), "--json"], capture_output=True, text=True, timeout=240)
    run = json.loads(scan.stdout)
    report = subprocess.run([sys.executable, "-m", "gpudiag", "report", run["run_id"], "--reports-dir",
                             str(reports), "--json"], capture_output=True, text=True, timeout=120)
    doc = json.loads(report.stdout)
    mine = [f for f in doc["findings"] if f["id"].startswith("serving.") and any(
        "pid %d " % spec.proc.pid in e["text"] for e in f["evidence"])]
    [loses] = [f for f in mine if f["id"] == "serving.speculation_loses"]
    assert loses["title"] == ("speculative decoding (DFLASH) loses from #running-req 128+: 0.77× the baseline "
                              "(1146 vs 1493 tok/s); CUDA graphs also differ (off vs on)")
    table = loses["evidence"][0]["table"]
    assert table[1:] == [["1", "86", "65", "1.32×", "3.80"],
                         ["64-127", "no figure (3 lines)", "1300", "not judged", "3.50"],
                         ["128+", "1146", "1493", "0.77×", "3.80"]]
    texts = [e["text"] for e in loses["evidence"]]
    assert any(t.startswith("not judged — 64-127: DFLASH's 3 lines give no figure (3 of 3 lines follow an idle")
               for t in texts)
    assert any(t.startswith("differs besides speculation: CUDA graphs — DFLASH server off (--disable-cuda-graph")
               for t in texts)
    assert "graphs alone can explain the gap" in loses["recommendation"]
    assert not [f for f in mine if "pays" in f["title"]]
    # Each server's own figures, the baseline's too, stand in Q10's answer.
    [q10] = [q for q in doc["answers"]["questions"] if q["id"] == "Q10"]
    text = " ".join(a["answer"] for a in q10["answers"])
    assert "128+: 1493 tok/s" in text and "128+: 1146 tok/s" in text
    host = json.loads((reports / "runs" / run["run_id"] / "hosts" / "localhost.json").read_text())
    logs = host["probes"]["deployment"]["data"]["server_logs"]
    figures = logs[str(spec.proc.pid)]["serving"]
    assert figures["cadence"] == {"decode_log_interval": interval, "from": "the server_args line of the log"}
    assert figures["buckets"]["128+"]["steady"] == 23      # every line but the first after the idle prefill
    assert logs[str(base.proc.pid)]["serving"]["buckets"]["128+"]["median_gen_throughput"] == 1493.0
