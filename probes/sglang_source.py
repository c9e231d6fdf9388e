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
