"""The bench probe's pure parts: the vocab bound, one request's figures, which servers are loaded, the log
read from where it stood before the load, and the catalog keeping it out of the light and deep sets."""
import json
import random

from probes import catalog
from probes.servingbench import FALLBACK_VOCAB, bench_server, log_during, log_offset, vocab_of
from probes.servingbench.load import payload, read_events, sample, summary


def test_vocab_comes_from_the_models_config_or_falls_back(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"text_config": {"vocab_size": 151936}}))
    assert vocab_of(str(tmp_path)) == (151936, "config.json")
    assert vocab_of(str(tmp_path / "absent"))[0] == FALLBACK_VOCAB
    assert vocab_of(None)[0] == FALLBACK_VOCAB
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": True}))
    assert vocab_of(str(tmp_path)) == (FALLBACK_VOCAB, "fallback: config.json has no vocab_size")


def test_a_request_carries_ids_below_the_vocab_and_ignores_eos():
    body = json.loads(payload(random.Random(1), 64, 16, 50))
    assert len(body["input_ids"]) == 64 and max(body["input_ids"]) < 50
    assert body["sampling_params"] == {"max_new_tokens": 16, "ignore_eos": True, "temperature": 0.0}
    assert body["stream"] is True


def answer(meta, ttft=0.1, latency=0.5):
    return {"meta_info": meta, "ttft_s": ttft, "latency_s": latency, "gaps_s": [0.01]}


def test_acceptance_length_is_completion_tokens_over_verify_steps():
    assert sample(answer({"completion_tokens": 128, "spec_verify_ct": 40}))["accept_len"] == 3.2
    assert sample(answer({"completion_tokens": 128}))["accept_len"] is None          # no speculation
    assert sample(answer({"completion_tokens": 128, "spec_verify_ct": 0}))["accept_len"] is None
    assert sample(answer({"completion_tokens": "128"}))["tokens"] == 0               # a host's odd value
    assert sample(answer({"completion_tokens": 5}, 0.1, 0.5))["tpot_s"] == 0.1      # 0.4 s over 4 tokens


class Events:
    """An HTTP response's readline over recorded server-sent events."""

    def __init__(self, lines):
        self.lines = list(lines)

    def readline(self, limit):
        return self.lines.pop(0)[:limit] if self.lines else b""


def test_streamed_events_give_ttft_gaps_and_the_last_meta_info():
    events = [b"data: " + json.dumps({"text": "a", "meta_info": {"completion_tokens": k}}).encode() + b"\n"
              for k in (1, 5)]
    got, why = read_events(Events([events[0], b"\n", events[1], b"\n", b"data: [DONE]\n"]), 0.0, 1e18)
    assert why is None and got["meta_info"] == {"completion_tokens": 5} and len(got["gaps_s"]) == 1
    got, why = read_events(Events([b'data: {"error": {"message": "bad ids"}}\n']), 0.0, 1e18)
    assert got is None and why == "server error: bad ids"
    assert read_events(Events([b"data: [DONE]\n"]), 0.0, 1e18) == (None, "no event with meta_info")


def test_level_summary_figures():
    state = {"next": 3, "failed": 1, "errors": ["HTTP 500"],
             "samples": [sample(answer({"completion_tokens": 10, "spec_verify_ct": 5}, 0.05, 0.1)),
                         sample(answer({"completion_tokens": 10, "spec_verify_ct": 2}, 0.05, 0.3))]}
    level = summary(4, state, 2.0)
    assert level["output_throughput"] == 10.0 and level["answered"] == 2 and level["failed"] == 1
    assert level["median_latency_ms"] == 200.0 and level["median_accept_len"] == 3.5
    assert summary(1, {"next": 0, "failed": 0, "errors": [], "samples": []}, 1.0)["output_throughput"] is None


def test_a_server_off_loopback_or_in_another_proc_is_not_loaded():
    server = {"pid": 7, "args": {"host": "10.0.0.5", "port": 30000}}
    record = bench_server(server, "/proc", [1], {}, 0.0, {})
    assert record["loaded"] is False and "not on loopback" in record["reason"] and record["levels"] == []
    record = bench_server({"pid": 7, "args": {"port": 30000}}, "/elsewhere", [1], {}, 0.0, {})
    assert record["loaded"] is False and "another /proc" in record["reason"]


def test_a_proc_view_linking_to_this_hosts_entries_is_this_host(tmp_path):
    """A test's /proc view links to this host's /proc/PID: its servers are ours. A copied entry, or a link
    named for another pid, is another /proc."""
    import os
    from probes.hostinfo.processes import this_hosts_process
    me = os.getpid()
    (tmp_path / str(me)).symlink_to("/proc/%d" % me)
    (tmp_path / "1").symlink_to("/proc/%d" % me)
    (tmp_path / "2").mkdir()
    assert this_hosts_process("/proc", me) and this_hosts_process(str(tmp_path), me)
    assert not this_hosts_process(str(tmp_path), 1) and not this_hosts_process(str(tmp_path), 2)
    assert not this_hosts_process("/proc", "7") and not this_hosts_process("/proc", None)


def test_the_log_is_read_from_where_it_stood_before_the_load(tmp_path):
    path = tmp_path / "server.log"
    path.write_text("old line that is not a decode line\n")
    record = {"source": {"kind": "flag", "path": str(path)}}
    start = log_offset(record)
    with open(path, "a") as handle:
        handle.write("written during the load\n")
    assert log_during(record, start)["bytes_read"] == len("written during the load\n")
    assert "not a file" in log_during({"source": {"kind": "journal"}}, None)["reason"]


def test_explicit_probes_are_in_neither_the_light_nor_the_deep_set():
    assert catalog.EXPLICIT_PROBES == ("servingbench",)
    assert "servingbench" not in catalog.LIGHT_PROBES + catalog.DEEP_PROBES
    assert "servingbench" not in catalog.plan([])[0]
    assert catalog.plan(["servingbench"]) == (["deployment", "servingbench"], [])
