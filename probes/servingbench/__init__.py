"""servingbench: a bounded load on each live sglang server of this host, on loopback, level by level
(`gpudiag bench TARGETS --concurrency 1,128`); never part of a plain or deep scan (set "explicit").

Per server found by the deployment probe: the port and --host of its argv (a server on another interface,
or one read from another /proc, is not loaded; a /proc view whose entries link to this host's own /proc/PID
is this host's), its --api-key read from /proc/PID/cmdline and sent as a Bearer token (never stored), random
token ids below the model's vocab_size (its config.json) or below 1000.
Each level runs until its requests are answered or the overall deadline passes. The server's decode lines
written during the load are read through the serving-figures parser when its log is a file.
"""
import json
import os
import threading
import time

from probes import events
from probes.context import Skip
from probes.hostinfo.processes import this_hosts_process
from probes.log_read import HOST_SECONDS, cut_note, read_log
from probes.schemas import anything, i, mapping, num, obj, s, lst
from probes.servingstats.endpoints import DEFAULT_PORT, api_key_of, loopback_address
from probes.servingstats.figures import figures as serving_figures
from probes.servingbench.load import run_level

PROBE = {
    "set": "explicit",
    "needs": ("deployment",),
    "summary": "a bounded /generate load on each live server: tok/s, latency, accept length per concurrency",
    "gpu": "no",
    "torch": "no",
    "sglang": "no",
    "cost": "explicit: loads production servers; only through gpudiag bench",
}
FALLBACK_VOCAB = 1000
LOG_TAIL = 8 * 1024 * 1024
LEVEL = obj({"concurrency": i(), "sent": i(), "answered": i(), "failed": i(), "errors": lst(s()),
             "duration_s": num(), "output_tokens": i(), "output_throughput": num().null(),
             "median_ttft_ms": num().null(), "median_itl_ms": num().null(),
             "median_tpot_ms": num().null(), "median_latency_ms": num().null(), "p90_latency_ms": num().null(),
             "median_accept_len": num().null(), "accept_len_requests": i()}, "one concurrency level")
SHAPE = obj({
    "settings": mapping(anything()),
    "servers": mapping(obj({"pid": i(), "port": i().null(), "address": s().null(), "loaded": anything(),
                            "reason": s().null(), "vocab": i().null(), "vocab_from": s().null(),
                            "api_key_used": anything(), "levels": lst(LEVEL), "stopped": s().null(),
                            "log": anything()})),
}, "the bench load per live server and concurrency level")
NOTES = ("`settings{concurrency[], requests, max_seconds, input_len, output_len}`, `servers.<pid>{port, address, "
         "loaded, reason, vocab, vocab_from, api_key_used, levels[{concurrency, sent, answered, failed, errors[], "
         "duration_s, output_tokens, output_throughput, median_ttft_ms (first streamed event), median_itl_ms "
         "(gaps between events), median_tpot_ms (decode time per token after the first), median_latency_ms, p90_latency_ms, median_accept_len, accept_len_requests}], stopped, log}`: only "
         "`gpudiag bench` runs it; `log` is the serving figures of the decode lines written during the load.")


def collect(ctx):
    settings = ctx.option("servingbench") or {}
    levels = [c for c in settings.get("concurrency") or [] if isinstance(c, int) and 0 < c <= 4096]
    if not levels:
        raise Skip("no concurrency levels given (gpudiag bench --concurrency)")
    deployment = ctx.results.get("deployment")
    if not isinstance(deployment, dict):
        raise Skip("the deployment probe found no servers to load")
    proc_root = (ctx.option("deployment") or {}).get("proc_root") or os.environ.get("GPUDIAG_PROC_ROOT") or "/proc"
    deadline = time.monotonic() + min(float(settings.get("max_seconds") or 60), ctx.time_left() - 3.0)
    if not deployment.get("servers"):
        raise Skip("no live sglang server on this host to load")
    logs = deployment.get("server_logs") or {}
    out = {}
    for server in deployment.get("servers") or []:
        pid = server.get("pid")
        out[str(pid)] = bench_server(server, proc_root, levels, settings, deadline, logs.get(str(pid)) or {})
    return {"settings": dict(settings, concurrency=levels), "servers": out}


def bench_server(server, proc_root, levels, settings, deadline, log_record):
    args = server.get("args") or {}
    port = args.get("port") or DEFAULT_PORT
    address = loopback_address(args)
    record = {"pid": server.get("pid"), "port": port if isinstance(port, int) else None, "address": address,
              "loaded": False, "reason": None, "vocab": None, "vocab_from": None, "api_key_used": False,
              "levels": [], "stopped": None, "log": None}
    if not this_hosts_process(proc_root, server.get("pid")):
        record["reason"] = "server read from another /proc (deployment.proc_root): its loopback is not this host's"
    elif address is None:
        record["reason"] = "listens on %s, not on loopback: not loaded" % args.get("host")
    elif not isinstance(port, int) or not 0 < port < 65536:
        record["reason"] = "port %r is not a port" % (port,)
    if record["reason"]:
        return record
    key = api_key_of(proc_root, server.get("pid"))
    record["vocab"], record["vocab_from"] = vocab_of(args.get("model_path"))
    record.update(loaded=True, api_key_used=key is not None)
    log_start = log_offset(log_record)
    target = {"address": address, "port": port, "key": key}
    stop = threading.Event()
    for number, concurrency in enumerate(levels, 1):
        if time.monotonic() >= deadline:
            record["stopped"] = "--max-seconds reached before concurrency %d" % concurrency
            break
        what = "pid %s concurrency %d" % (server.get("pid"), concurrency)
        events.emit("servingbench", "level", "started", i=number, n=len(levels), what=what)
        level = run_level(target, concurrency, int(settings.get("requests") or 8), deadline, stop,
                          int(settings.get("input_len") or 128), int(settings.get("output_len") or 128),
                          record["vocab"], seed=number)
        record["levels"].append(level)
        events.emit("servingbench", "level", "finished", i=number, n=len(levels), what=what,
                    status="%d/%d answered" % (level["answered"], level["sent"]), duration_s=level["duration_s"])
    record["log"] = log_during(log_record, log_start)
    return record


def vocab_of(model_path):
    """(vocab size, where it came from): the model's config.json (or its text_config) when it is a directory
    here, else the fallback that every tokenizer covers."""
    path = os.path.join(str(model_path), "config.json") if model_path else None
    try:
        with open(path, "rb") as handle:
            config = json.loads(handle.read(1024 * 1024).decode("utf-8", "replace"))
    except (OSError, TypeError, ValueError):
        return FALLBACK_VOCAB, "fallback: no readable config.json"
    for where in (config, config.get("text_config") if isinstance(config, dict) else None):
        size = where.get("vocab_size") if isinstance(where, dict) else None
        if isinstance(size, int) and not isinstance(size, bool) and 1 < size < 10 ** 7:
            return size, "config.json"
    return FALLBACK_VOCAB, "fallback: config.json has no vocab_size"


def _log_path(log_record):
    source = log_record.get("source") or {}
    if source.get("kind") in ("stdout", "stderr"):
        return source.get("where")
    if source.get("kind") in ("flag", "inventory"):
        return source.get("path")
    return None


def log_offset(log_record):
    path = _log_path(log_record)
    try:
        return os.stat(path).st_size if path else None
    except OSError:
        return None


def log_during(log_record, start):
    """The serving figures of what the server logged during the load, or why there are none."""
    path = _log_path(log_record)
    if path is None or start is None:
        kind = (log_record.get("source") or {}).get("kind")
        return {"reason": "log not read during the load: " + ("a %s log is not a file" % kind if kind
                                                               else "no log found")}
    try:  # bounded by bytes, lines and time: a FIFO named by --log-file cannot hold the bench
        read = read_log(path, HOST_SECONDS, LOG_TAIL, start=start)
    except OSError as exc:
        return {"reason": "log not read during the load: %s" % (exc.strerror or exc)}
    found = serving_figures(read.text)
    found["bytes_read"] = read.bytes_read
    if read.cut == "time":
        found["cut_note"] = cut_note(read)
    return found
