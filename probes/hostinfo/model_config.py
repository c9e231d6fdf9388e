"""Each live server's model config.json, and its draft model's, read-only: found as the repro finds a model
(the server's --model-path directory, relative paths from the server's own working directory, else the Hugging
Face cache snapshot of a hub id, the server's own HF_HOME first: probes/hostinfo/hf_cache.py), plus
`metadata.total_size` of model.safetensors.index.json beside it. Never a weight file. Bounded: a config.json over
MAX_CONFIG bytes or an index over MAX_INDEX bytes is not read (the reason says so).
"""
import json
import os

from probes.hostinfo.hf_cache import cache_dirs_for, model_dir

MAX_CONFIG = 512 * 1024
MAX_INDEX = 64 * 1024 * 1024
ROLES = (("model", "model_path"), ("draft", "speculative_draft_model_path"))


def _read_json(path, limit):
    """(object, None) or (None, reason)."""
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        return None, "%s unreadable (%s)" % (path, exc.strerror or exc)
    if size > limit:
        return None, "%s is %d bytes, over the %d-byte bound" % (path, size, limit)
    try:
        with open(path, "rb") as fh:
            return json.loads(fh.read(limit + 1).decode("utf-8", "replace")), None
    except (OSError, ValueError) as exc:
        return None, "%s is not JSON (%s)" % (path, type(exc).__name__)


def _located(value, server, proc_root):
    text = str(value)
    if text and not os.path.isabs(text):  # relative to the server's working directory, as the server read it
        try:
            cwd = os.readlink(os.path.join(proc_root, str(server.get("pid")), "cwd"))
        except OSError:
            cwd = None
        if cwd and os.path.isfile(os.path.join(cwd, text, "config.json")):
            return os.path.normpath(os.path.join(cwd, text)), "the live server's --model-path, from its working directory"
    return model_dir(text, cache_dirs_for(server))


def read_one(value, server, proc_root):
    """{where, how, config, index_total_size, index_reason} or {reason}."""
    folder, how = _located(value, server, proc_root)
    if not folder:
        return {"reason": how}
    config, why = _read_json(os.path.join(folder, "config.json"), MAX_CONFIG)
    if config is None:
        return {"where": folder, "how": how, "reason": why}
    if not isinstance(config, dict):
        return {"where": folder, "how": how, "reason": "config.json is not a JSON object"}
    record = {"where": folder, "how": how, "config": config, "index_total_size": None}
    index_path = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index_path):
        index, why = _read_json(index_path, MAX_INDEX)
        total = (index.get("metadata") or {}).get("total_size") if isinstance(index, dict) else None
        if isinstance(total, int) and not isinstance(total, bool) and total > 0:
            record["index_total_size"] = total
        else:
            record["index_reason"] = why or "no metadata.total_size in the index"
    else:
        record["index_reason"] = "no model.safetensors.index.json beside config.json"
    return record


def read_model_configs(servers, proc_root):
    """{pid: {model: record, draft: record}} for every server with a --model-path (draft only when it has one)."""
    out = {}
    for server in servers:
        args = server.get("args") or {}
        found = {}
        for role, flag in ROLES:
            if args.get(flag):
                try:
                    found[role] = read_one(args[flag], server, proc_root)
                except Exception as exc:  # noqa: BLE001 - one odd model never costs the others
                    found[role] = {"reason": "could not be read (%s)" % type(exc).__name__}
        if found:
            out[str(server.get("pid"))] = found
    return out
