"""Which sglang release wrote a log, and how that release spells the flags that advice names.

Read from the log itself (a version printed, files in tracebacks, the server_args dump), else the
installed release when the caller knows it. Flag names verified against the releases' own argument
parsers (0.4.10, 0.5.11, 0.5.14, 0.5.23 wheels): --enable-piecewise-cuda-graph exists up to 0.5.13,
--disable-prefill-cuda-graph and --cuda-graph-max-bs-decode from 0.5.14, --cuda-graph-max-bs is an alias
from 0.5.14 and gone by 0.5.20.
"""
import re

SPLIT = (0, 5, 14)
VERSION = re.compile(r"(?:\bsglang(?:[ =:]=?|-| version:? )v?|\bsglang\s+v)(\d+\.\d+\.\d+)(?:\.post\d+|rc\d+)?", re.I)
# Files and names that exist only from 0.5.14 on (among the wheels read), or only before it.
NEW_MARKERS = (
    (re.compile(r"dflash_worker_v2\.py"), "dflash_worker_v2.py"),
    (re.compile(r"model_executor/runner_backend(_utils)?/"), "model_executor/runner_backend*/"),
    (re.compile(r"model_executor/runner_utils/"), "model_executor/runner_utils/"),
    (re.compile(r"model_executor/model_runner_components/"), "model_executor/model_runner_components/"),
    (re.compile(r"\bcuda_graph_max_bs_decode=|--cuda-graph-max-bs-decode\b"), "cuda_graph_max_bs_decode"),
    (re.compile(r"\bdisable_prefill_cuda_graph=|--disable-prefill-cuda-graph\b"), "disable_prefill_cuda_graph"),
)
OLD_MARKERS = (
    (re.compile(r"model_executor/cuda_graph_runner\.py"), "model_executor/cuda_graph_runner.py"),
    (re.compile(r"model_executor/(piecewise|breakable)_cuda_graph_runner\.py"), "*_cuda_graph_runner.py"),
    (re.compile(r"speculative/dflash_worker\.py"), "speculative/dflash_worker.py"),
    (re.compile(r"speculative/eagle_worker\.py"), "speculative/eagle_worker.py"),
    (re.compile(r"\benable_piecewise_cuda_graph=|--enable-piecewise-cuda-graph\b"), "enable_piecewise_cuda_graph"),
)


def parse_version(text):
    try:
        return tuple(int(p) for p in str(text).split(".")[:3])
    except (TypeError, ValueError):
        return None


def infer_release(text, installed=None):
    """{release, generation: "0.5.14+"|"before 0.5.14"|None, basis}."""
    found = VERSION.search(text)
    if found and parse_version(found.group(1)):
        version = found.group(1)
        return {"release": version, "generation": _generation(parse_version(version)),
                "basis": "the log names sglang %s" % version}
    for pattern, name in NEW_MARKERS:
        if pattern.search(text):
            return {"release": None, "generation": "0.5.14+",
                    "basis": "the log shows %s, which sglang has from 0.5.14 on" % name}
    for pattern, name in OLD_MARKERS:
        if pattern.search(text):
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
