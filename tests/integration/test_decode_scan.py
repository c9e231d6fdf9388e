"""Q11-Q14 and the decode-step findings through `gpudiag scan localhost` and `gpudiag report`, on the figures of
the investigation this tool automates: a Kimi-K2-shaped model (config.json as Moonshot publishes it, the HF-cache
fixture tests/fixtures/hf_cache) on eight RTX PRO 6000 Blackwell GPUs joined by PCIe only, TP 8 / EP 8, DFLASH at
86 tok/s vs 65 for the baseline at one running request and 1,146 vs 1,493 at 128 (accept len 3.81 and 3.52).

Stand-ins: two sglang servers whose stdout is a log of decode lines in sglang 0.5.23's own format (the real
wheel's format strings, tests/probes/sglang_log_formats.py), and an `nvidia-smi` on PATH that answers the env
probe's GPU query and `topo -m` as such a host does (names from nvidia-smi's own formats; the link matrix is PCIe
host bridges, no NV#). The expected verdicts are the research's (/roofline.md §6), not this code's output:
baseline at 128 bandwidth-bound, speculation at 128 communication-bound, speculation wins at 1 and loses at 128,
break-even between 64 and 128 running requests.
"""
import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from gpudiag.findings import QUESTIONS
from tests.control.test_report_json_values import _documented, _keys
from tests.integration.test_serving_scan import decode_lines, servers  # noqa: F401 - the fixture

KIMI = (Path(__file__).resolve().parents[1] / "fixtures" / "hf_cache" / "models--moonshotai--Kimi-K2-Thinking"
        / "snapshots" / "0000000000000000000000000000000000000000" / "config.json")
SOURCES = {"measured", "config", "datasheet", "assumed"}
NVIDIA_SMI = r'''#!%s
import sys
args = sys.argv[1:]
name = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
if any(a.startswith("--query-gpu") for a in args):
    for i in range(8):
        print("%%d, %%s, GPU-%%08d-0000-0000-0000-000000000000, 00000000:%%02X:00.0, 97887, 90112, 97, 580.65.06, 12.0"
              %% (i, name, i, 0x18 + 16 * i))
elif args[:2] == ["topo", "-m"]:
    gpus = ["GPU%%d" %% i for i in range(8)]
    print("\t" + "\t".join(gpus) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID")
    for i, g in enumerate(gpus):
        cells = ["X" if i == j else ("NODE" if i // 4 == j // 4 else "SYS") for j in range(8)]
        print(g + "\t" + "\t".join(cells) + "\t%%s\t%%d\t\tN/A" %% ("0-63" if i < 4 else "64-127", i // 4))
    print("\nLegend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as well as the SMP interconnect")
elif args == ["--version"]:
    print("NVIDIA-SMI version  : 580.65.06\nCUDA Version        : 13.0")
''' % sys.executable


def _sources_ok(value, path="value"):
    """Every {v, src} figure names its sources from the four the report allows."""
    bad = []
    if isinstance(value, dict):
        if "v" in value and "src" in value:
            if not set(str(value["src"]).split("+")) <= SOURCES:
                bad.append((path, value["src"]))
        for key, inner in value.items():
            bad += _sources_ok(inner, f"{path}.{key}")
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            bad += _sources_ok(inner, f"{path}[{i}]")
    return bad


def test_the_seed_figures_give_the_research_verdicts(tmp_path, servers):  # noqa: F811
    model = tmp_path / ("Kimi-K2.6-%s" % uuid.uuid4().hex[:8])
    model.mkdir()
    shutil.copy(KIMI, model / "config.json")
    flags = ("--model-path", str(model), "--tp", "8", "--ep", "8", "--trust-remote-code")
    spec = servers("dflash", decode_lines(range(0, 8), 1, 3.81, 86.0, False)
                   + decode_lines(range(60, 68), 128, 3.52, 1146.0, False),
                   *flags, "--speculative-algorithm", "DFLASH", "--max-running-requests", "128", "--port", "30011")
    base = servers("baseline", decode_lines(range(0, 8), 1, None, 65.0, True)
                   + decode_lines(range(60, 68), 128, None, 1493.0, True), *flags, "--port", "30012")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(NVIDIA_SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    env = dict(__import__("os").environ, PATH="%s:%s" % (bin_dir, __import__("os").environ.get("PATH", "")))
    reports = tmp_path / "reports"
    scan = subprocess.run([sys.executable, "-m", "gpudiag", "scan", "localhost", "--probes", "env,deployment",
                           "--set", "env.torch=false", "--reports-dir", str(reports), "--json"],
                          capture_output=True, text=True, timeout=240, env=env)
    run = json.loads(scan.stdout)
    host = json.loads((reports / "runs" / run["run_id"] / "hosts" / "localhost.json").read_text())
    record = host["probes"]["deployment"]["data"]["model_configs"][str(spec.proc.pid)]["model"]
    assert record["where"] == str(model) and record["config"]["n_routed_experts"] == 384
    assert host["probes"]["env"]["data"]["topology"]["summary"] == "pcie"

    report = subprocess.run([sys.executable, "-m", "gpudiag", "report", run["run_id"], "--reports-dir",
                             str(reports), "--json"], capture_output=True, text=True, timeout=120)
    doc = json.loads(report.stdout)
    answers = {q["id"]: q for q in doc["answers"]["questions"]}
    servers_of = lambda qid: {s["pid"]: s for a in answers[qid]["answers"] for s in (a["value"] or {}).get(  # noqa: E731
        "servers", [])}

    q12 = servers_of("Q12")
    base_buckets = {b["bucket"]: b for b in q12[base.proc.pid]["buckets"]}
    spec_buckets = {b["bucket"]: b for b in q12[spec.proc.pid]["buckets"]}
    assert base_buckets["128+"]["verdict"] == "bandwidth-bound"
    assert 0.5 <= base_buckets["128+"]["mbu"]["v"] <= 0.6               # research: about 54% of 1,792 GB/s
    assert spec_buckets["128+"]["verdict"] == "communication-bound"
    assert base_buckets["1"]["verdict"] != "bandwidth-bound"            # research: partly bound at C=1
    assert q12[base.proc.pid]["gpu"]["bw_peak_gbps"] == {
        "v": 1792, "src": "datasheet", "note": q12[base.proc.pid]["gpu"]["bw_peak_gbps"]["note"]}

    q13 = servers_of("Q13")[spec.proc.pid]["speculation"]
    pairs = {p["bucket"]: p for p in q13["pairs"]}
    assert pairs["1"]["s_meas"]["v"] > 1 and pairs["1"]["s_pred"]["v"] > 1 and pairs["1"]["fit"]
    assert pairs["128+"]["s_meas"]["v"] < 1 and pairs["128+"]["s_pred"]["v"] < 1
    assert abs(pairs["128+"]["s_pred"]["v"] - pairs["128+"]["s_meas"]["v"]) <= 0.25 * pairs["128+"]["s_meas"]["v"]
    assert 64 <= q13["break_even_running_req"]["v"] <= 128
    assert q13["what_if"]["cuda_graphs"]["recoverable_ms"]["v"] > 0     # spec eager, baseline graphed

    q14 = servers_of("Q14")[spec.proc.pid]
    assert q14["parallel"]["link"]["v"] == "pcie" and q14["parallel"]["link"]["src"] == "measured"
    assert q14["parallel"]["busbw_gbps"]["src"] == "assumed"

    for qid in ("Q11", "Q12", "Q13", "Q14"):
        [answer] = answers[qid]["answers"]
        assert answer["status"] == "answered", (qid, answer["answer"])
        assert _sources_ok(answer["value"]) == [], qid
        assert not _keys(answer["value"]) - _documented(qid), qid       # docs/report-json.md names every key
        render = next(q.render for q in QUESTIONS if q.qid == qid)
        assert render(answer["value"]) == answer["answer"]              # the sentence is its value's
    assert "communication-bound" in answers["Q11"]["answers"][0]["answer"]

    mine = lambda fid, pid: [f for f in doc["findings"] if f["id"] == fid and any(  # noqa: E731
        "pid %d " % pid in e["text"] for e in f["evidence"])]
    assert mine("decode_step.bandwidth_bound", base.proc.pid) and not mine("decode_step.bandwidth_bound", spec.proc.pid)
    assert mine("decode_step.communication_bound", spec.proc.pid)
    assert mine("decode_step.past_break_even", spec.proc.pid)
    ids = {f["id"] for f in doc["findings"]}
    assert {"decode_step.bandwidth_bound", "decode_step.communication_bound", "decode_step.past_break_even",
            "decode_step.kv_replicated_across_tp", "decode_step.verify_amplifies_experts",
            "decode_step.overhead_graphs_off"} <= ids
    assert "decode_step.running_capped" not in ids                       # --max-running-requests was set
