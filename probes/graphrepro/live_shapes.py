"""The live deployment's own shapes as the repro's defaults: its model and draft config.json, its TP, its largest
captured batch size and its draft-token count, read from the live server's command line.

A model is found as the server finds it: `--model-path` when it is a directory; else, for a hub id such as
`org/name`, the snapshot huggingface_hub keeps in its cache (`$HF_HUB_CACHE`, else `$HF_HOME/hub`, else
`~/.cache/huggingface/hub`; `models--org--name/refs/main` names the snapshot under `snapshots/`); else the
bundled config, said plainly. Only config.json is read; the server's own HF_HOME counts over the probe's. The
lookup itself lives in probes/hostinfo/hf_cache.py (the deployment probe finds the served model's config the same
way).
"""
import os

from probes.graphrepro import configs
from probes.hostinfo import interpreter
from probes.hostinfo.hf_cache import cache_dirs_for, hub_cache_dirs, hub_snapshot, model_dir

__all__ = ["apply", "cache_dirs_for", "hub_cache_dirs", "hub_snapshot", "model_dir", "hidden_size_from_model"]
DEFAULT_BATCH_SIZES = (1, 4, 16, 64)
MAX_SYNTHETIC_HIDDEN = 16384


def apply(settings, deployment, given, notes):
    """Fill the settings the user left unset (`given`: the option names they set) from the live server whose
    interpreter is used; every choice is a note. A --model / --draft-model given as a hub id is looked up in
    the probe's own cache."""
    resolve_given(settings, notes)
    server = interpreter.chosen_server({"deployment": deployment})
    if server is None:
        if not settings.get("model"):
            notes.append("model: no live server; the bundled Llama-3-8B-shaped config is used")
        return
    args, pid, caches = server.get("args") or {}, server.get("pid"), cache_dirs_for(server)
    for key, arg in (("model", "model_path"), ("draft_model", "speculative_draft_model_path")):
        if settings.get(key) or not args.get(arg):
            continue
        found, how = model_dir(args[arg], caches)
        if found:
            settings[key] = found
            notes.append("%s: config.json from %s (pid %s): %s" % (key, how, pid, found))
        else:
            notes.append("%s: %s; %s" % (key, how, "the bundled Llama-3-8B-shaped config is used" if key == "model"
                                          else "the draft is derived from the target"))
    if settings.get("draft_model") and args.get("speculative_algorithm"):
        settings.setdefault("draft_algorithm", str(args["speculative_algorithm"]).upper())
    server_numbers(settings, args, given, pid, notes)


def resolve_given(settings, notes):
    own = hub_cache_dirs(os.environ)
    for key in ("model", "draft_model"):
        value = settings.get(key)
        if value and not os.path.isfile(os.path.join(str(value), "config.json")):
            found, how = model_dir(value, own)
            settings[key] = found
            notes.append("%s: %s" % (key, ("config.json from %s: %s" % (how, found)) if found else
                                     how + "; " + ("the bundled Llama-3-8B-shaped config is used" if key == "model"
                                                   else "the draft is derived from the target")))


def server_numbers(settings, args, given, pid, notes):
    tp = args.get("tp_size")
    if "tp" not in given and isinstance(tp, int) and tp > 0:
        settings["tp"] = tp
        notes.append("tp: %d, the live server's (pid %s)" % (tp, pid))
    sizes = [s for s in (args.get("cuda_graph_bs") or args.get("cuda_graph_bs_decode") or []) if isinstance(s, int)]
    top = args.get("cuda_graph_max_bs") or args.get("cuda_graph_max_bs_decode") or (max(sizes) if sizes else None)
    if "batch_sizes" not in given and isinstance(top, int) and top > 0:
        settings["batch_sizes"] = sorted(set([b for b in DEFAULT_BATCH_SIZES if b < top] + [top]))
        notes.append("batch sizes up to %d, the live server's largest captured (pid %s)" % (top, pid))
    tokens = args.get("speculative_num_draft_tokens")
    if "draft_tokens" not in given and isinstance(tokens, int) and tokens > 0:
        settings["draft_tokens"] = [min(2, tokens), tokens]
        notes.append("draft tokens up to %d, the live server's (pid %s)" % (tokens, pid))


def hidden_size_from_model(settings, explicit, notes):
    """The synthetic buffers take the served model's hidden size unless one was given."""
    if explicit or not settings.get("model"):
        return
    try:
        hidden = configs.text_config(configs.read_config(settings["model"])).get("hidden_size")
    except configs.ConfigError as exc:
        notes.append(str(exc))
        return
    if isinstance(hidden, int) and 0 < hidden <= MAX_SYNTHETIC_HIDDEN:
        settings["hidden_size"] = hidden
