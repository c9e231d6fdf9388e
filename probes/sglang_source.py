"""What the installed sglang does, read as text and AST (never imported): copies, EAGLE, DFlash, flags.

The package is found for the host's one interpreter choice (--python, else the live server's, else the probes' own);
every fact carries file (relative to site-packages), line and snippet. Data shape: docs/probe-data.md.
"""
import os
import time

from probes.hostinfo import interpreter
from probes.sglang_facts import locate
from probes.sglang_facts.eagle import find_eagle_runners
from probes.sglang_facts.flags import find_server_flags
from probes.sglang_facts.graph_classes import find_breakable, find_graph_runners
from probes.sglang_facts.grouped_copy import find_grouped_copy
from probes.sglang_facts.imports import Resolver
from probes.sglang_facts.integrity import check_checkout, check_record
from probes.sglang_facts.sources import SourceTree
from probes.sglang_facts.speculative import find_algorithms, find_dflash
from probes.sglang_facts.version import find_version
from probes.optionspec import Option
from probes.schemas import anything, b, i, lst, obj, s

# Declared once (docs/adding-a-probe.md); PROBE is literals, read from the source by probes/catalog.py.
PROBE = {
    "set": "light",
    "order": 4,
    "needs": ("deployment",),
    "summary": "the installed sglang read as source: copy helpers, replays, flags, integrity",
    "gpu": "no",
    "torch": "no",
    "sglang": "yes",
    "cost": "light: reads source files, seconds",
}
OPTIONS = (
    Option("site_packages", "path", None, "Read sglang from this site-packages instead of the serving Python's.",
           nullable=True),
    Option("flag_pattern", "regex", None, "Regular expression selecting the server flags reported "
           "(default: CUDA-graph and speculative flags).", nullable=True),
    Option("verify_all", "bool", False, "Hash every installed sglang file against RECORD (scan --verify-all)."),
)
EVIDENCE = obj({"file": s("relative to site-packages"), "line": i().null(), "snippet": s().null().opt()})
_EAGLE_RUNNER = obj({"batched": b().null("null when the runner class is absent"),
                     "per_tensor_fields": lst(s()).opt(), "grouped_fields": lst(s()).opt(),
                     "hidden_states_separate": b().null().opt()})
SHAPE = obj({
    "found": b(), "reason": s().null(), "interpreter": anything("{path, why} or the path"),
    "version": s().null().opt(), "version_mismatch": anything().opt(),
    "grouped_foreach_copy": obj({
        "definitions": lst(obj({"module": s(), "file": s(), "line": i().null(),
                                "fast_paths": lst(obj({"kind": s("small_copy_kernel | env_gated")})).opt()})),
        "call_sites": lst(obj({"qualname": s().null(), "file": s(), "line": i().null(),
                               "fields": lst(s()).opt(), "resolves_to": anything().opt()})),
        "has_foreach_copy_flag": lst(EVIDENCE)}).opt(),
    "eagle": obj({"draft": _EAGLE_RUNNER, "draft_extend": _EAGLE_RUNNER}).opt(),
    "speculative_algorithms": lst(s()).opt(),
    "dflash": obj({"present": b(), "worker_file": s().null(), "draft_graph_guards": lst(anything()).opt()}).opt(),
    "server_flags": lst(obj({"name": s(), "file": s().null().opt(), "line": i().null().opt(),
                             "deprecated": b().opt()})).opt(),
    "integrity": obj({"method": s("record | editable | unknown"), "modified": lst(s()).opt(),
                      "missing": lst(s()).opt()}).opt(),
}, "facts read from the installed sglang's source, never imported; absent keys when sglang was not found")
NOTES = """
`found, reason, interpreter, site_packages, package_dir, version, version_source{file,line,snippet}`,
`grouped_foreach_copy{definitions:[{module, file, line, snippet, fast_paths:[{kind: small_copy_kernel|env_gated,
detail, file, line, snippet}]}], has_foreach_copy_flag:[{file,line,snippet}], call_sites:[{module, qualname,
file, line, snippet, fields:[...], dynamic_fields:[...], resolves_to, reachable: bool,
reached_from{file,line,snippet} | "module level", unreachable}]}`, `eagle{draft|draft_extend: {class, file,
line, replay_method, batched: bool, per_tensor_copies, per_tensor_fields:[...], hidden_states_separate: bool,
evidence:[{file,line,snippet}]}}`, `speculative_algorithms:[...]`, `dflash{present, worker_file,
draft_graph_guards:[{condition, message, file, line, snippet}]}`, `cuda_graph_runners:[{class, file, line}]`,
`breakable_graph:[...]`, `server_flags:[{name, file, line, deprecated: bool, alias_of, choices:[...] | null}]`,
`integrity{method: record|editable|unknown, checked, modified:[file], missing:[file], editable{path, commit,
dirty}}`.

`interpreter` is `{path, why}`. `eagle.*.batched` is `null` when the runner class is absent (not `false`).
`version` is `null` (with `version_reason`) when neither a version file of the imported copy nor a dist-info
that belongs to it says; `dist_info_candidates:[{path, belongs: record|top_level|direct_url|null, matched,
checked}]` lists every sglang dist-info on the path, and `dist_info` is the one whose RECORD matches the files
on disk. `fields` are buffer names; a tensor chosen by a loop at run time is in `dynamic_fields` with its loop.
`speculative_algorithm_evidence[].via` is `enum`, `register` or the helper that registers it, with `aliases`.
`integrity.editable.via` is `direct_url`, `finder` or `git` (a checkout on the path with no dist-info of its
own). Also: `dist_info, search_paths, metadata_version, version_sources, version_mismatch,
speculative_algorithm_evidence, server_args{module, file, line, all_classes}, server_fields[], files_scanned,
parse_errors, finder_errors, timings_s, elapsed_s`; `definitions[].qualname`;
`fast_paths[].env_var/function/module/condition`; `call_sites[].src_fields/unresolved`;
`eagle.*.found/bases/replay_line/grouped_calls/grouped_fields/grouped_resolves_to/reason`;
`dflash.in_algorithms/workers`; `draft_graph_guards[].conditions/call_line/function/disables/log_conditions`;
`server_flags[].dest/via/action/snippet`; `integrity.scope/unrecorded/record/reason`;
`integrity.editable.changed/toplevel`.
"""


def collect(ctx):
    options = ctx.option("sglang_source", {}) or {}
    chosen = interpreter.target(ctx)  # the host's one interpreter choice
    path, why = chosen["path"], chosen["why"]
    data = {"found": False, "reason": None, "interpreter": {"path": path, "why": why}}
    if options.get("site_packages"):
        site = os.path.abspath(os.path.expanduser(str(options["site_packages"])))
        data["interpreter"]["why"] = why + "; site_packages option"
        location = locate.find_package([site]) if os.path.isdir(site) else None
        where = "in %s (site_packages option)" % site
    else:
        paths, error = locate.search_paths(path, _server_pythonpath(ctx.results, path),
                                           timeout=ctx.time_left(20.0))
        if error:
            data["reason"] = error
            return data
        data["search_paths"] = paths
        location = locate.find_package(paths)
        where = "in the %d import paths of %s" % (len(paths), path)
    if location is None:
        data["reason"] = "no sglang package %s" % where
        return data
    if location.get("unreadable"):  # a zipped egg: located and its version known, but no source is read
        data.update(reason=location["unreadable"], version=location.get("version"))
        return data
    data.update(facts_from_location(location, options))
    return data


def facts_from_location(location, options=None):
    """Every source fact for one installed package; pure reading, no child processes but git."""
    options = options or {}
    started = time.perf_counter()
    tree = SourceTree(location["site_packages"])
    resolver = Resolver(tree)
    timings, failures = {}, []

    def timed(name, func, *args, **fallback):
        """One finder; a bug or an odd file costs that finder's facts, never the others'."""
        began = time.perf_counter()
        try:
            value = func(*args)
        except Exception as exc:
            failures.append({"finder": name, "error": "%s: %s" % (type(exc).__name__, str(exc)[:300])})
            value = fallback.get("default")
        timings[name] = round(time.perf_counter() - began, 4)
        return value

    data = {"found": True, "reason": None, "site_packages": location["site_packages"],
            "package_dir": location["package_dir"], "dist_info": location.get("dist_info"),
            "dist_info_candidates": location.get("dist_infos") or []}
    data.update(timed("version", find_version, tree, location.get("dist_info"),
                      default={"version": None, "version_source": None}))
    if data.get("version") is None:
        data["version_reason"] = unknown_version_reason(location)
    data["grouped_foreach_copy"] = timed("grouped_copy", find_grouped_copy, tree, resolver, default={
        "definitions": [], "has_foreach_copy_flag": [], "call_sites": []})
    data["eagle"] = timed("eagle", find_eagle_runners, tree, resolver, default={})
    algorithms = timed("speculative", find_algorithms, tree, default=[])
    data["speculative_algorithms"] = [a["name"] for a in algorithms]
    data["speculative_algorithm_evidence"] = algorithms
    data["dflash"] = timed("dflash", find_dflash, tree, algorithms, default={
        "present": None, "worker_file": None, "draft_graph_guards": []})
    data["cuda_graph_runners"] = timed("graph_runners", find_graph_runners, tree, default=[])
    data["breakable_graph"] = timed("breakable", find_breakable, tree, default=[])
    data.update(timed("flags", find_server_flags, tree, options.get("flag_pattern"),
                      default={"server_flags": [], "server_fields": []}))
    data["integrity"] = timed("integrity", integrity, tree, location, bool(options.get("verify_all")),
                              default={"method": "unknown", "checked": 0, "modified": [], "missing": []})
    data["finder_errors"] = failures
    data["files_scanned"] = len(tree.files)
    data["parse_errors"] = tree.parse_errors
    data["timings_s"] = timings
    data["elapsed_s"] = round(time.perf_counter() - started, 4)
    return data


def integrity(tree, location, verify_all):
    editable = location.get("editable")
    if editable:
        checkout = check_checkout(editable["path"])
        checkout["via"] = editable.get("via")  # direct_url, finder, or git (a checkout on the path, no dist-info)
        changed = checkout.get("changed") or []
        root = checkout.get("toplevel") or editable["path"]
        package = os.path.relpath(os.path.realpath(location["package_dir"]),
                                  os.path.realpath(root)).replace(os.sep, "/")
        return {"method": "editable", "checked": 0, "missing": [], "editable": checkout,
                "modified": [c for c in changed if c == package or c.startswith(package + "/")]}
    dist_info = location.get("dist_info")
    if not dist_info:
        return {"method": "unknown", "checked": 0, "modified": [], "missing": [], "editable": None,
                "reason": "no dist-info belongs to %s%s and it is not in a git checkout" % (
                    location["package_dir"], _ignored(location))}
    result = check_record(location["site_packages"], dist_info, None if verify_all else sorted(tree.cited))
    result["scope"] = "all" if verify_all else "cited"
    result["editable"] = None
    return result


def unknown_version_reason(location):
    return "no version file (_version.py) in %s and no dist-info belongs to it%s" % (
        location["package_dir"], _ignored(location))


def _ignored(location):
    """Names the dist-info folders that were found but describe another copy."""
    others = [os.path.basename(c["path"]) for c in location.get("dist_infos") or [] if not c.get("belongs")]
    return " (%s: another copy's)" % ", ".join(others[:5]) if others else ""


def _server_pythonpath(results, interpreter):
    """PYTHONPATH of a live server running this interpreter, when deployment recorded it."""
    for server in (results.get("deployment") or {}).get("servers") or []:
        if isinstance(server, dict) and server.get("python") == interpreter:
            value = (server.get("env") or {}).get("PYTHONPATH")
            if value:
                return value
    return None
