"""One bounded load level against one sglang server on loopback: `/generate` with random `input_ids` (no
tokenizer), `max_new_tokens`, `ignore_eos` and `stream: true`, from N threads, until the level's requests are
sent or the deadline passes. The stream is sglang's server-sent events (`data: {json}` per output batch, then
`data: [DONE]`; srt/entrypoints/http_server.py): TTFT is the time to the first event, ITL the gaps between
events (one event may carry several tokens with speculation), TPOT the decode time per token after the first.
Standard library only.
"""
import http.client
import json
import random
import statistics
import threading
import time

from probes.hostinfo.secrets import REDACTED, redact_shapes

MAX_LINE = 1024 * 1024    # one event; a streamed event holds the text so far and meta_info
MAX_EVENTS = 100000       # events of one response
MAX_ERRORS = 3            # distinct error texts kept per level
MAX_GAPS = 4096           # event gaps kept per request for the ITL median
MIN_TIMEOUT_S = 1.0
MAX_MESSAGE = 2000        # a server's error message, read before the key is hidden in it and it is cut


def payload(rng, input_len, output_len, vocab):
    """The body of one request: token ids below `vocab`, so any model's server takes it without a tokenizer."""
    ids = [rng.randrange(vocab) for _ in range(input_len)]
    return json.dumps({"input_ids": ids, "stream": True,
                       "sampling_params": {"max_new_tokens": output_len, "ignore_eos": True,
                                           "temperature": 0.0}}).encode("utf-8")


def post(address, port, body, key, deadline):
    """({meta_info, ttft_s, gaps_s, latency_s}, None) or (None, error text): one streamed POST /generate,
    cut at `deadline`, each event read up to MAX_LINE."""
    sent = time.monotonic()
    connection = http.client.HTTPConnection(address, port, timeout=max(MIN_TIMEOUT_S, deadline - sent))
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    try:
        connection.request("POST", "/generate", body=body, headers=headers)
        response = connection.getresponse()
        if response.status != 200:
            return None, "HTTP %d%s" % (response.status,
                                        " (the api key was refused)" if response.status == 401 else "")
        answer, why = read_events(response, sent, deadline)
    except (OSError, http.client.HTTPException) as exc:
        answer, why = None, "%s: %s" % (type(exc).__name__, getattr(exc, "strerror", None) or exc)
    finally:
        connection.close()
    return answer, None if why is None else without_key(why, key)[:200]


def without_key(text, key):
    """An error text with the api key hidden (a server may echo the request's header or body back), a cut-off
    start of it too, and every other credential shape."""
    if key:
        for form in (key, json.dumps(key)[1:-1]):
            text = text.replace(form, REDACTED)
        for size in range(min(len(key), len(text)) - 1, 3, -1):
            if text.endswith(key[:size]):
                text = text[:-size] + REDACTED
                break
    return redact_shapes(text)


def read_events(response, sent, deadline):
    meta, times = None, []
    for _ in range(MAX_EVENTS):
        line = response.readline(MAX_LINE + 1)
        if not line:
            break
        if len(line) > MAX_LINE:
            return None, "an event over 1 MiB"
        if time.monotonic() > deadline:
            return None, "cut at --max-seconds"
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        try:
            doc = json.loads(data.decode("utf-8", "replace"))
        except ValueError:
            return None, "an event is not JSON"
        if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
            return None, "server error: %s" % str(doc["error"].get("message"))[:MAX_MESSAGE]
        times.append(time.monotonic() - sent)
        meta = doc.get("meta_info") if isinstance(doc, dict) else None
    if not isinstance(meta, dict):
        return None, "no event with meta_info"
    return {"meta_info": meta, "ttft_s": times[0], "latency_s": times[-1],
            "gaps_s": [b - a for a, b in zip(times, times[1:])]}, None


def _count(value):
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10 ** 9 else None


def sample(answer):
    """What one answered request gives: output tokens, TTFT, latency, TPOT, event gaps, and its acceptance
    length (completion_tokens / spec_verify_ct, sglang's own spec_accept_length) when speculating."""
    meta = answer["meta_info"]
    tokens = _count(meta.get("completion_tokens"))
    verify = _count(meta.get("spec_verify_ct"))
    accept = round(tokens / verify, 4) if tokens is not None and verify else None
    decode_s = answer["latency_s"] - answer["ttft_s"]
    tpot = decode_s / (tokens - 1) if tokens and tokens > 1 else None
    return {"tokens": tokens or 0, "ttft_s": answer["ttft_s"], "latency_s": answer["latency_s"], "tpot_s": tpot,
            "gaps_s": answer["gaps_s"][:MAX_GAPS], "accept_len": accept}


def run_level(target, concurrency, requests, deadline, stop, input_len, output_len, vocab, seed=0):
    """The level's figures: requests sent and answered, output tok/s over the level's wall time, TTFT, ITL,
    TPOT and latency medians, per-request acceptance length; stops at `deadline` or when `stop` is set."""
    lock = threading.Lock()
    state = {"next": 0, "samples": [], "failed": 0, "errors": []}
    started = time.monotonic()

    def worker(number):
        rng = random.Random(seed * 1000003 + number)
        while not stop.is_set():
            with lock:
                if state["next"] >= requests or time.monotonic() >= deadline:
                    return
                state["next"] += 1
            body = payload(rng, input_len, output_len, vocab)
            answer, why = post(target["address"], target["port"], body, target.get("key"), deadline)
            with lock:
                if answer is None:
                    state["failed"] += 1
                    if why not in state["errors"] and len(state["errors"]) < MAX_ERRORS:
                        state["errors"].append(why[:200])
                else:
                    state["samples"].append(sample(answer))

    threads = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()) + MIN_TIMEOUT_S)
    return summary(concurrency, state, time.monotonic() - started)


def _median_ms(values):
    return round(statistics.median(values) * 1000.0, 3) if values else None


def summary(concurrency, state, wall_s):
    samples = list(state["samples"])
    latencies = sorted(s["latency_s"] for s in samples)
    accepts = [s["accept_len"] for s in samples if s["accept_len"] is not None]
    tokens = sum(s["tokens"] for s in samples)
    accept = statistics.median(accepts) if accepts else None
    return {
        "concurrency": concurrency, "sent": state["next"], "answered": len(samples), "failed": state["failed"],
        "errors": list(state["errors"]), "duration_s": round(wall_s, 3), "output_tokens": tokens,
        "output_throughput": round(tokens / wall_s, 3) if wall_s > 0 and samples else None,
        "median_ttft_ms": _median_ms([s["ttft_s"] for s in samples]),
        "median_itl_ms": _median_ms([g for s in samples for g in s["gaps_s"]]),
        "median_tpot_ms": _median_ms([s["tpot_s"] for s in samples if s["tpot_s"] is not None]),
        "median_latency_ms": _median_ms(latencies),
        "p90_latency_ms": round(latencies[int(0.9 * (len(latencies) - 1))] * 1000.0, 3) if latencies else None,
        "median_accept_len": round(accept, 4) if accept is not None else None, "accept_len_requests": len(accepts),
    }
