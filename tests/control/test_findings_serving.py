"""The serving findings and Q10 on host results whose figures the probe-side parser made from real logs
quoted in public sglang issues (tests/fixtures/serving) and from decode lines in sglang's own format."""
import json
from pathlib import Path

from gpudiag.findings import serving, serving_compare, serving_fleet
from gpudiag.findings.answers_serving import q10_speculation, q10_text
from gpudiag.models import HostResult, ProbeResult
from probes.servingstats.figures import figures

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "serving"


def fixture(name):
    return figures("\n".join(l for l in (FIXTURES / name).read_text().splitlines() if not l.startswith("#fixture")))


def decode(running, accept, tput, graph, n=6):
    extra = "accept len: %.2f, accept rate: 0.50, " % accept if accept is not None else ""
    return "".join("[2026-09-01 10:00:%02d TP0] Decode batch, #running-req: %d, #token: 9, token usage: 0.01, %s"
                   "cuda graph: %s, gen throughput (token/s): %.2f, #queue-req: 0\n" % (s, running, extra, graph, tput)
                   for s in range(n))


def host(name, servers, logs=None, version="0.5.23"):
    servers = [dict({"pid": pid, "sglang": {"found": True, "version": version}}, args=args) for pid, args in servers]
    data = {"servers": servers, "server_logs": logs or {}}
    return HostResult(name=name, status="ok", probes={"deployment": ProbeResult(status="ok", data=data)})


def log(serving_figures):
    return {"source": {"kind": "stdout", "where": "/proc/1/fd/1", "path": "/var/log/sglang.log"},
            "serving": serving_figures}


SPEC = {"model_path": "/models/Qwen3-8B", "speculative_algorithm": "DFLASH", "speculative_num_draft_tokens": 8}
BASE = {"model_path": "/mnt/other/Qwen3-8B/"}


def test_accept_len_one_with_speculation_is_an_error():
    h = host("h1", [(7, dict(SPEC, speculative_algorithm="EAGLE3"))], {"7": log(figures(decode(4, 1.0, 300, True)))})
    [finding] = serving.accept_len_one([h])
    assert finding.id == "serving.no_draft_accepted" and finding.severity == "error"
    assert "accept len 1.00" in finding.title
    assert "compare a run with --disable-decode-cuda-graph" in finding.recommendation   # 0.5.23's spelling
    old = host("h1", [(7, dict(SPEC, speculative_algorithm="EAGLE"))], {"7": log(figures(decode(4, 1.0, 300, True)))},
               version="0.5.11")
    assert "--disable-cuda-graph" in serving.accept_len_one([old])[0].recommendation


def test_real_acceptance_is_no_finding_and_too_few_lines_no_verdict():
    npu = host("h1", [(7, SPEC)], {"7": log(fixture("sglkernelnpu_608_npu_graph_accept_rate.log"))})
    assert serving.accept_len_one([npu]) == []
    short = host("h1", [(7, SPEC)], {"7": log(figures(decode(4, 1.0, 300, True, n=2)))})
    assert serving.accept_len_one([short]) == []
    off = host("h1", [(7, BASE)], {"7": log(figures(decode(4, 1.0, 300, True)))})
    assert serving.accept_len_one([off]) == []


def test_graphs_off_above_the_captured_batches_is_as_configured():
    # sglang PR #13023: graphs on up to 28 running requests, off from 36: the capture limit, not a fault.
    above = host("h1", [(7, BASE)], {"7": log(fixture("sglang_13023_trailing_comma_graph_off.log"))})
    assert serving.graphs_off_in_log([above]) == []
    capped = host("h1", [(7, dict(BASE, cuda_graph_max_bs=48))],
                  {"7": log(fixture("sglang_13023_trailing_comma_graph_off.log"))})
    [finding] = serving.graphs_off_in_log([capped])      # off at 36 though batches up to 48 are captured
    assert "from #running-req 36 (graphs on up to 28); --cuda-graph-max-bs 48" in finding.evidence[0].text
    never = host("h1", [(7, SPEC)], {"7": log(figures(decode(1, 3.0, 80, False)))})
    assert "(never on)" in serving.graphs_off_in_log([never])[0].evidence[0].text
    disabled = host("h1", [(7, dict(SPEC, disable_cuda_graph=True))], {"7": log(figures(decode(1, 3.0, 80, False)))})
    assert serving.graphs_off_in_log([disabled]) == []


def test_spec_vs_baseline_on_two_hosts_names_where_speculation_stops_paying():
    spec = host("gpu-a", [(7, SPEC)], {"7": log(figures(decode(1, 3.81, 86, False) + decode(128, 3.52, 1146, False)))})
    base = host("gpu-b", [(9, BASE)], {"9": log(figures(decode(1, None, 65, True) + decode(128, None, 1493, True)))})
    [comparison] = serving_compare.compare([spec, base])
    value = comparison.to_value()
    assert value["stops_paying_at"] == "128+" and value["model"] == "Qwen3-8B"
    assert [b["ratio"] for b in value["buckets"]] == [1.323, 0.768]
    [finding] = serving_fleet.spec_vs_baseline([spec, base])
    assert finding.id == "serving.speculation_loses" and finding.hosts == ("gpu-a", "gpu-b")
    assert finding.title == ("speculative decoding (DFLASH) loses from #running-req 128+: 0.77× the baseline "
                             "(1146 vs 1493 tok/s); CUDA graphs also differ (off vs on)")
    assert "graphs alone can explain the gap" in finding.recommendation
    assert "--max-running-requests" in finding.recommendation
    [graphs] = value["differences"]
    assert (graphs["what"], graphs["spec"], graphs["baseline"]) == ("CUDA graphs", "off", "on")
    wins = host("gpu-a", [(7, SPEC)], {"7": log(figures(decode(1, 3.81, 86, True)))})
    [info] = serving_fleet.spec_vs_baseline([wins, base])
    assert info.severity == "info" and info.title == ("speculative decoding (DFLASH) pays where judged (1, up to "
                                                      "1.32× the baseline); not judged: 128+")
    assert "128+: baseline's" not in info.evidence[1].text
    assert info.evidence[1].text == "not judged — 128+: DFLASH logged no line at this concurrency"
    other = host("gpu-b", [(9, {"model_path": "/models/Llama-3-8B"})], {"9": log(figures(decode(1, None, 65, True)))})
    assert serving_fleet.spec_vs_baseline([spec, other]) == []


def test_q10_value_and_sentence():
    h = host("h1", [(7, SPEC), (9, BASE), (11, dict(SPEC, port=30001))],
             {"7": log(figures(decode(1, 3.81, 86, False))), "9": log(figures(decode(1, None, 65, True))),
              "11": {"source": None, "outcome": None, "reason": "no log found: stdout is pipe"}})
    answer = q10_speculation(h)
    assert answer.status == "partial"     # one speculative server's log was not found
    servers = {s["pid"]: s for s in answer.to_dict()["value"]["servers"]}
    assert servers[7]["median_accept_len"] == 3.81 and servers[7]["drafts_accepted"] is True
    assert servers[7]["buckets"]["1"]["median_gen_throughput"] == 86
    assert servers[9]["checked"] is False and servers[9]["reason"].startswith("speculation off")
    assert servers[11]["reason"] == "no log found: stdout is pipe"
    assert "DFLASH, 8 draft tokens, accept len 3.81 over 6 decode lines of /proc/1/fd/1" in answer.text
    assert "graphs on in 0, off in 6 of 6 decode lines" in answer.text
    assert q10_text(json.loads(json.dumps(answer.value))) == answer.text    # rendered from its value, as JSON holds it


def test_q10_not_checked_reasons():
    assert q10_speculation(host("h1", [])).text == "not checked — no live sglang server"
    missing = HostResult(name="h1", status="ok", probes={"env": ProbeResult(status="ok", data={})})
    assert q10_speculation(missing).text.startswith("not checked — probe deployment not selected")
    quiet = host("h1", [(7, SPEC)], {"7": log(figures("[2026-01-01 00:00:00] ready\n"))})
    answer = q10_speculation(quiet)
    assert answer.text == "not checked — no decode lines in the log window (/proc/1/fd/1)"
    assert answer.to_dict()["value"]["servers"][0]["checked"] is False
    off = q10_speculation(host("h1", [(9, BASE)], {"9": log(figures(decode(1, None, 65, True)))}))
    assert off.status == "not checked" and off.text.startswith("not checked — speculation off")
    assert all(q10_text(a.value) == a.text for a in (answer, off, q10_speculation(missing)))


def test_q10_offers_a_command_only_where_rerunning_helps():
    missing = HostResult(name="h1", status="ok", probes={"env": ProbeResult(status="ok", data={})})
    assert q10_speculation(missing).command == "gpudiag scan HOST --probes deployment"
    unfound = host("h1", [(7, SPEC)], {"7": {"source": None, "reason": "no log found: stdout is pipe"}})
    assert q10_speculation(unfound).command == ""


def test_q10_uses_the_servers_endpoint_when_its_log_is_missing():
    h = host("h1", [(7, SPEC)], {"7": {"source": None, "reason": "no log found: stdout is pipe"}})
    probe = h.probes["deployment"].data
    probe["serving_endpoints"] = {"7": {"contacted": True, "info_route": "/server_info",
                                        "avg_spec_accept_length": [3.52, 3.61]}}
    answer = q10_speculation(h)
    assert answer.status == "partial"
    assert "decode lines not read — no log found: stdout is pipe" in answer.text
    assert "lifetime average accept length 3.56 over 2 DP ranks (/server_info, warm-up included)" in answer.text
    assert q10_text(answer.value) == answer.text
    [server] = answer.to_dict()["value"]["servers"]
    assert server["checked"] is True and server["drafts_accepted"] is True and server["endpoint"] == {"accept_len": [3.52, 3.61], "from": "/server_info",
                                                                 "reason": None}
    probe["serving_endpoints"] = {"7": {"contacted": True, "metrics": {"spec_accept_length": {"samples": [1.0]}}}}
    assert "(/metrics sglang:spec_accept_length" in q10_speculation(h).text


def test_no_acceptance_from_the_endpoint_when_the_log_is_missing():
    h = host("h1", [(7, SPEC)], {"7": {"source": None, "reason": "no log found: stdout is pipe"}})
    h.probes["deployment"].data["serving_endpoints"] = {"7": {"info_route": "/server_info",
                                                              "avg_spec_accept_length": [1.0, 1.02]}}
    [finding] = serving.accept_len_one([h])
    assert "lifetime average accept length 1.02 from /server_info" in finding.evidence[0].text
    assert "not read (no log found: stdout is pipe)" in finding.evidence[0].text
    h.probes["deployment"].data["serving_endpoints"]["7"]["avg_spec_accept_length"] = [1.0, 2.5]
    assert serving.accept_len_one([h]) == []     # one DP rank accepts: not "all rejected"


def test_lines_above_the_captured_batch_size_get_an_eager_note():
    # sglang PR #13023's lines (graphs off from 36 running requests) on a server capturing up to 24.
    h = host("h1", [(7, dict(BASE, cuda_graph_max_bs="24"))],
             {"7": log(fixture("sglang_13023_trailing_comma_graph_off.log"))})
    [note] = [f for f in serving.graphs_off_in_log([h]) if f.id == "serving.eager_above_max_bs"]
    assert note.severity == "info" and note.title.startswith("3 decode lines ran above the largest captured")
    assert "largest captured batch size 24 (--cuda-graph-max-bs): eager by sglang's rule" in note.evidence[0].text
    off = host("h1", [(7, dict(BASE, cuda_graph_max_bs="24", disable_cuda_graph=True))],
               {"7": log(fixture("sglang_13023_trailing_comma_graph_off.log"))})
    assert not [f for f in serving.graphs_off_in_log([off]) if f.id == "serving.eager_above_max_bs"]


def test_a_comparison_says_when_the_servers_interval_was_not_the_one_judged_by():
    spec = host("gpu-a", [(7, dict(SPEC, decode_log_interval="20"))],
                {"7": log(figures(decode(1, 3.81, 86, False) + decode(128, 3.52, 1146, False)))})
    base = host("gpu-b", [(9, BASE)], {"9": log(figures(decode(1, None, 65, True) + decode(128, None, 1493, True)))})
    [finding] = serving_fleet.spec_vs_baseline([spec, base])
    [note] = [e.text for e in finding.evidence if "--decode-log-interval" in e.text]
    assert "judged at a line every 40 decode steps (sglang's default" in note and "--decode-log-interval 20" in note


def test_odd_figures_from_a_host_never_raise():
    odd = {"decode_lines": 3, "buckets": {"128+": {"count": "x", "why": 5, "median_gen_throughput": "fast"}},
           "graph": {"true": "a", "false": True}, "eager_by_rule": {"lines": "z", "max_bs": None},
           "decode_running": [["a", 1], 5, [200, "b"]], "cadence": {"decode_log_interval": "q"},
           "median_accept_len": float("nan")}
    spec = host("gpu-a", [(7, dict(SPEC, cuda_graph_max_bs="8", decode_log_interval="x"))], {"7": log(odd)})
    base = host("gpu-b", [(9, BASE)], {"9": log(figures(decode(128, None, 1493, True)))})
    for rule in (serving.accept_len_one, serving.graphs_off_in_log, serving_fleet.spec_vs_baseline):
        assert isinstance(rule([spec, base]), list)
    assert serving_compare.compare([spec, base]) == []          # no bucket with a figure on both sides
    assert "128+: no figure from x lines" in q10_speculation(spec).text
