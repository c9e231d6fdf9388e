"""The shape of a server's serving figures, as the deployment probe stores them per server log
(`server_logs.<pid>.serving`) and as `gpudiag serving --log --json` prints them."""
from probes.schemas import anything, b, i, lst, mapping, num, obj, s

_BUCKET = obj({"count": i("decode lines whose #running-req falls in the bucket"),
               "steady": i("of them, lines whose gap fits the server's cadence (the throughput sample)"),
               "median_gen_throughput": num("token/s, steady lines only (else the ranks' first lines)").null(),
               "median_accept_len": num("accepted tokens per verify step, bonus token included").null(),
               "few_sample": b("the figure rests on fewer than 3 lines").opt(),
               "from_first_lines": i("no steady line: the figure is the ranks' first lines' (no gap to judge)").opt(),
               "why": s("lines but no figure: why (all after idle, or no gen throughput printed)").opt()})
_EARLIER = obj({"decode_lines": i(), "prefill_lines": i(), "first_ts": s().null(), "last_ts": s().null(),
                "buckets": mapping(_BUCKET), "graph": anything(), "median_accept_len": num().null()},
               "a server run before the last restart in the log window")
SERVING = obj({
    "decode_lines": i(), "prefill_lines": i(),
    "buckets": mapping(_BUCKET, "0 | 1 | 2-3 | 4-7 | 8-15 | 16-31 | 32-63 | 64-127 | 128+ -> figures"),
    "median_accept_len": num().null("null without speculation or without decode lines"),
    "accept_len_lines": i().opt(),
    "median_input_throughput": num("prefill lines' input throughput (token/s), 0.5.9+ on every line").null().opt(),
    "median_accept_rate": num("this release's own definition: never compare across releases").null().opt(),
    "graph": obj({"true": i(), "false": i(), "absent": i("lines of releases before 0.4.7")},
                 "decode lines by their `cuda|cpu|npu|musa graph:` field"),
    "graph_on_max_running": i("largest #running-req of a line with graphs on").null().opt(),
    "graph_off_min_running": i("smallest #running-req of a line with graphs off").null().opt(),
    "graph_backends": lst(s()).opt(),
    "after_idle": i("decode lines right after idle, kept out of the throughput medians").opt(),
    "nonfinite": i("nan/inf values seen").opt(),
    "first_ts": s().null(), "last_ts": s().null(),
    "ranks": lst(s("rank tags as logged, e.g. DP0 TP0")),
    "dp_sum": anything("with DP attention: the DP ranks' throughput summed at the same second").null().opt(),
    "bench": lst(anything("one bench_serving result block")).opt(),
    "cadence": obj({"decode_log_interval": i("decode steps between two lines of a rank"),
                    "from": s("the log's server_args line | --decode-log-interval | sglang's default")},
                   "what the idle judgement assumed").opt(),
    "runs": i("server runs in the window (split at each launch's server_args line); figures are the last's").opt(),
    "earlier_runs": lst(_EARLIER, "up to 4 runs before the last restart, never mixed into the figures").opt(),
    "started_in_log": b("the window holds this run's launch line").opt(),
    "decode_running": lst(lst(i()), "[#running-req, decode lines] pairs (up to 512 values)").opt(),
    "eager_by_rule": obj({"max_bs": i(), "from": s(), "lines": i("decode lines above max_bs: eager by sglang's rule"),
                          "logged_graph_true": i("of them, lines that still say graph True")},
                         "when the log says the largest captured batch size").opt(),
}, "decode/prefill figures of the server's log window, by #running-req bucket")

_METRIC = obj({"samples": lst(num()), "sum": num().null()})
ENDPOINTS = obj({
    "contacted": b("false: not on loopback, or the time budget was spent (reason says)"),
    "reason": s().opt(), "address": s().opt(), "port": i().opt(),
    "api_key_used": b("the server's --api-key was sent; the key itself is never stored").opt(),
    "info_route": s("/server_info | /get_server_info").opt(), "info_error": s().opt(),
    "version": s().null().opt(), "speculative_algorithm": s().null().opt(),
    "speculative_num_draft_tokens": num().null().opt(),
    "avg_spec_accept_length": lst(num(), "per DP rank: the server's lifetime average").opt(),
    "last_gen_throughput": lst(num(), "per DP rank, token/s").opt(), "dp_ranks": i().opt(),
    "metrics": obj({"error": s().opt(), "spec_accept_length": _METRIC.opt(), "gen_throughput": _METRIC.opt(),
                    "num_running_reqs": _METRIC.opt()}, "/metrics gauges, with --enable-metrics").opt(),
}, "the server's own endpoints on loopback, whitelisted numbers only")
