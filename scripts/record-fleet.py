#!/usr/bin/env python3
"""Regenerate the recorded fleet tests/fixtures/runs/fleet3 from real probe output and recorded GPU segments.

Per host in tests/fixtures/segments/<host>/ the light probes (env, deployment, torch_caps, sglang_source) run
for real, under a Python placed at the host's venv path inside a scratch root: its site-packages holds the
real sglang wheel of the host's release (tests/sglang_wheels.py), a /proc view holds the host's server, and an
`nvidia-smi` on PATH prints the host's recorded outputs (segments/<host>/nvidia-smi/). Values that only
describe the machine the script ran on (hostname, OS, Python and torch builds, the scratch root, timings)
are replaced by the host's recorded ones; a key is never added or removed by that. GPU results are recorded
segments: torch_caps' CUDA checks (the GPU policy decides again which GPUs they may cover), copy_bench's
per-GPU timings (fields, outliers, summary and the installed release's behaviour are derived again by the
probe's own functions, and rows the release cannot produce are dropped) and cuda_graph's data. Every host
document is validated against the probes' declared shapes (probes/probe_info.py) before it is written.

  scripts/record-fleet.py           rewrite tests/fixtures/runs/fleet3
  scripts/record-fleet.py --check   exit 1, naming the first difference, when the fixture is not what it
                                    would write
"""
import argparse
import json
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "scripts")]

from fleet_scratch_host import RecordError, run_light_probes, torch_site  # noqa: E402

from gpudiag.probe_data import check_host_document  # noqa: E402
from probes import copy_bench, gpu_layer  # noqa: E402
from probes.copybench import analysis, options, strategies, workloads  # noqa: E402
from probes.hostinfo import interpreter  # noqa: E402

SEGMENTS = os.path.join(ROOT, "tests", "fixtures", "segments")
FLEET = os.path.join(ROOT, "tests", "fixtures", "runs", "fleet3")


def read_json(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def dumps(doc):
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


# --- normalising what describes this machine --------------------------------------------------------------

def replace_strings(value, old, new):
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [replace_strings(v, old, new) for v in value]
    if isinstance(value, dict):
        return {replace_strings(k, old, new): replace_strings(v, old, new) for k, v in value.items()}
    return value


def drop_items(value, unwanted):
    """`value` without list items in `unwanted`: search paths that only this run adds (the checkout on
    PYTHONPATH, the .pth that lends this Python's torch), which a host running the bundle does not have."""
    if isinstance(value, list):
        return [drop_items(v, unwanted) for v in value if not (isinstance(v, str) and v in unwanted)]
    if isinstance(value, dict):
        return {k: drop_items(v, unwanted) for k, v in value.items()}
    return value


def overlay(real, recorded, where):
    """`real` with the recorded host's values; a recorded key the probe does not emit is an error."""
    extra = sorted(set(recorded) - set(real))
    if extra:
        raise RecordError("%s: recorded keys the probe does not emit: %s" % (where, ", ".join(extra)))
    return dict(real, **recorded)


def normalise(probes, spec, scratch):
    name = spec["document"]["name"]
    here = "python%d.%d" % sys.version_info[:2]
    theirs = "python" + ".".join(spec["python_version"].split(".")[:2])
    # The scratch venv holds only the sglang wheel; the kernel libraries it would find are this machine's (the
    # lent torch's site): the recorded hosts' were not recorded, and the section says so.
    libs = probes["env"]["data"].get("kernel_libs")
    if isinstance(libs, dict):
        libs.update(status="skipped", reason="not recorded with this host's segments", packages={}, sglang=None)
    probes = drop_items(probes, {ROOT, torch_site()})
    probes = replace_strings(probes, scratch, "")
    probes = replace_strings(probes, sys.base_prefix, "/usr")
    probes = replace_strings(probes, "/lib/" + here, "/lib/" + theirs)
    for probe, result in probes.items():
        result["duration_s"] = spec["durations_s"][probe]
        # The limits this machine's runner handed out (probes/timeshare.py) are this run's, like its durations;
        # the fleet was recorded without them.
        result.pop("limit_s", None)
        result.pop("declared_s", None)
    env = probes["env"]["data"]
    env.update(overlay({k: env[k] for k in spec["host"] if k in env}, spec["host"], name + " env"))
    env["python"] = overlay(env["python"], dict(spec["python"], version=spec["python_version"]),
                            name + " env.python")
    env["torch"] = overlay(env["torch"], spec["torch"], name + " env.torch")
    probes["torch_caps"]["data"]["torch_version"] = spec["torch"]["version"]
    deployment = probes["deployment"]["data"]
    deployment["processes_scanned"] = spec["processes_scanned"]
    for server, recorded in zip(deployment["servers"], spec["servers"]):
        server.update(uid=recorded["uid"], age_s=recorded["age_s"])
    source = probes["sglang_source"]["data"]
    source["elapsed_s"] = spec["sglang_source_timings_s"]["elapsed_s"]
    source["timings_s"] = {k: spec["sglang_source_timings_s"]["parts"].get(k, 0.0) for k in source["timings_s"]}
    return probes


# --- recorded GPU segments --------------------------------------------------------------------------------

def merge_torch_caps(data, segment, env, deployment):
    """CUDA checks: the GPU policy decides again which GPUs the probe may touch; those carry the recorded
    check, the others its refusal."""
    table = gpu_layer.verdicts(env["gpus"]["devices"], deployment["servers"])
    refused = sorted(n for n in segment["cuda_checks"] if not gpu_layer.verdict_for(
        table, _uuid_of(env, n))["use"])
    if refused:
        raise RecordError("torch_caps: the segment has checks on GPUs the policy leaves alone: " + ", ".join(refused))
    for device in env["gpus"]["devices"]:
        name = "cuda:%d" % device["index"]
        verdict = gpu_layer.verdict_for(table, device["uuid"])
        if not verdict["use"]:
            data["checks"][name] = {"status": "skipped", "ok": None, "reason": gpu_layer.refusal(verdict)}
        elif name in segment["cuda_checks"]:
            data["checks"][name] = segment["cuda_checks"][name]
        else:
            raise RecordError("torch_caps: %s is idle but the segment has no check for it" % name)
    return data


def _uuid_of(env, check_name):
    index = int(check_name.split(":")[1])
    return next((d["uuid"] for d in env["gpus"]["devices"] if d["index"] == index), None)


def allowed_env_gates(source, module):
    """Environment variables the installed definition in `module` reads: only those have on/off rows."""
    gates = set()
    for definition in (source.get("grouped_foreach_copy") or {}).get("definitions") or []:
        if definition.get("module") == module:
            gates.update(p.get("env_var") for p in definition.get("fast_paths") or [] if p.get("kind") == "env_gated")
    return gates


def rebuild_workload(workload, job, split, behaviour, source):
    """A recorded workload with its fields from the release's field table and its verdicts derived again."""
    specs = workloads.field_specs(workload["path"], workload["batch_size"], workload["hidden_size"], job["topk"],
                                  job["steps"], job["draft_tokens"], job["hidden_dtype"],
                                  names=job["field_names"].get(workload["path"]), release=job["release"])
    marks = strategies.split_marks([s["name"] for s in specs], [s["bytes"] for s in specs], split)
    workload["fields"] = [dict(s, **m) for s, m in zip(specs, marks)]
    workload["total_bytes"] = sum(s["bytes"] for s in specs)
    results = workload.get("strategies")
    if workload.get("status") != "ok" or not isinstance(results, dict):
        return workload
    unknown = sorted(set(results) - set(job["strategies"]))
    if unknown:
        raise RecordError("copy_bench %s: strategies not asked for: %s" % (workload["name"], ", ".join(unknown)))
    installed = results.get("installed") or {}
    gates = allowed_env_gates(source, installed.get("module"))
    for gate in sorted(set(installed.get("env") or {}) - gates):
        del installed["env"][gate]     # a fast path the release does not have
    if "env" in installed and not installed["env"]:
        del installed["env"]
    path_behaviour = behaviour.get(workload["path"]) or {}
    analysis.add_speedups(results)
    saving, baseline = analysis.saving_vs_installed(results, path_behaviour)
    workload.update(best=analysis.best_strategy(results), best_graph=analysis.best_strategy(results, "graph"),
                    saving_vs_installed_us=saving, installed_baseline=baseline)
    return workload


def merge_copy_bench(segment, spec, results):
    settings, sources = options.resolve(spec["probe_options"].get("copy_bench") or {}, "cuda", results)
    job = copy_bench.build_job(settings, "cuda", results)
    devices = segment["gpus"]
    for device in devices:
        for workload in device.get("workloads") or []:
            rebuild_workload(workload, job, device.get("recommended_split_bytes"), job["behaviour"],
                             results["sglang_source"])
    info = {"torch_version": spec["torch"]["version"], "has_foreach_copy": segment["has_foreach_copy"],
            "executable": spec["venv"] + "/bin/python"}
    data = copy_bench.assemble(info, "cuda", job, settings, sources, devices, True)
    chosen = results["deployment"]["interpreter"]
    data["interpreter"] = dict(interpreter.summary(chosen), ran="child")
    server = interpreter.chosen_server(results)
    if server is not None:
        data["server"] = server.get("identity") or {"pid": server.get("pid")}
    return data


# --- the fleet ---------------------------------------------------------------------------------------------

def record_host(host_dir):
    spec = read_json(os.path.join(host_dir, "host.json"))
    with tempfile.TemporaryDirectory(prefix="record-fleet-") as scratch:
        scratch = os.path.realpath(scratch)
        probes = normalise(run_light_probes(scratch, spec, host_dir), spec, scratch)
    results = {name: probes[name]["data"] for name in probes}
    merge_torch_caps(results["torch_caps"], read_json(os.path.join(host_dir, "torch_caps.json")),
                     results["env"], results["deployment"])
    segment = os.path.join(host_dir, "copy_bench.json")
    if os.path.exists(segment):
        probes["copy_bench"] = {"status": "ok", "duration_s": spec["durations_s"]["copy_bench"],
                                "data": merge_copy_bench(read_json(segment), spec, results)}
    segment = os.path.join(host_dir, "cuda_graph.json")
    if os.path.exists(segment):
        probes["cuda_graph"] = {"status": "ok", "duration_s": spec["durations_s"]["cuda_graph"],
                                "data": read_json(segment)}
    doc = dict(spec["document"], python=spec["venv"] + "/bin/python", probes=probes)
    check_host_document(doc, os.path.join(host_dir, "host.json"))
    return doc


def record_fleet():
    """{path relative to the fleet directory: text} for every file of the fleet."""
    files = {"run.json": dumps(read_json(os.path.join(SEGMENTS, "run.json")))}
    names = sorted(os.listdir(SEGMENTS))
    folders = [n for n in names if os.path.isdir(os.path.join(SEGMENTS, n))]
    with ThreadPoolExecutor(max_workers=len(folders) or 1) as pool:   # each host's probes in their own child
        docs = pool.map(lambda n: record_host(os.path.join(SEGMENTS, n)), folders)
        for name, doc in zip(folders, docs):
            files["hosts/%s.json" % name] = dumps(doc)
    for name in names:
        if name.endswith(".json") and name != "run.json":   # a host that never answered: as recorded
            files["hosts/" + name] = dumps(read_json(os.path.join(SEGMENTS, name)))
    return dict(sorted(files.items()))


def first_difference(old, new, where="$"):
    if type(old) is not type(new):
        return "%s: %s in the fixture, %s now" % (where, type(old).__name__, type(new).__name__)
    if isinstance(old, dict):
        for key in sorted(set(old) | set(new)):
            if key not in new:
                return "%s.%s: in the fixture, no longer produced" % (where, key)
            if key not in old:
                return "%s.%s: produced now, not in the fixture" % (where, key)
            found = first_difference(old[key], new[key], "%s.%s" % (where, key))
            if found:
                return found
        return None
    if isinstance(old, list):
        if len(old) != len(new):
            return "%s: %d items in the fixture, %d now" % (where, len(old), len(new))
        for index, (a, b) in enumerate(zip(old, new)):
            found = first_difference(a, b, "%s[%d]" % (where, index))
            if found:
                return found
        return None
    return None if old == new else "%s: %r in the fixture, %r now" % (where, old, new)


def check(files):
    """Problems, one line each: files that differ from what the probes produce now."""
    problems = []
    wanted = set(files)
    present = set()
    for folder in ("", "hosts"):
        base = os.path.join(FLEET, folder)
        present.update(os.path.join(folder, n) if folder else n for n in os.listdir(base) if n.endswith(".json"))
    for extra in sorted(present - wanted):
        problems.append("%s: in the fixture, not produced" % extra)
    for rel in sorted(wanted):
        path = os.path.join(FLEET, rel)
        if not os.path.exists(path):
            problems.append("%s: missing from the fixture" % rel)
            continue
        found = first_difference(read_json(path), json.loads(files[rel]))
        if found:
            problems.append("%s: %s" % (rel, found))
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the fixture instead of writing it")
    args = parser.parse_args(argv)
    try:
        files = record_fleet()
    except Exception as exc:   # one line, never a traceback: a segment or a probe that no longer fits
        print("record-fleet: %s: %s" % (type(exc).__name__, exc), file=sys.stderr)
        return 2
    if args.check:
        problems = check(files)
        for line in problems:
            print("record-fleet: %s (rerun scripts/record-fleet.py)" % line, file=sys.stderr)
        return 1 if problems else 0
    for rel, text in files.items():
        path = os.path.join(FLEET, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    print("record-fleet: wrote %d files under %s" % (len(files), os.path.relpath(FLEET, ROOT)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
