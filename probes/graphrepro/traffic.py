"""Concurrent /generate requests by token ids on loopback, and the acceptance length they report."""
import json
import random
import threading
import time
import urllib.error
import urllib.request


def generate_body(input_ids, max_new_tokens):
    return {"input_ids": list(input_ids),
            "sampling_params": {"max_new_tokens": int(max_new_tokens), "temperature": 0, "ignore_eos": True}}


def send_one(port, body, timeout):
    """{"ok", "error", "completion_tokens", "spec_verify_ct", "latency_s"} for one request."""
    started = time.monotonic()
    request = urllib.request.Request("http://127.0.0.1:%d/generate" % port, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    out = {"ok": False, "error": None, "completion_tokens": None, "spec_verify_ct": None}
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            doc = json.loads(resp.read().decode("utf-8", "replace"))
        meta = (doc[0] if isinstance(doc, list) else doc).get("meta_info") or {}
        out.update(ok=True, completion_tokens=meta.get("completion_tokens"),
                   spec_verify_ct=meta.get("spec_verify_ct"))
    except urllib.error.HTTPError as exc:
        out["error"] = "HTTP %d" % exc.code
    except (urllib.error.URLError, OSError, ValueError) as exc:
        kind = "timeout" if "timed out" in str(exc) else "connection"
        out["error"] = "%s: %s" % (kind, exc)
    out["latency_s"] = round(time.monotonic() - started, 3)
    return out


def send_concurrent(port, count, prompt_len=64, max_new_tokens=32, timeout=120.0, vocab=1000, seed=0):
    """`count` requests at once (the batch size under test); results in request order."""
    rng = random.Random(seed)
    bodies = [generate_body([rng.randrange(10, vocab) for _ in range(prompt_len)], max_new_tokens)
              for _ in range(count)]
    results = [None] * count

    def worker(i):
        results[i] = send_one(port, bodies[i], timeout)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout + 5)
    return [r or {"ok": False, "error": "timeout: no answer"} for r in results]


def acceptance_length(results):
    """Mean tokens per verify step over the answered requests; None when the server does not say."""
    tokens = sum(r.get("completion_tokens") or 0 for r in results if r.get("ok"))
    verifies = sum(r.get("spec_verify_ct") or 0 for r in results if r.get("ok"))
    return round(tokens / float(verifies), 3) if verifies else None
