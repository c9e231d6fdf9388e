"""The spec-vs-baseline table through `gpudiag report` on a stored two-host fleet: the recorded fleet3 run with
gpu-a's EAGLE3 server and gpu-b serving the same model without speculation, each with the serving figures
the deployment probe computes from decode lines in sglang 0.5.23's own format (read from the real wheel)."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from probes.servingstats.figures import figures
from tests.probes.sglang_log_formats import rendered_lines
from tests.sglang_wheels import SkipWheel, site_packages_for

FLEET3 = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "fleet3"


def window(buckets, accept):
    try:
        package = site_packages_for("0.5.23") / "sglang"
    except SkipWheel as exc:
        pytest.skip(str(exc))
    text = ""
    for minute, (running, tput) in enumerate(buckets):
        values = {"#running-req": running, "gen throughput (token/s)": tput, "graph": True}
        values.update({"accept len": accept} if accept else {})
        line = [t for t in rendered_lines(package, "Decode batch", values) if "#token: " in t][-1]
        text += "".join("[2026-09-01 10:%02d:%02d TP0] %s\n" % (minute, s, line) for s in range(5))
    return figures(text)


def stored_fleet(tmp_path):
    run = tmp_path / "fleet"
    shutil.copytree(FLEET3, run)
    a, b = (run / "hosts" / name for name in ("gpu-a.json", "gpu-b.json"))
    doc_a, doc_b = json.loads(a.read_text()), json.loads(b.read_text())
    dep_a, dep_b = doc_a["probes"]["deployment"]["data"], doc_b["probes"]["deployment"]["data"]
    spec, base = dep_a["servers"][0], dep_b["servers"][0]
    base["args"]["model_path"] = spec["args"]["model_path"]
    base["args"]["speculative_algorithm"] = None
    source = {"kind": "stdout", "where": "/proc/1/fd/1", "path": "/var/log/sglang.log"}
    dep_a["server_logs"] = {str(spec["pid"]): {"source": source, "outcome": "clean", "crashes": [],
                                                "serving": window([(1, 86.0), (8, 520.0), (128, 1146.0)], 3.6)}}
    dep_b["server_logs"] = {str(base["pid"]): {"source": source, "outcome": "clean", "crashes": [],
                                                "serving": window([(1, 65.0), (8, 430.0), (128, 1493.0)], None)}}
    a.write_text(json.dumps(doc_a))
    b.write_text(json.dumps(doc_b))
    return run


def report(run, *args):
    return subprocess.run([sys.executable, "-m", "gpudiag", "report", str(run), *args], capture_output=True,
                          text=True, timeout=120)


def test_two_hosts_one_model_with_and_without_speculation(tmp_path):
    run = stored_fleet(tmp_path)
    doc = json.loads(report(run, "--json").stdout)
    [loses] = [f for f in doc["findings"] if f["id"] == "serving.speculation_loses"]
    assert loses["hosts"] == ["gpu-a", "gpu-b"]
    # The recorded hosts differ besides speculation: gpu-b runs with --disable-cuda-graph and TP 8 against 4.
    assert loses["title"] == ("speculative decoding (EAGLE3) loses from #running-req 128+: 0.77× the baseline "
                              "(1146 vs 1493 tok/s); CUDA graphs also differ (on vs off), tensor parallel size "
                              "also differs (4 vs 8)")
    assert loses["evidence"][0]["table"] == [
        ["#running-req", "EAGLE3 tok/s", "baseline tok/s", "ratio", "accept len"],
        ["1", "86", "65", "1.32×", "3.60"], ["8-15", "520", "430", "1.21×", "3.60"],
        ["128+", "1146", "1493", "0.77×", "3.60"]]
    [q10] = [q for q in doc["answers"]["questions"] if q["id"] == "Q10"]
    by_host = {h: a for a in q10["answers"] for h in a["hosts"]}
    assert by_host["gpu-a"]["status"] == "answered"
    assert "EAGLE3, 4 draft tokens, accept len 3.60 over 15 decode lines" in by_host["gpu-a"]["answer"]
    assert by_host["gpu-b"]["answer"].startswith("not checked — speculation off")
    markdown = report(run, "-o", "-").stdout
    assert "| 128+ | 1146 | 1493 | 0.77× | 3.60 |" in markdown
