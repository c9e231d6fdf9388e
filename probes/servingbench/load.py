"""One bounded load level against one sglang server on loopback: `/generate` with random `input_ids` (no
tokenizer), `max_new_tokens` and `ignore_eos`, from N threads, until the level's requests are sent or the
deadline passes. Non-streaming: the time to the response is the request's latency and stands for its TTFT.
Standard library only.
"""
import http.client
import json
import random
import statistics
import threading
import time

MAX_BYTES = 1024 * 1024   # one response; sglang's /generate answer is text plus meta_info
MAX_ERRORS = 3            # distinct error texts kept per level
MIN_TIMEOUT_S = 1.0


def payload(rng, input_len, output_len, vocab):
    """The body of one request: token ids below `vocab`, so any model's server takes it without a tokenizer."""
    ids = [rng.randrange(vocab) for _ in range(input_len)]
    return json.dumps({"input_ids": ids, "sampling_params": {"max_new_tokens": output_len, "ignore_eos": True,
                                                             "temperature": 0.0}}).encode("utf-8")


def post(address, port, body, key, timeout):
    """(meta_info dict, None) or (None, error text): one POST /generate within the time and size bounds."""
    connection = http.client.HTTPConnection(address, port, timeout=max(MIN_TIMEOUT_S, timeout))
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    try:
        connection.request("POST", "/generate", body=body, headers=headers)
        response = connection.getresponse()
        data = response.read(MAX_BYTES + 1)
    except (OSError, http.client.HTTPException) as exc:
        return None, "%s: %s" % (type(exc).__name__, getattr(exc, "strerror", None) or exc)
    finally:
        connection.close()
    if response.status != 200:
        return None, "HTTP %d%s" % (response.status, " (the api key was refused)" if response.status == 401 else "")
    if len(data) > MAX_BYTES:
        return None, "response over 1 MiB"
    try:
        doc = json.loads(data.decode("utf-8", "replace"))
    except ValueError:
        return None, "response is not JSON"
    doc = doc[0] if isinstance(doc, list) and doc else doc
    meta = doc.get("meta_info") if isinstance(doc, dict) else None
    return (meta, None) if isinstance(meta, dict) else (None, "response has no meta_info")


def _count(value):
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10 ** 9 else None


def sample(meta, seconds):
    """What one answered request gives: output tokens, latency, and its acceptance length when speculating."""
    tokens = _count(meta.get("completion_tokens"))
    verify = _count(meta.get("spec_verify_ct"))
    accept = round(tokens / verify, 4) if tokens is not None and verify else None
    return {"tokens": tokens or 0, "latency_s": seconds, "accept_len": accept}


def run_level(target, concurrency, requests, deadline, stop, input_len, output_len, vocab, seed=0):
    """The level's figures: requests sent and answered, output tok/s over the level's wall time, median
    latency (= TTFT here), per-request acceptance length; stops at `deadline` or when `stop` is set."""
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
            sent = time.monotonic()
            meta, why = post(target["address"], target["port"], body, target.get("key"), deadline - sent)
            with lock:
                if meta is None:
                    state["failed"] += 1
                    if why not in state["errors"] and len(state["errors"]) < MAX_ERRORS:
                        state["errors"].append(why[:200])
                else:
                    state["samples"].append(sample(meta, time.monotonic() - sent))

    threads = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()) + MIN_TIMEOUT_S)
    return summary(concurrency, state, time.monotonic() - started)


def _median(values):
    return round(statistics.median(values), 3) if values else None


def summary(concurrency, state, wall_s):
    samples = list(state["samples"])
    latencies = sorted(s["latency_s"] * 1000.0 for s in samples)
    accepts = [s["accept_len"] for s in samples if s["accept_len"] is not None]
    tokens = sum(s["tokens"] for s in samples)
    return {
        "concurrency": concurrency, "sent": state["next"], "answered": len(samples), "failed": state["failed"],
        "errors": list(state["errors"]), "duration_s": round(wall_s, 3), "output_tokens": tokens,
        "output_throughput": round(tokens / wall_s, 3) if wall_s > 0 and samples else None,
        "median_ttft_ms": _median(latencies), "median_latency_ms": _median(latencies),
        "p90_latency_ms": round(latencies[int(0.9 * (len(latencies) - 1))], 3) if latencies else None,
        "median_accept_len": _median(accepts), "accept_len_requests": len(accepts),
    }
