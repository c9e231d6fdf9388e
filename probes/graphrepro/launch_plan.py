"""The sglang launch for one repro cell, in the flags the installed release's own parser accepts.

Flags come from sglang_source's server_flags (read from the release's source): each one is spelled as
the release spells it, dropped (and listed) when the release lacks it, and its value is checked against
the release's `choices`. Before the first launch the serving interpreter is asked to import the
server's entry module, so a runtime dependency missing from that venv is named as the skip reason
instead of reading as a crash.
"""
import json
import re

from probes.context import run_command

ENTRY_MODULE = "sglang.launch_server"
# A table holding this flag was read with the repro's own flags in its pattern: every flag can be judged.
# A narrower table (an older probe, a custom flag_pattern) only judges the graph and speculative flags.
COMPLETE_MARK = "--model-path"
JUDGED = re.compile(r"speculative|cuda-graph|draft")
# Canonical spelling -> the spellings releases used, newest last (0.5.14 split graph sizes per phase).
ALTERNATIVES = {"--cuda-graph-max-bs": ("--cuda-graph-max-bs", "--cuda-graph-max-bs-decode"),
                "--cuda-graph-bs": ("--cuda-graph-bs", "--cuda-graph-bs-decode"),
                "--speculative-draft-model-path": ("--speculative-draft-model-path", "--speculative-draft-model"),
                "--tp-size": ("--tp-size", "--tensor-parallel-size")}
MISSING_MODULE = re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '?([\w.]+)'?")
# An import that fails for another reason, or a shared library a dependency needs (libcudart, libnuma).
IMPORT_FAILURE = re.compile(r"^(ImportError|OSError): (.+)$", re.M)
_import_checks = {}


def normalise_flag(name):
    return "--" + str(name).lstrip("-").replace("_", "-")


def flag_table(server_flags):
    """{flag: {choices, deprecated}} for the installed release, or None when unknown."""
    if not server_flags:
        return None
    table = {}
    for entry in server_flags:
        entry = entry if isinstance(entry, dict) else {"name": entry}
        if entry.get("name"):
            choices = entry.get("choices")
            table[normalise_flag(entry["name"])] = {
                "choices": [str(c) for c in choices] if isinstance(choices, list) else None,
                "deprecated": bool(entry.get("deprecated"))}
    return table


def spell(flag, table):
    """The release's spelling of `flag` (a current one over a deprecated alias), or None when it has none."""
    if table is None or (COMPLETE_MARK not in table and not JUDGED.search(flag)):
        return flag
    present = [c for c in ALTERNATIVES.get(flag, (flag,)) if c in table]
    current = [c for c in present if not table[c]["deprecated"]]
    return (current or present or [None])[0]


def model_override(cell):
    """--json-model-override-args: what the caller asked for, plus DFlash's layer cut.

    A DFlash launch is a target plus a DFlash draft with the layer cut passed as an override and dummy
    weights for both, as sglang's DFlash reproductions are run; the override reaches the draft's config
    too (0.5.x reads the draft config with it), which the draft's reduced config already agrees with.
    """
    override = dict(cell.get("model_override") or {})
    if cell["algorithm"] == "DFLASH" and cell.get("layers"):
        override.setdefault("num_hidden_layers", int(cell["layers"]))
    return override


def wanted_flags(cell):
    """(flag, value) pairs in canonical spelling; value None for a switch, a list for several values."""
    wanted = [
        ("--model-path", cell["model_dir"]), ("--load-format", "dummy"),
        ("--host", "127.0.0.1"), ("--port", str(cell["port"])), ("--tp-size", str(cell.get("tp", 1))),
        ("--speculative-algorithm", cell["algorithm"]),
        ("--speculative-draft-model-path", cell["draft_dir"]),
        ("--speculative-draft-load-format", "dummy"),
        ("--speculative-num-draft-tokens", str(cell["draft_tokens"])),
        ("--cuda-graph-max-bs", str(max(cell["batch_sizes"]))),
        ("--cuda-graph-bs", [str(b) for b in sorted(cell["batch_sizes"])]),
        ("--mem-fraction-static", str(cell.get("mem_fraction", 0.5))),
        ("--skip-tokenizer-init", None),
    ]
    override = model_override(cell)
    if override:
        wanted.append(("--json-model-override-args", json.dumps(override, sort_keys=True)))
    if cell["algorithm"] in ("EAGLE", "EAGLE3"):
        wanted += [("--speculative-num-steps", str(cell["steps"])),
                   ("--speculative-eagle-topk", str(cell.get("topk", 1)))]
    return wanted


def build_argv(python, cell, flags):
    """argv for one server; returns (argv, omitted flags). One launch captures graphs for every batch size."""
    table = flag_table(flags)
    argv, omitted = [python, "-m", ENTRY_MODULE], []
    for flag, value in wanted_flags(cell):
        spelled = spell(flag, table)
        if spelled is None:
            omitted.append(flag)
            continue
        argv.append(spelled)
        if isinstance(value, list):
            argv.extend(value)
        elif value is not None:
            argv.append(value)
    return argv, omitted


def rejected_values(argv, flags):
    """['--flag VALUE (accepts a, b)'] for values the release's parser would refuse by its choices."""
    table = flag_table(flags) or {}
    rejected = []
    for index, word in enumerate(argv[:-1]):
        choices = (table.get(word) or {}).get("choices") if word.startswith("--") else None
        value = argv[index + 1]
        if choices and not value.startswith("--") and value not in choices:
            rejected.append("%s %s (accepts %s)" % (word, value, ", ".join(choices)))
    return rejected


def missing_dependency(python, env=None, timeout=120.0):
    """None when `python` imports the server's entry module; else why not, naming the missing module.

    Asked once per interpreter and environment. Only an import failure counts: anything else (a stand-in
    interpreter, a slow host) is left to the launch itself to show.
    """
    key = (python, tuple(sorted((env or {}).items())))
    if key not in _import_checks:
        code = "import importlib; importlib.import_module(%r)" % ENTRY_MODULE
        answer = run_command([python, "-c", code], timeout=timeout, env=env)
        _import_checks[key] = import_failure(answer.get("stderr") or "", python)
    return _import_checks[key]


def import_failure(text, python):
    """The skip reason an import traceback gives, or None when the text shows no import failure."""
    missing = MISSING_MODULE.findall(text)
    if missing:
        return "sglang cannot start under %s: module %r is not installed there (a runtime dependency of %s)" % (
            python, missing[-1], ENTRY_MODULE)
    failed = [f for f in IMPORT_FAILURE.findall(text) if f[0] == "ImportError" or "shared object" in f[1]]
    if failed:
        return "sglang cannot start under %s: %s: %s" % (python, failed[-1][0], failed[-1][1].strip()[:200])
    return None
