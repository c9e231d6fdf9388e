"""copy_bench options (`--set copy_bench.KEY=VALUE`): defaults per device, values from the live server's
flags (deployment probe), validation with one-line errors naming the option.
"""
from probes.copybench import declared, strategies, workloads

KIB, MIB = declared.KIB, declared.MIB

# Declared once with their help text (probes/copybench/declared.py): per device, and device-independent.
DEFAULTS = declared.DEFAULTS
COMMON = declared.COMMON
# Server flags (deployment probe) that set the workload shapes when the options do not.
FROM_SERVER = {"topk": "speculative_eagle_topk", "steps": "speculative_num_steps",
               "draft_tokens": "speculative_num_draft_tokens"}
_INT_LISTS = ("batch_sizes", "hidden_sizes", "gpus")
_NAME_LISTS = {"paths": workloads.PATHS, "strategies": strategies.STRATEGIES}
_INTS = ("samples", "max_iters", "sweep_min_bytes", "sweep_max_bytes", "sweep_factor", "topk", "steps",
         "draft_tokens", "max_mem_mib", "busy_memory_mib", "graph_copies", "split_bytes", "cpu_threads")
_DTYPES = ("bfloat16", "float16", "float32")


class OptionError(ValueError):
    """A copy_bench option with a value the probe cannot use; the message names it."""


def known_options():
    return sorted(set(COMMON) | set(DEFAULTS["cuda"]))


def _as_list(key, value):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value]
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)) or not value:
        raise OptionError("copy_bench.%s: expected a non-empty list, got %r" % (key, value))
    return list(value)


def _positive_int(key, value, minimum=1):
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise OptionError("copy_bench.%s: expected an integer, got %r" % (key, value)) from None
    if number < minimum or isinstance(value, bool):
        raise OptionError("copy_bench.%s: expected an integer ≥ %d, got %r" % (key, minimum, value))
    return number


def _bool(key, value):
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise OptionError("copy_bench.%s: expected true or false, got %r" % (key, value))


def server_args(results):
    """The parsed flags of the live server whose interpreter the probes use, from deployment's data."""
    from probes.hostinfo.interpreter import chosen_server
    server = chosen_server(results) or {}
    return server["args"] if isinstance(server.get("args"), dict) else {}


def resolve(raw, device, results=None):
    """(settings, sources): every option with its value and where it came from (option|server|default)."""
    raw = dict(raw or {})
    unknown = sorted(k for k in raw if k not in known_options())
    if unknown:
        raise OptionError("copy_bench: unknown option %s (known: %s)" % (", ".join(unknown),
                                                                      ", ".join(known_options())))
    settings, sources = dict(COMMON), {}
    settings.update(DEFAULTS[device])
    server = server_args(results)
    for key, flag in FROM_SERVER.items():
        if server.get(flag) not in (None, ""):
            settings[key], sources[key] = server[flag], "server"
    for key, value in raw.items():
        settings[key], sources[key] = value, "option"
    settings = _validate(settings)
    live = live_batch_size(server)
    if live is not None:
        settings["live_batch_size"], sources["live_batch_size"] = live, "server"
        if "batch_sizes" not in raw and live not in settings["batch_sizes"]:
            # the size the live server replays at is the one its cost per decode step is read at
            settings["batch_sizes"] = sorted(settings["batch_sizes"] + [live])
            sources["batch_sizes"] = "server"
    return settings, sources


def live_batch_size(args):
    """The largest decode batch size the live server captures graphs for, from its flags; None when unset."""
    for key in ("cuda_graph_max_bs_decode", "cuda_graph_max_bs"):
        try:
            value = int(args.get(key))
        except (TypeError, ValueError):
            continue
        if value > 0:
            return value
    for key in ("cuda_graph_bs_decode", "cuda_graph_bs"):
        raw = args.get(key)
        items = raw if isinstance(raw, list) else str(raw or "").replace(",", " ").split()
        try:
            sizes = [int(v) for v in items]
        except (TypeError, ValueError):
            continue
        if sizes and max(sizes) > 0:
            return max(sizes)
    return None


def _validate(s):
    for key in _INT_LISTS:
        if s[key] is not None:
            s[key] = [_positive_int(key, v, 0 if key == "gpus" else 1) for v in _as_list(key, s[key])]
    for key, allowed in _NAME_LISTS.items():
        s[key] = [str(v) for v in _as_list(key, s[key])]
        bad = [v for v in s[key] if v not in allowed]
        if bad:
            raise OptionError("copy_bench.%s: unknown %s (known: %s)" % (key, ", ".join(bad), ", ".join(allowed)))
    for key in _INTS:
        if s[key] is not None:
            s[key] = _positive_int(key, s[key])
    s["samples"] = max(3, s["samples"])
    s["target_us"] = float(s["target_us"])
    for key in ("graph", "h2d"):
        s[key] = _bool(key, s[key])
    if s["isolate"] is not None:
        s["isolate"] = _bool("isolate", s["isolate"])
    for key in ("hidden_dtype", "sweep_dtype"):
        if s[key] not in _DTYPES:
            raise OptionError("copy_bench.%s: expected one of %s, got %r" % (key, ", ".join(_DTYPES), s[key]))
    if str(s["device"]) not in ("auto", "cpu", "cuda"):
        raise OptionError("copy_bench.device: expected auto, cpu or cuda, got %r" % s["device"])
    if s["sweep_min_bytes"] > s["sweep_max_bytes"]:
        raise OptionError("copy_bench.sweep_min_bytes is larger than sweep_max_bytes")
    return s


def resolve_isolate(raw):
    """copy_bench.isolate as given (True/False), None when not given; a bad value is an OptionError."""
    value = (raw or {}).get("isolate")
    return None if value is None else _bool("isolate", value)
