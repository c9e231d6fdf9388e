"""Where a served model's files are, as the server finds them: `--model-path` when it is a directory; else, for
a hub id such as `org/name`, the snapshot huggingface_hub keeps in its cache (`$HF_HUB_CACHE`, else
`$HF_HOME/hub`, else `~/.cache/huggingface/hub`; `models--org--name/refs/main` names the snapshot under
`snapshots/`). The server's own HF_HUB_CACHE / HF_HOME count over the probe's. Used by the repro
(probes/graphrepro/live_shapes.py) and the deployment probe (probes/hostinfo/model_config.py).
"""
import os
import re

HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


def hub_cache_dirs(env):
    """Where huggingface_hub keeps its cache for this environment, in its own order of precedence."""
    if env.get("HF_HUB_CACHE"):
        return [env["HF_HUB_CACHE"]]
    if env.get("HF_HOME"):
        return [os.path.join(env["HF_HOME"], "hub")]
    home = env.get("HOME") or os.path.expanduser("~")
    return [os.path.join(home, ".cache", "huggingface", "hub")]


def hub_snapshot(model_id, caches):
    """The cached snapshot directory holding config.json for a hub id (refs/main first, else the newest)."""
    text = str(model_id or "")
    if not HUB_ID.match(text) or text.startswith((".", "/")):
        return None
    for cache in caches:
        repo = os.path.join(cache, "models--" + text.replace("/", "--"))
        snapshots = os.path.join(repo, "snapshots")
        candidates = []
        try:
            with open(os.path.join(repo, "refs", "main"), encoding="utf-8") as fh:
                candidates.append(fh.read(200).strip())
        except OSError:
            pass
        try:
            names = sorted(os.listdir(snapshots), key=lambda n: -os.path.getmtime(os.path.join(snapshots, n)))
        except OSError:
            names = []
        for name in candidates + names:
            folder = os.path.join(snapshots, os.path.basename(name))
            if name and os.path.isfile(os.path.join(folder, "config.json")):
                return folder
    return None


def model_dir(value, caches):
    """(directory or None, how it was found)."""
    text = str(value or "")
    if text and os.path.isfile(os.path.join(text, "config.json")):
        return text, "the live server's --model-path directory"
    snapshot = hub_snapshot(text, caches)
    if snapshot:
        return snapshot, "the Hugging Face cache snapshot of %s" % text
    return None, "%s is neither a local directory with config.json nor in the Hugging Face cache (%s)" % (
        text, ", ".join(caches))


def cache_dirs_for(server):
    """The caches the server would read (its own HF_HUB_CACHE / HF_HOME, as far as its environment was
    readable), then the probe's own."""
    own = dict((k, v) for k, v in os.environ.items() if k in ("HF_HUB_CACHE", "HF_HOME", "HOME"))
    seen = dict((k, v) for k, v in (server.get("env") or {}).items() if k in ("HF_HUB_CACHE", "HF_HOME") and v)
    dirs = []
    for folder in (hub_cache_dirs(dict(seen, HOME=own.get("HOME", ""))) if seen else []) + hub_cache_dirs(own):
        if folder not in dirs:
            dirs.append(folder)
    return dirs
