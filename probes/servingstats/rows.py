"""One stats line's figures as a tuple (a row), the form both line readers hand to the summary: tens of
thousands of lines each cost one tuple, where a dict of the same figures costs about three times as much to
build and to read back. A figure the line does not print is None (nan and inf are None too, and counted).

The fields, in order: decode (True for a decode line, False for a prefill line), running_req, gen_throughput,
accept_len, accept_rate, graph, graph_backend, nonfinite, input_throughput, forward_ct, new_token, cap_len,
block_accept_len, then the logging prefix's stamp ("YYYY-MM-DD HH:MM:SS", or the time alone when the prefix has no
date), t (seconds), ranks ({tag: n}) and rank ("DP0 TP0")."""

FIELDS = ("decode", "running_req", "gen_throughput", "accept_len", "accept_rate", "graph", "graph_backend",
          "nonfinite", "input_throughput", "forward_ct", "new_token", "cap_len", "block_accept_len",
          "stamp", "t", "ranks", "rank")
# The positions the summary reads (cadence.py, buckets.py).
RUNNING, TPUT, ACCEPT, RATE, GRAPH, BACKEND, NONFINITE, INPUT, STAMP, T, RANKS, RANK = (
    FIELDS.index(name) for name in ("running_req", "gen_throughput", "accept_len", "accept_rate", "graph",
                                    "graph_backend", "nonfinite", "input_throughput", "stamp", "t", "ranks", "rank"))


def row_of(record):
    """The row of a line's figures read into a dict ({kind, running_req, ..., date, ts, t, ranks, rank})."""
    get, date = record.get, record["date"]
    return (record["kind"] == "decode", get("running_req"), get("gen_throughput"), get("accept_len"),
            get("accept_rate"), get("graph"), get("graph_backend"), record["nonfinite"], get("input_throughput"),
            record["forward_ct"], get("new_token"), get("cap_len"), get("block_accept_len"),
            ("%s %s" % (date, record["ts"])) if date else record["ts"], record["t"], record["ranks"], record["rank"])
