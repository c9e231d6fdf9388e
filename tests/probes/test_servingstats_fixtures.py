"""Real decode, prefill and bench_serving lines quoted in public sglang issues and PRs (each fixture names
its URL) read by the probe-side parser, and the prefixes and oddities a host's log adds to them."""
from pathlib import Path

import pytest

from probes.servingstats.buckets import BUCKET_NAMES, bucket_of
from probes.servingstats.figures import figures
from probes.servingstats.lines import parse_line

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "serving"


def load(name):
    text = (FIXTURES / name).read_text()
    assert text.startswith("#fixture source: https://github.com/")
    return "\n".join(l for l in text.splitlines() if not l.startswith("#fixture ")) + "\n"


# fixture -> (decode lines, prefill lines, {bucket: (count, median gen throughput, median accept len)}, graph)
CASES = {
    "sglang_938_running_1010.log": (1, 0, {"128+": (1, 1397.13, None)}, {"true": 0, "false": 0, "absent": 1}),
    "sglang_1270_time_only_prefix.log": (10, 0, {"1": (7, 238.71, None), "2-3": (3, 426.175, None)},
                                         {"true": 0, "false": 0, "absent": 10}),
    "sglang_3909_tp0_running_8.log": (5, 0, {"8-15": (5, 185.92, None)}, {"true": 0, "false": 0, "absent": 5}),
    "sglang_6081_mtp_dp_attention.log": (5, 0, {"8-15": (5, 168.28, 2.86)}, {"true": 5, "false": 0, "absent": 0}),
    "sglang_13023_trailing_comma_graph_off.log": (8, 0, {"8-15": (3, 532.14, None), "16-31": (3, 895.36, None),
                                                         "32-63": (2, 1262.64, None)},
                                                  {"true": 6, "false": 2, "absent": 0}),
    "sglang_22166_prefill_input_throughput.log": (1, 3, {"32-63": (1, 1635.11, None)},
                                                  {"true": 1, "false": 0, "absent": 0}),
    "sglkernelnpu_608_npu_graph_accept_rate.log": (3, 1, {"16-31": (3, 640.415, 2.83)},
                                                   {"true": 3, "false": 0, "absent": 0}),
    "sglang_30393_pd_decode_spec.log": (4, 0, {"2-3": (4, 183.75, 1.7)}, {"true": 4, "false": 0, "absent": 0}),
    "sglang_17392_dp_tp_ep_pd_decode.log": (3, 0, {"16-31": (3, 1612.16, None)}, {"true": 3, "false": 0, "absent": 0}),
    "llamabenchy_15_swa_prefill.log": (0, 2, {}, {"true": 0, "false": 0, "absent": 0}),
    "sglangjax_564_cache_miss.log": (3, 0, {"1": (3, 84.32, None)}, {"true": 0, "false": 0, "absent": 3}),
    "sglang_2777_eagle_prefill_cache_hit.log": (0, 3, {}, {"true": 0, "false": 0, "absent": 0}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_public_logs_give_their_buckets(name):
    decode, prefill, buckets, graph = CASES[name]
    out = figures(load(name))
    assert (out["decode_lines"], out["prefill_lines"]) == (decode, prefill)
    assert out["graph"] == graph
    assert sorted(out["buckets"]) == sorted(buckets)
    for bucket, (count, median_tput, median_accept) in buckets.items():
        got = out["buckets"][bucket]
        assert got["count"] == count
        assert got["median_gen_throughput"] == median_tput
        assert got["median_accept_len"] == median_accept


def test_dp_attention_ranks_are_summed_and_said_so():
    out = figures(load("sglang_17392_dp_tp_ep_pd_decode.log"))
    assert out["ranks"] == ["DP0 TP0 EP0", "DP2 TP2 EP2", "DP3 TP3 EP3"]
    # Three ranks printing within one second: one moment every rank covers, summed from their first lines
    # (no gap to judge them by), so marked few-sample.
    assert out["dp_sum"]["dp_ranks"] == 3 and "sum of the DP ranks" in out["dp_sum"]["how"]
    assert out["dp_sum"]["seconds_with_all_ranks"] == 1 and out["dp_sum"]["few_sample"] is True
    assert out["dp_sum"]["median_gen_throughput"] == 4779.06
    out = figures(load("sglang_6081_mtp_dp_attention.log"))
    assert out["median_accept_len"] == 2.86 and out["accept_len_lines"] == 5
    log = "".join("[2025-05-31 18:31:%02d DP%d TP%d] Decode batch. #running-req: 8, #token: 1, token usage: 0.1, "
                  "accept len: 2.00, cuda graph: True, gen throughput (token/s): %d.00, #queue-req: 0\n"
                  % (second, rank, rank, 100 + 10 * rank) for second in range(3) for rank in range(2))
    dp = figures(log)["dp_sum"]
    assert dp["seconds_with_all_ranks"] == 2 and dp["median_gen_throughput"] == 210.0
    assert dp["median_running_req"] == 16 and dp["sum_of_rank_medians"] == 210.0


def test_time_span_and_npu_backend():
    out = figures(load("sglkernelnpu_608_npu_graph_accept_rate.log"))
    assert (out["first_ts"], out["last_ts"]) == ("2026-07-21 15:00:13", "2026-07-21 15:00:21")
    assert out["graph_backends"] == ["npu"] and out["median_accept_rate"] == 0.61
    assert out["median_input_throughput"] == 2793.64
    assert out["ranks"] == ["TP0 EP0"]


def test_bench_serving_blocks():
    [block] = figures(load("sglang_13376_bench_serving_accept_length.txt"))["bench"]
    assert block["output_throughput"] == 6148.7 and block["concurrency"] == 256
    assert block["accept_length"] == 5.86 and block["mean_concurrency"] == 142.34 and block["backend"] == "sglang"
    [old] = figures(load("sglang_6681_bench_serving_reqeuest.txt"))["bench"]
    assert old["concurrency"] == 512 and old["output_throughput"] == 456.37 and "accept_length" not in old


LINE = ("[2025-11-11 04:06:27 TP0] Decode batch, #running-req: 46, #token: 34901, token usage: 0.19, "
        "accept len: 1.00, accept rate: 0.00, cuda graph: False, gen throughput (token/s): 1447.08, #queue-req: 0, ")


@pytest.mark.parametrize("prefix", [
    "sglang-1  | ",                                              # docker compose
    "(SchedulerActor pid=4242, ip=10.0.0.7) ",                   # Ray actor
    "Nov 11 04:06:27 gpu01 python3[4242]: ",                     # journald short format
    "2025-11-11T04:06:27.123456789Z ",                           # docker logs --timestamps
    "\x1b[36m",                                                  # colour before the prefix
])
def test_host_prefixes_do_not_hide_the_line(prefix):
    record = parse_line(prefix + LINE)
    assert record["running_req"] == 46 and record["accept_len"] == 1.0 and record["graph"] is False
    assert record["ts"] == "04:06:27" and record["ranks"] == {"TP": 0}


def test_plain_python_logging_and_nonfinite_values():
    record = parse_line("2025-11-11 04:06:27,123 - sglang - INFO - Decode batch. #running-req: 1, #token: 5, "
                        "token usage: 0.00, accept len: nan, gen throughput (token/s): inf, #queue-req: 0")
    assert record["date"] == "2025-11-11" and record["ts"] == "04:06:27"
    assert record["accept_len"] is None and record["gen_throughput"] is None and record["nonfinite"] == 2


def test_not_stats_lines():
    assert parse_line("[2025-01-01 00:00:00] Prefill batch failed, retrying") is None
    assert parse_line("Capture cuda graph bs [1, 2, 4]") is None
    assert parse_line("x" * 100000 + "Decode batch. #running-req: 1") is None      # bounded line length


def test_bucket_edges():
    assert [bucket_of(n) for n in (0, 1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 63, 64, 127, 128, 5000)] == [
        "0", "1", "2-3", "2-3", "4-7", "4-7", "8-15", "8-15", "16-31", "16-31", "32-63", "32-63", "64-127",
        "64-127", "128+", "128+"]
    assert BUCKET_NAMES[0] == "0" and BUCKET_NAMES[-1] == "128+"


def test_idle_gap_and_empty_prefill_mark_the_next_line():
    log = "\n".join([
        "[2026-01-01 00:00:00 TP0] Decode batch, #running-req: 1, #token: 5, token usage: 0.00, gen throughput (token/s): 3.00, #queue-req: 0",
        "[2026-01-01 00:00:01 TP0] Decode batch, #running-req: 1, #token: 5, token usage: 0.00, gen throughput (token/s): 90.00, #queue-req: 0",
        "[2026-01-01 00:05:00 TP0] Decode batch, #running-req: 1, #token: 5, token usage: 0.00, gen throughput (token/s): 0.40, #queue-req: 0",
        "[2026-01-01 00:05:01 TP0] Decode batch, #running-req: 1, #token: 5, token usage: 0.00, gen throughput (token/s): 92.00, #queue-req: 0",
        "[2026-01-01 00:05:01 TP0] Prefill batch, #new-seq: 1, #new-token: 9, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0",
        "[2026-01-01 00:05:02 TP0] Decode batch, #running-req: 1, #token: 5, token usage: 0.00, gen throughput (token/s): 1.00, #queue-req: 0",
    ])
    out = figures(log)
    assert out["after_idle"] == 3
    assert out["buckets"]["1"] == {"count": 5, "steady": 2, "median_gen_throughput": 91.0,
                                   "median_accept_len": None, "few_sample": True}


def test_graphs_off_only_above_the_captured_batches():
    out = figures(load("sglang_13023_trailing_comma_graph_off.log"))
    assert (out["graph_on_max_running"], out["graph_off_min_running"]) == (28, 36)
