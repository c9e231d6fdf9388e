"""Which sglang release wrote a log, and how that release spells the flags that advice names.

Read from the log itself (a version printed, files in tracebacks, the server_args dump), else the
installed release when the caller knows it. Flag names verified against the releases' own argument
parsers (0.4.10, 0.5.11, 0.5.14, 0.5.23 wheels): --enable-piecewise-cuda-graph exists up to 0.5.13,
--disable-prefill-cuda-graph and --cuda-graph-max-bs-decode from 0.5.14, --cuda-graph-max-bs is an alias
from 0.5.14 and gone by 0.5.20.
"""
import re

SPLIT = (0, 5, 14)
VERSION = re.compile(r"sglang(?:[ =:]=?|-| version:? |\s+)v?(\d+\.\d+\.\d+)(?:\.post\d+|rc\d+)?")
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


def infer_release(text, installed=None):
    """{release, generation: "0.5.14+"|"before 0.5.14"|None, basis}."""
    version = _version_in(text)
    if version:
        return {"release": version, "generation": _generation(parse_version(version)),
                "basis": "the log names sglang %s" % version}
    for marker, name in NEW_MARKERS:
        if marker in text:
            return {"release": None, "generation": "0.5.14+",
                    "basis": "the log shows %s, which sglang has from 0.5.14 on" % name}
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


def flag_words(generation, release=None):
    """The words advice templates use, in the spelling of the release."""
    version = parse_version(release) if release else None
    if generation == "0.5.14+":
        return {"max_bs": "--cuda-graph-max-bs-decode", "prefill_graphs_off": "--disable-prefill-cuda-graph",
                "graphs_off": "--disable-cuda-graph", "mem_fraction": "--mem-fraction-static"}
    if generation == "before 0.5.14":
        piecewise = version is None or version >= (0, 5, 0)
        return {"max_bs": "--cuda-graph-max-bs",
                "prefill_graphs_off": "drop --enable-piecewise-cuda-graph" if piecewise
                else "leave prefill graphs off (this release has none)",
                "graphs_off": "--disable-cuda-graph", "mem_fraction": "--mem-fraction-static"}
    return {"max_bs": "--cuda-graph-max-bs-decode (0.5.14+) or --cuda-graph-max-bs (before 0.5.14)",
            "prefill_graphs_off": "--disable-prefill-cuda-graph (0.5.14+) or drop --enable-piecewise-cuda-graph "
                                  "(before 0.5.14)",
            "graphs_off": "--disable-cuda-graph", "mem_fraction": "--mem-fraction-static"}


def assumed(info):
    if info.get("release"):
        return "sglang %s (%s)" % (info["release"], info["generation"])
    if info.get("generation"):
        return "sglang %s" % info["generation"]
    return "an unknown sglang release (both spellings given)"
