"""`gpudiag report` on a stored bench run whose host sent odd data within the probe's declared shape (a misfit is
already the probe's error when the frame arrives): injected markdown, escapes and huge strings become bounded,
escaped rows, odd objects in the log figures are reduced to their numbers; a well-formed server keeps its row."""
import json

from click.testing import CliRunner

from gpudiag.cli import cli

INJECTION = "x\n\n## Findings\n<script>alert(1)</script> | a | b |\x1b]0;owned\x07" + "y" * 5000
LEVEL = {"concurrency": 4, "sent": 8, "answered": 8, "failed": 0, "errors": [], "duration_s": 1.5,
         "output_tokens": 256, "output_throughput": 170.7, "median_ttft_ms": 12.5, "median_itl_ms": 2.1,
         "median_tpot_ms": 2.0, "median_latency_ms": 80.0, "p90_latency_ms": 95.0, "median_accept_len": 3.5,
         "accept_len_requests": 8}


def stored(tmp_path, data):
    run = tmp_path / "runs" / "b1"
    (run / "hosts").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({
        "schema": 1, "run_id": "b1", "kind": "bench", "started_at": "2026-09-01T00:00:00Z",
        "argv": ["gpudiag", "bench", "gpu-01", "--concurrency", "4"], "hosts": [{"name": "gpu-01", "status": "ok"}],
        "requested": {"checks": ["servingbench"]}}))
    (run / "hosts" / "gpu-01.json").write_text(json.dumps({
        "schema": 1, "name": "gpu-01", "status": "ok",
        "probes": {"servingbench": {"status": "ok", "duration_s": 2.0, "data": data}}}))
    return run


def test_odd_bench_data_renders_bounded_and_escaped(tmp_path):
    server = {"pid": 11, "port": 30000, "address": "127.0.0.1", "loaded": True, "reason": None, "vocab": 1000,
              "vocab_from": "fallback", "api_key_used": False, "levels": [LEVEL], "stopped": None,
              "log": {"decode_lines": 3, "median_accept_len": 3.4, "graph": {"true": 3, "evil": INJECTION},
                      "buckets": {"4-7": {"count": 3, "median_gen_throughput": 512.0, "x": INJECTION},
                                  INJECTION: {}}}}
    data = {"settings": {"concurrency": [4]}, "servers": {
        "11": server,
        "12": dict(server, pid=12, loaded=False, reason=INJECTION, levels=[], log=None),
        "13": dict(server, pid=13, levels=[dict(LEVEL, errors=[INJECTION] * 9)], log={"reason": INJECTION}),
        "14": dict(server, pid=14, log=[INJECTION])}}
    run = stored(tmp_path, data)
    result = CliRunner().invoke(cli, ["report", str(run), "--markdown", "-o", "-"])
    assert result.exit_code in (0, 4), result.output
    text = result.output
    assert "| gpu-01 | pid 11 port 30000 | 4 | 8/8 | 170.7 | 12.5 | 2.1 | 80.0 | 3.50 |" in text
    assert "gpu-01 pid 11: 3 decode lines during the load, accept len 3.40" in text
    assert "\n## Findings\n<script>" not in text and "\x1b" not in text and "y" * 1000 not in text
    doc = json.loads(CliRunner().invoke(cli, ["report", str(run), "--json"]).output)
    [log] = [r for r in doc["bench_log"] if r["pid"] == 11]
    assert log["buckets"] == {"4-7": {"count": 3, "steady": None, "median_gen_throughput": 512.0,
                                      "median_accept_len": None}}
    assert log["graph"] == {"true": 3, "false": None, "absent": None}
    assert all(len(r.get("reason", "")) <= 300 for r in doc["bench"] + doc["bench_log"])
    assert all(len(e) <= 300 for r in doc["bench"] for e in r.get("errors", []))
