"""Pure parsers for sglang server processes: command lines, server flags and an allow-listed environment.

Secrets never leave this module: environment entries outside the allow-list are dropped as they are
parsed, and flag values whose names look secret (api keys, tokens) are replaced by a marker.
"""
import json
import os
import re
import shlex

# The redaction rules live in one place; these names are part of this module's interface too.
from probes.hostinfo.secrets import (REDACTED, looks_secret, looks_secret_env, redact_argv,  # noqa: F401
                                     secret_flag, without_credentials)

SERVER_MODULES = ("sglang.launch_server", "sglang.srt.server", "sglang.srt.entrypoints.http_server")
SHELLS = ("sh", "bash", "dash", "zsh", "ash", "ksh")

ENV_NAMES = ("CUDA_VISIBLE_DEVICES", "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV",
             "TORCH_CUDA_ARCH_LIST", "CUDA_HOME", "CUDA_PATH", "CUDA_DEVICE_ORDER", "CUDA_LAUNCH_BLOCKING",
             "CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_MODULE_LOADING", "NVIDIA_VISIBLE_DEVICES",
             "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_NVML_BASED_CUDA_CHECK", "OMP_NUM_THREADS", "LD_LIBRARY_PATH",
             "PATH", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "HF_HOME", "HF_HUB_OFFLINE")
ENV_PREFIXES = ("SGLANG_", "SGL_", "NCCL_", "FLASHINFER_", "TORCH_NCCL_")
ALIASES = {"tp": "tp_size", "tensor_parallel_size": "tp_size", "dp": "dp_size", "data_parallel_size": "dp_size",
           "ep": "ep_size", "expert_parallel_size": "ep_size", "model": "model_path",
           "speculative_draft_model": "speculative_draft_model_path",
           "speculative_draft": "speculative_draft_model_path", "context_bucket": "cuda_graph_prefill_max_context"}
# Deprecated spellings keep their own keys (--cuda-graph-max-bs is its own flag before 0.5.14, an alias of
# --cuda-graph-max-bs-decode from then on): readers see exactly what the command line said.
INT_FLAGS = ("tp_size", "dp_size", "ep_size", "speculative_num_draft_tokens", "speculative_num_steps",
             "speculative_eagle_topk", "cuda_graph_max_bs", "port",
             # sglang 0.5.14+: per-phase CUDA graph settings (arg_groups/fields/exec_.py in 0.5.23).
             "cuda_graph_max_bs_decode", "cuda_graph_max_bs_prefill", "cuda_graph_max_seq_len_prefill",
             "cuda_graph_prefill_max_context", "piecewise_cuda_graph_max_tokens")
FLOAT_FLAGS = ("mem_fraction_static",)
BOOL_FLAGS = ("disable_cuda_graph", "enable_dp_attention", "disable_decode_cuda_graph", "disable_prefill_cuda_graph",
              "disable_cuda_graph_padding", "debug_cuda_graph", "enable_breakable_cuda_graph",
              "enable_piecewise_cuda_graph", "disable_piecewise_cuda_graph", "enforce_piecewise_cuda_graph")
STRING_FLAGS = ("model_path", "speculative_algorithm", "speculative_draft_model_path", "host",
                "cuda_graph_backend_decode", "cuda_graph_backend_prefill", "cuda_graph_tc_compiler",
                "piecewise_cuda_graph_compiler")
INT_LIST_FLAGS = ("cuda_graph_bs", "cuda_graph_bs_decode", "cuda_graph_bs_prefill", "piecewise_cuda_graph_tokens")
# JSON objects: parsed to a dict; a value that is not JSON stays raw (and visible).
JSON_FLAGS = ("cuda_graph_config",)
# store_true flags: never swallow the next word as their value.
KNOWN_SWITCHES = frozenset(BOOL_FLAGS + ("trust_remote_code", "enable_torch_compile", "disable_radix_cache",
                                         "skip_server_warmup", "enable_metrics", "disable_overlap_schedule",
                                         "debug_cuda_graph", "enable_mixed_chunk", "log_requests",
                                         "enable_ep_moe", "enable_deepep_moe", "disable_custom_all_reduce"))

_FLAG = re.compile(r"^--?[A-Za-z]")


def parse_cmdline(raw):
    """/proc/PID/cmdline bytes → argv (NUL-separated; a trailing NUL is not an argument)."""
    if not raw:
        return []
    parts = raw.decode("utf-8", "replace").split("\0")
    if parts and parts[-1] == "":
        parts.pop()
    return parts


def _python_like(word):
    return bool(re.match(r"^(python|pypy)[0-9.]*[a-z]?$", os.path.basename(word or "")))


python_like = _python_like  # a path or name that names a Python interpreter


def _interpreter_before(argv, index):
    for word in reversed(argv[:index]):
        if _python_like(word):
            return word
    return None


def find_launch(argv):
    """{entry, args, interpreter, embedded} when argv starts an sglang server, else None."""
    for i, word in enumerate(argv):
        module = argv[i + 1] if word == "-m" and i + 1 < len(argv) else (word[2:] if word.startswith("-m") and
                                                                       len(word) > 2 and "." in word else None)
        step = 2 if word == "-m" else 1
        if module in SERVER_MODULES:
            return _launch("python -m " + module, argv, i + step, _interpreter_before(argv, i))
        if module and module.split(".")[0] == "sglang" and argv[i + step:i + step + 1] == ["serve"]:
            return _launch("python -m %s serve" % module, argv, i + step + 1, _interpreter_before(argv, i))
        if os.path.basename(word) == "sglang" and argv[i + 1:i + 2] == ["serve"]:
            return _launch("sglang serve", argv, i + 2, _interpreter_before(argv, i))
        if (word == "sglang/launch_server.py" or word.endswith("/sglang/launch_server.py")) and i > 0 \
                and _python_like(argv[i - 1]):
            return _launch("python sglang/launch_server.py", argv, i + 1, argv[i - 1])
    return _embedded_launch(argv)


def _launch(entry, argv, start, interpreter):
    return {"entry": entry, "args": list(argv[start:]), "interpreter": interpreter, "embedded": False}


def _embedded_launch(argv):
    """`bash -c "python -m sglang.launch_server ..."`: the shell's command string holds the launch."""
    if not argv or os.path.basename(argv[0]) not in SHELLS:
        return None
    for i, word in enumerate(argv[1:-1], start=1):
        if word.startswith("-") and word.endswith("c") and "sglang" in argv[i + 1]:
            try:
                lexer = shlex.shlex(argv[i + 1], posix=True, punctuation_chars=True)
                lexer.whitespace_split = True
                inner = list(lexer)
            except ValueError:
                return None
            found = find_launch(inner) if not (inner and os.path.basename(inner[0]) in SHELLS) else None
            if found:
                found["embedded"] = True
                for cut, token in enumerate(found["args"]):  # the launch ends at the next shell operator
                    if token and set(token) <= set(";&|()<>"):
                        # `2>&1`: the lexer splits off the fd number; it belongs to the redirection.
                        if token[0] in "<>" and cut and found["args"][cut - 1].isdigit():
                            cut -= 1
                        found["args"] = found["args"][:cut]
                        break
            return found
    return None


def normalize_flag(name):
    key = name.strip().lower().replace("-", "_")
    return ALIASES.get(key, key)


def split_flags(args):
    """argv after the launch → ({normalized flag: raw value}, positional); `--a b`, `--a=b`, `--a b c`, `--a`."""
    flags, positional, i = {}, [], 0
    while i < len(args):
        word = args[i]
        if not (word.startswith("--") and len(word) > 2):
            positional.append(word)
            i += 1
            continue
        name, eq, value = word[2:].partition("=")
        key = normalize_flag(name)
        i += 1
        if eq:
            flags[key] = value
            continue
        values = []
        secret = secret_flag(key)   # its value may start with "-": take every word up to the next --flag
        while key not in KNOWN_SWITCHES and i < len(args) and not (
                _FLAG.match(args[i]) and (not secret or args[i].startswith("--"))):
            values.append(args[i])
            i += 1
        flags[key] = True if not values else values[0] if len(values) == 1 else values
    return flags, positional


def _typed(key, raw):
    """A known flag's value in its type; a value that does not convert stays raw (and visible)."""
    try:
        if key in BOOL_FLAGS:
            return raw if isinstance(raw, bool) else str(raw).strip().lower() in ("1", "true", "yes", "on")
        if key in INT_LIST_FLAGS:
            items = raw if isinstance(raw, list) else str(raw).replace(",", " ").split()
            return [int(item) for item in items]
        if isinstance(raw, (list, bool)):
            return raw
        if key in JSON_FLAGS:
            value = json.loads(raw)
            return value if isinstance(value, dict) else raw
        if key in INT_FLAGS:
            return _int(raw)
        if key in FLOAT_FLAGS:
            return float(raw)
    except (TypeError, ValueError):
        return raw
    return raw


_SIZE = re.compile(r"^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)$")
_SIZE_SCALE = {"k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12,
               "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40}


def _int(raw):
    """`256`, or a size as sglang's human_readable_int reads it (--cuda-graph-prefill-max-context): `32k`, `1Mi`."""
    text = str(raw).strip()
    match = _SIZE.match(text)
    if match:
        return int(float(match.group(1)) * _SIZE_SCALE[match.group(2)])
    return int(text)


def parse_server_args(args):
    """Every known flag typed (None / False when absent), every other flag raw; secret-looking values redacted."""
    flags, positional = split_flags(args)
    parsed = {}
    for key in STRING_FLAGS + INT_FLAGS + FLOAT_FLAGS + INT_LIST_FLAGS + JSON_FLAGS:
        parsed[key] = _typed(key, flags[key]) if key in flags else None
    for key in BOOL_FLAGS:
        parsed[key] = _typed(key, flags[key]) if key in flags else False
    for key, raw in flags.items():
        if key not in parsed:
            parsed[key] = REDACTED if secret_flag(key) and raw is not True else raw
    return {key: without_credentials(value) for key, value in parsed.items()}, \
        [without_credentials(word) for word in positional]


def allowed_env_name(name):
    if looks_secret_env(name):
        return False
    return name in ENV_NAMES or name.startswith(ENV_PREFIXES)


def parse_environ(raw):
    """/proc/PID/environ bytes → only the allow-listed variables; everything else is dropped unread."""
    kept = {}
    for entry in (raw or b"").split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if not sep:
            continue
        name_text = name.decode("utf-8", "replace")
        if allowed_env_name(name_text):
            kept[name_text] = without_credentials(value.decode("utf-8", "replace"))
    return kept


def parse_stat(text):
    """/proc/PID/stat → {ppid, starttime_ticks}; the command name may hold spaces and parentheses."""
    head, sep, rest = (text or "").rpartition(")")
    fields = rest.split() if sep else []
    if len(fields) < 20:
        return {"ppid": None, "starttime_ticks": None}
    try:
        return {"ppid": int(fields[1]), "starttime_ticks": int(fields[19])}
    except ValueError:
        return {"ppid": None, "starttime_ticks": None}
