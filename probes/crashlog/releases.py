"""Which sglang release wrote a log, and how that release spells the flags that advice names.

Read from the log itself (a version printed, files in tracebacks, the server_args dump), else the
installed release when the caller knows it. Flag names verified against the releases' own argument
parsers (0.4.10, 0.5.11, 0.5.14, 0.5.23 wheels): --enable-piecewise-cuda-graph exists up to 0.5.13,
--disable-prefill-cuda-graph and --cuda-graph-max-bs-decode from 0.5.14, --cuda-graph-max-bs is an alias
from 0.5.14 and gone by 0.5.20. Older layouts (0.1.17, 0.2.15, 0.3.0, 0.3.2, 0.3.4, 0.3.5, 0.3.6 wheels read):
0.1.17 has no CUDA graphs (nor --disable-cuda-graph); up to 0.3.2 sglang's records carry only the time
(`[12:00:00 TP0]`) and tracebacks pass managers/controller_single.py or policy_scheduler.py, both gone by 0.3.4;
--cuda-graph-max-bs arrived in 0.3.5.
"""
import re

SPLIT = (0, 5, 14)
VERSION = re.compile(r"sglang(?:\s*[=:]=?\s*|-|\s+version:?\s*|\s+)v?(\d+\.\d+\.\d+)(?:\.post\d+|rc\d+)?")
# Text that exists only from 0.5.14 on (among the wheels read), or only before it. Plain substrings: a log
# is megabytes, and a substring test is a memchr where a regular expression walks every character.
NEW_MARKERS = (
    ("dflash_worker_v2.py", "dflash_worker_v2.py"),
    ("model_executor/runner_backend", "model_executor/runner_backend*/"),
    ("model_executor/runner_utils/", "model_executor/runner_utils/"),
    ("model_executor/model_runner_components/", "model_executor/model_runner_components/"),
    ("cuda_graph_max_bs_decode", "cuda_graph_max_bs_decode"),
    ("cuda-graph-max-bs-decode", "cuda_graph_max_bs_decode"),
    ("disable_prefill_cuda_graph", "disable_prefill_cuda_graph"),
    ("disable-prefill-cuda-graph", "disable_prefill_cuda_graph"),
)
OLD_MARKERS = (
    ("model_executor/cuda_graph_runner.py", "model_executor/cuda_graph_runner.py"),
    ("model_executor/piecewise_cuda_graph_runner.py", "*_cuda_graph_runner.py"),
    ("model_executor/breakable_cuda_graph_runner.py", "*_cuda_graph_runner.py"),
    ("speculative/dflash_worker.py", "speculative/dflash_worker.py"),
    ("speculative/eagle_worker.py", "speculative/eagle_worker.py"),
    ("enable_piecewise_cuda_graph", "enable_piecewise_cuda_graph"),
    ("enable-piecewise-cuda-graph", "enable_piecewise_cuda_graph"),
)


# Releases older than `upper`, told apart by what their logs show: (marker, what it is, upper).
ANCIENT_MARKERS = (
    ("managers/router/model_rpc.py", "managers/router/model_rpc.py", "0.2.0"),
    ("managers/controller/tp_worker.py", "managers/controller/tp_worker.py", "0.2.0"),
    ("managers/controller_single.py", "managers/controller_single.py", "0.3.4"),
    ("managers/controller_multi.py", "managers/controller_multi.py", "0.3.4"),
    ("managers/policy_scheduler.py", "managers/policy_scheduler.py", "0.3.4"),
)
# A record header with the time but no date (it cannot be found inside a dated one: "[" comes before the date).
UNDATED_HEADER = re.compile(r"\[\d\d:\d\d:\d\d(?: (?:TP|DP)\d+)*\] ")
NO_GRAPHS_BEFORE = (0, 2, 0)      # 0.1.17 captures no CUDA graphs
MAX_BS_FROM = (0, 3, 5)           # --cuda-graph-max-bs


def _version_in(text):
    """The first "sglang X.Y.Z" (sglang==, sglang-, sglang:, "sglang version") in the text, any case."""
    low = text.lower()
    at = low.find("sglang")
    while at >= 0:
        found = VERSION.match(low, at)
        if found and parse_version(found.group(1)):
            return found.group(1)
        at = low.find("sglang", at + 6)
    return None


def parse_version(text):
    try:
        return tuple(int(p) for p in str(text).split(".")[:3])
    except (TypeError, ValueError):
        return None


def infer_release(text, installed=None, raw=None):
    """{release, generation: "0.5.14+"|"before 0.5.14"|None, basis, and `before` when only an upper bound is
    known}. `text`: the log's lines without their prefixes; `raw`: the log as written (record headers kept)."""
    version = _version_in(text)
    if version:
        return {"release": version, "generation": _generation(parse_version(version)),
                "basis": "the log names sglang %s" % version}
    for marker, name in NEW_MARKERS:
        if marker in text:
            return {"release": None, "generation": "0.5.14+",
                    "basis": "the log shows %s, which sglang has from 0.5.14 on" % name}
    for marker, name, upper in ANCIENT_MARKERS:
        if marker in text:
            return {"release": None, "generation": "before 0.5.14", "before": upper,
                    "basis": "the log shows %s, which sglang has only before %s" % (name, upper)}
    if UNDATED_HEADER.search(text if raw is None else raw):
        return {"release": None, "generation": "before 0.5.14", "before": "0.3.4",
                "basis": "the log's records carry the time without the date, as sglang's do only before 0.3.4"}
    for marker, name in OLD_MARKERS:
        if marker in text:
            return {"release": None, "generation": "before 0.5.14",
                    "basis": "the log shows %s, which sglang has only before 0.5.14" % name}
    if installed and parse_version(installed):
        return {"release": installed, "generation": _generation(parse_version(installed)),
                "basis": "the installed release (%s); the log does not say which release wrote it" % installed}
    return {"release": None, "generation": None,
            "basis": "the log does not say which release wrote it, and no installed release is known"}


def _generation(version):
    return "0.5.14+" if version >= SPLIT else "before 0.5.14"


def flag_words(generation, release=None, before=None):
    """The words advice templates use, in the spelling of the release (or of releases older than `before`)."""
    version = parse_version(release) if release else None
    below = parse_version(before) if before and not version else None    # every release it can be is older
    if (version and version < MAX_BS_FROM) or (below and below <= MAX_BS_FROM):
        return _ancient_words((version and version < NO_GRAPHS_BEFORE) or (below and below <= NO_GRAPHS_BEFORE))
    if generation == "0.5.14+":
        return {"max_bs": "--cuda-graph-max-bs-decode", "prefill_graphs_off": "--disable-prefill-cuda-graph",
                "piecewise_off": "--disable-prefill-cuda-graph",
                "graphs_off": "--disable-cuda-graph", "mem_fraction": "--mem-fraction-static"}
    if generation == "before 0.5.14":
        piecewise = version is None or version >= (0, 5, 0)
        return {"max_bs": "--cuda-graph-max-bs",
                "prefill_graphs_off": "drop --enable-piecewise-cuda-graph" if piecewise
                else "leave prefill graphs off (this release has none)",
                # Releases that turn piecewise graphs on by default take --disable-piecewise-cuda-graph.
                "piecewise_off": "--disable-piecewise-cuda-graph (or drop --enable-piecewise-cuda-graph)" if piecewise
                else "leave prefill graphs off (this release has none)",
                "graphs_off": "--disable-cuda-graph", "mem_fraction": "--mem-fraction-static"}
    return {"max_bs": "--cuda-graph-max-bs-decode (0.5.14+) or --cuda-graph-max-bs (before 0.5.14)",
            "prefill_graphs_off": "--disable-prefill-cuda-graph (0.5.14+) or drop --enable-piecewise-cuda-graph "
                                  "(before 0.5.14)",
            "piecewise_off": "--disable-prefill-cuda-graph (0.5.14+) or --disable-piecewise-cuda-graph (before "
                             "0.5.14)",
            "graphs_off": "--disable-cuda-graph", "mem_fraction": "--mem-fraction-static"}


def _ancient_words(no_graphs):
    """Releases without --cuda-graph-max-bs (before 0.3.5), and those without CUDA graphs (0.1.x)."""
    if no_graphs:
        none = "nothing (this release captures no CUDA graphs)"
        return {"max_bs": none, "prefill_graphs_off": none, "piecewise_off": none, "graphs_off": none,
                "mem_fraction": "--mem-fraction-static"}
    return {"max_bs": "a smaller CUDA-graph batch-size limit (this release has no flag for it; later ones do)",
            "prefill_graphs_off": "leave prefill graphs off (this release has none)",
            "piecewise_off": "leave prefill graphs off (this release has none)",
            "graphs_off": "--disable-cuda-graph", "mem_fraction": "--mem-fraction-static"}


def assumed(info):
    if info.get("before") and not info.get("release"):
        return "sglang before %s" % info["before"]
    if info.get("release"):
        return "sglang %s (%s)" % (info["release"], info["generation"])
    if info.get("generation"):
        return "sglang %s" % info["generation"]
    return "an unknown sglang release (both spellings given)"
