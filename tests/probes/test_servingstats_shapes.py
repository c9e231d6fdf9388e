"""Serving lines as a terminal, a logging config or a restart leaves them, each built from a real line quoted in a
public sglang issue (tests/fixtures/serving names the URL): glued fields, custom rank tags, a lost "[", a quoted
bench_serving block, a log spanning a restart, decode lines above the captured batch sizes; and the cadence the
idle judgement assumes, read from the real wheels."""
import re
from pathlib import Path

import pytest

from probes.servingstats import cadence
from probes.servingstats.figures import figures
from probes.servingstats.lines import parse_line
from probes.servingstats.rows import row_of
from tests.sglang_wheels import VERSIONS, SkipWheel, site_packages_for

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "serving"


def real(name, number=0):
    """The `number`th stats line of a fixture."""
    lines = [l for l in (FIXTURES / name).read_text().splitlines() if not l.startswith("#fixture") and "batch" in l]
    return lines[number]


def body(name):
    return "\n".join(l for l in (FIXTURES / name).read_text().splitlines() if not l.startswith("#fixture")) + "\n"


NPU = "sglkernelnpu_608_npu_graph_accept_rate.log"       # [... TP0 EP0] Decode batch, ... accept rate: 0.68, ...
DP = "sglang_17392_dp_tp_ep_pd_decode.log"                # [2026-05-07 13:40:41 DP3 TP3 EP3] Decode batch, ...


def test_a_field_glued_to_the_previous_one_is_found_by_its_key():
    line = real(NPU, 1)
    assert "token usage: 0.66, accept len: 3.05, accept rate: 0.68" in line
    glued = line.replace("token usage: 0.66, accept len: 3.05, accept rate", "token usaccept rate")
    record = parse_line(glued)
    assert record["accept_rate"] == 0.68 and record["gen_throughput"] == 239.06 and "accept_len" not in record
    assert record["running_req"] == 24 and record["graph"] is True and record["graph_backend"] == "npu"


def test_rank_tags_of_every_bracket_shape():
    line = real(DP, 2)
    assert line.startswith("[2026-05-07 13:40:41 DP3 TP3 EP3] Decode batch")
    custom = line.replace("[2026-05-07 13:40:41 DP3 TP3 EP3]", "[DP3 TP3 EP3 scheduler_metrics_mixin.py:222]")
    record = parse_line(custom)
    assert record["ranks"] == {"DP": 3, "TP": 3, "EP": 3} and record["rank"] == "DP3 TP3 EP3" and record["ts"] is None
    lost = parse_line(line[1:])                          # the "[" the terminal ate
    assert lost["ranks"] == {"DP": 3, "TP": 3, "EP": 3} and lost["ts"] == "13:40:41"
    assert lost["date"] == "2026-05-07" and lost["gen_throughput"] == 1612.16
    every = parse_line(line.replace("DP3 TP3 EP3", "PP1 DP1 ATTN_CP1 MOE_DP1 TP1 EP1"))   # sglang 0.5.23's tags
    assert every["ranks"] == {"PP": 1, "DP": 1, "ATTN_CP": 1, "MOE_DP": 1, "TP": 1, "EP": 1}
    ray = parse_line("(SchedulerActor pid=12, ip=10.0.0.3) " + line)
    assert ray["rank"] == "DP3 TP3 EP3"


def test_lines_of_one_rank_group_whatever_their_shape():
    line = real(DP, 2)
    log = "\n".join([line, line[1:].replace("13:40:41", "13:40:42"),
                     line.replace("[2026-05-07 13:40:41 DP3 TP3 EP3]", "2026-05-07 13:40:43 DP3 TP3 EP3]")])
    out = figures(log)
    assert out["ranks"] == ["DP3 TP3 EP3"]
    assert out["buckets"]["16-31"]["steady"] == 2       # one rank: its second and third lines have a gap to judge


def test_a_quoted_bench_serving_block_is_read():
    quoted = "".join("> " + l + "\n" for l in body("sglang_13376_bench_serving_accept_length.txt").splitlines())
    [block] = figures(quoted)["bench"]
    assert block["output_throughput"] == 6148.7 and block["concurrency"] == 256 and block["accept_length"] == 5.86


def test_new_real_logs():
    one = figures(body("sglang_29853_npu_prefill_one_decode.log"))
    assert one["buckets"]["128+"] == {"count": 1, "steady": 0, "median_gen_throughput": 14.47,
                                      "median_accept_len": None, "few_sample": True, "from_first_lines": 1}
    assert one["prefill_lines"] == 5 and one["median_input_throughput"] == 5092.88
    mangled = figures(body("sglang_25960_terminal_mangled_prefill.log"))
    assert mangled["prefill_lines"] == 7 and mangled["decode_lines"] == 0
    dp = figures(body("sglang_6017_dp_ranks_one_second.log"))["dp_sum"]
    assert dp["dp_ranks"] == 7 and dp["seconds_with_all_ranks"] == 1 and dp["median_gen_throughput"] == 2694.43
    steady = figures(body("sglang_22331_steady_cadence_5_running.log"))["buckets"]["4-7"]
    assert (steady["count"], steady["steady"], steady["median_gen_throughput"]) == (8, 7, 144.1)  # all but the first
    eagle = figures(body("sglang_11948_eagle3_first_line_after_empty_prefill.log"))
    assert eagle["after_idle"] == 1 and eagle["buckets"]["1"]["steady"] == 4
    assert eagle["buckets"]["1"]["median_gen_throughput"] == 172.225     # the 0.39 tok/s line is left out


def test_a_log_spanning_a_restart_gives_the_last_runs_figures():
    off = [l for l in body("sglang_13023_trailing_comma_graph_off.log").splitlines() if "graph: False" in l]
    on = body(DP).splitlines()
    log = "\n".join(["[2025-11-11 04:00:00] server_args=ServerArgs(model_path='m', disable_cuda_graph=False)"] + off
                    + ["[2026-05-07 13:00:00] server_args=ServerArgs(model_path='m', decode_log_interval=20)"] + on)
    out = figures(log)
    assert out["runs"] == 2 and out["graph"] == {"true": 3, "false": 0, "absent": 0}
    assert out["cadence"] == {"decode_log_interval": 20, "from": "the server_args line of the log"}
    [earlier] = out["earlier_runs"]
    assert earlier["decode_lines"] == 2 and earlier["graph"]["false"] == 2 and earlier["last_ts"] == "2025-11-11 04:06:29"


def test_decode_lines_above_the_captured_batch_sizes_are_counted_eager():
    log = "[2025-11-11 04:05:00] Capture cuda graph bs [1, 2, 4, 8, 12, 16, 24, 32]\n" + body(
        "sglang_13023_trailing_comma_graph_off.log")
    eager = figures(log)["eager_by_rule"]
    assert eager == {"max_bs": 32, "from": "the log's `Capture cuda graph bs` line", "lines": 2, "logged_graph_true": 0}
    flagged = figures(body("sglang_13023_trailing_comma_graph_off.log"), {"cuda_graph_max_bs": 24})["eager_by_rule"]
    assert flagged["lines"] == 3 and flagged["from"] == "--cuda-graph-max-bs"
    assert "eager_by_rule" not in figures(body("sglang_13023_trailing_comma_graph_off.log"))


def test_the_idle_gap_follows_the_servers_cadence():
    # The real 0.5.x line at 128 running requests of a DFLASH server: 40 steps x 128 x 3.6 / 1146 tok/s = 16 s.
    line = real(NPU, 1).replace("#running-req: 24", "#running-req: 128").replace("accept len: 3.05", "accept len: 3.60")
    line = line.replace("gen throughput (token/s): 239.06", "gen throughput (token/s): 1146.00")
    record = row_of(parse_line(line))
    assert round(cadence.expected_gap(record, 40), 1) == 16.1 and round(cadence.expected_gap(record, 20), 1) == 8.0
    stamped = ["[2026-07-21 15:%02d:%02d TP0 EP0]" % divmod(16 * n, 60) for n in range(6)]
    log = "\n".join(s + line[line.index("]") + 1:] for s in stamped)
    bucket = figures(log)["buckets"]["128+"]
    assert bucket["steady"] == 5 and bucket["median_gen_throughput"] == 1146.0   # 16 s apart: steady, not idle
    assert figures(log, {"decode_log_interval": 2})["buckets"]["128+"]["steady"] == 0   # 16 s at 0.8 s expected


def test_the_default_interval_is_the_releases_own():
    seen = []
    for version in VERSIONS:
        try:
            site = site_packages_for(version)
        except SkipWheel:
            continue
        text = "".join(p.read_text(errors="replace") for p in (site / "sglang" / "srt").rglob("*.py")
                       if "decode_log_interval" in p.read_text(errors="replace") or "% 40" in p.read_text(errors="replace"))
        found = re.search(r"decode_log_interval(?::\s*(?:int|A\[[^\]]*\]))?\s*=\s*(\d+)", text, re.S) or \
            re.search(r"decode_forward_ct % (\d+) == 0", text)
        assert found, version
        seen.append((version, int(found.group(1))))
    if not seen:
        pytest.skip("no sglang wheel in the cache")
    assert all(value == cadence.DEFAULT_INTERVAL for _, value in seen), seen


def test_cap_len_alone_and_block_accept_len_are_kept_apart_from_accept_len():
    line = real(NPU, 1)
    alone = parse_line(line.replace("accept rate: 0.68", "accept rate: 0.68, cap len: 7.50"))
    assert alone["cap_len"] == 7.5 and "block_accept_len" not in alone and alone["accept_len"] == 3.05
    both = parse_line(line.replace("accept len: 3.05", "block accept len: 9.25, accept len: 3.05"))
    assert both["accept_len"] == 3.05 and both["block_accept_len"] == 9.25   # the block figure is its own


def test_a_restart_whose_launch_line_was_lost_is_split_at_its_ready_line():
    off = [l for l in body("sglang_13023_trailing_comma_graph_off.log").splitlines() if "graph: False" in l]
    log = "\n".join(off + ["[2026-05-07 13:00:00] The server is fired up and ready to roll!"] + body(DP).splitlines())
    out = figures(log)
    assert out["runs"] == 2 and out["graph"]["false"] == 0 and out["earlier_runs"][0]["decode_lines"] == 2
    assert figures("\n".join(off + ["[2025-11-11 04:07:00] a note on graph bs [unknown]"] + off))["runs"] == 1


def test_a_real_log_keeps_the_cadence_the_rule_assumes():
    # sglang issue #3909: 8 running requests at ~186 tok/s; #token grows 320 = 40 steps x 8 requests a line, and
    # the stamps are 1-2 s apart where 40 x 8 / 186 = 1.7 s is expected.
    text = body("sglang_3909_tp0_running_8.log")
    tokens = [int(t) for t in re.findall(r"#token: (\d+)", text)]
    assert {b - a for a, b in zip(tokens, tokens[1:])} == {cadence.DEFAULT_INTERVAL * 8}
    records = [parse_line(l) for l in text.splitlines()]
    gaps = [b["t"] - a["t"] for a, b in zip(records, records[1:])]
    expected = [cadence.expected_gap(row_of(r), cadence.DEFAULT_INTERVAL) for r in records[1:]]
    assert all(abs(gap - want) <= 1 for gap, want in zip(gaps, expected)), (gaps, expected)


def test_a_live_servers_own_flags_set_the_cadence_when_its_log_has_no_launch_line():
    """The flags as the deployment probe parses a live server's argv (an unknown flag's value stays a string)
    reach the reader: the log is judged at the server's own --decode-log-interval, not sglang's default."""
    from probes.hostinfo.sglang_cmdline import parse_server_args

    text = body(DP)
    assert "server_args=" not in text
    args, _ = parse_server_args(["--decode-log-interval", "20", "--cuda-graph-max-bs", "16"])
    assert figures(text)["cadence"]["decode_log_interval"] == cadence.DEFAULT_INTERVAL
    assert figures(text, args)["cadence"] == {"decode_log_interval": 20, "from": "--decode-log-interval"}
    assert figures(text, {"decode_log_interval": "twenty"})["cadence"]["from"] == cadence.DEFAULT_SOURCE
