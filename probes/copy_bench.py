"""copy_bench (deep): how fast the replay input copies of sglang's CUDA graphs are with each strategy.

Per workload (EAGLE draft, EAGLE draft-extend, DFlash verify field sets) and device: loop, grouped
foreach, grouped foreach with a DMA split, packed, and the installed sglang's own function (an env-gated
fast path timed both ways), each verified against copies of its sources saved before any strategy ran;
the copy_()/foreach crossover from a size sweep; host→device seq_lens copies.
Everything torch does runs in a child of the host's chosen interpreter (the serving venv when a server
runs), so a CUDA fault or hang cannot take the runner down; on CUDA every GPU is checked idle first.
"""
import os
import sys
import time

from probes import gpu_layer
from probes.context import Skip
from probes.copybench import analysis, declared, options, strategies, workloads
from probes.hostinfo import interpreter

# Declared once (docs/adding-a-probe.md); PROBE is literals, read from the source by probes/catalog.py.
PROBE = {
    "set": "deep",
    "order": 1,
    "needs": ("sglang_source",),
    "timeout_s": 900,
    "unit_s": {"workload on one GPU": 0.5, "sweep size on one GPU": 0.15},
    "summary": "copy strategies timed on the release's replay field sets, eager and in graphs",
    "gpu": "optional",
    "torch": "yes",
    "sglang": "optional",
    "cost": "deep: minutes per GPU, idle GPUs only",
}
OPTIONS, SHAPE, NOTES = declared.OPTIONS, declared.SHAPE, declared.NOTES   # probes/copybench/declared.py

MIN_CUDA_SAMPLES = 10
INFO_TIMEOUT_S = 120.0


def torch_info():
    """What the benchmark needs to know before it starts: run in a child of the chosen interpreter."""
    try:
        import torch
    except Exception as exc:
        raise Skip("torch is not importable by %s: %s: %s" % (sys.executable, type(exc).__name__, exc)) from None
    available = bool(torch.cuda.is_available())   # counts devices through NVML; creates no context
    return {"torch_version": torch.__version__, "has_foreach_copy": hasattr(torch, "_foreach_copy_"),
            "cuda_available": available, "device_count": torch.cuda.device_count() if available else 0,
            "executable": sys.executable}


def prior_torch_info(results, python):
    """What env and torch_caps already learned about the torch of `python` (its version, _foreach_copy_, how many
    GPUs it sees), so no torch child starts only to ask again; None when they did not run in that interpreter or
    cannot say. torch's device count is taken from env's GPU list only where no CUDA_VISIBLE_DEVICES narrows it."""
    caps = results.get("torch_caps") if isinstance(results.get("torch_caps"), dict) else {}
    env = results.get("env") if isinstance(results.get("env"), dict) else {}
    torch = env.get("torch") if isinstance(env.get("torch"), dict) else {}
    gpus = env.get("gpus") if isinstance(env.get("gpus"), dict) else {}
    if caps.get("torch_version") and _same_python(caps.get("executable"), python):
        checks = caps.get("checks") if isinstance(caps.get("checks"), dict) else {}
        count = len([k for k in checks if str(k).startswith("cuda:")])
        if count or not (gpus.get("count") and torch.get("cuda")):
            return {"torch_version": str(caps["torch_version"]), "has_foreach_copy": caps.get("has_foreach_copy"),
                    "cuda_available": count > 0, "device_count": count, "executable": python, "from": "torch_caps"}
    where = (torch.get("interpreter") or {}).get("path") if isinstance(torch.get("interpreter"), dict) else None
    if torch.get("available") and torch.get("version") and _same_python(where or torch.get("executable"), python) \
            and gpus.get("status") == "ok" and "CUDA_VISIBLE_DEVICES" not in os.environ:
        count = int(gpus.get("count") or 0) if torch.get("cuda") else 0
        return {"torch_version": str(torch["version"]), "has_foreach_copy": None, "cuda_available": count > 0,
                "device_count": count, "executable": python, "from": "env"}
    return None


def _same_python(a, b):
    return bool(a and b) and os.path.abspath(str(a)) == os.path.abspath(str(b))


def gpu_names(results):
    """{index: name} from env's GPU list (nvidia-smi numbers GPUs in PCI bus order, as the child does)."""
    gpus = (results.get("env") or {}).get("gpus") if isinstance(results.get("env"), dict) else None
    devices = gpus.get("devices") if isinstance(gpus, dict) else None
    return dict((str(d.get("index")), str(d.get("name"))) for d in devices or []
                if isinstance(d, dict) and d.get("name"))


def torch_info_main(payload):
    interpreter.answer(torch_info)


def choose_device(info, wanted):
    if wanted == "cpu":
        return "cpu"
    if wanted == "cuda" and not info["cuda_available"]:
        raise Skip("copy_bench.device=cuda but torch %s under %s sees no CUDA device"
                   % (info["torch_version"], info["executable"]))
    return "cuda" if info["cuda_available"] else "cpu"


def gpu_policy(seen, servers, force, limit, count):
    """The GPU layer's verdicts for the benchmark child, by uuid (torch's order may differ from nvidia-smi's);
    without a GPU list, which indices live servers hold (the child numbers GPUs in PCI bus order)."""
    if seen["devices"] is None:
        return {"table": None, "why": seen["why"],
                "protected": sorted(gpu_layer.protected_gpus(servers, {}, range(count)))}
    return {"table": gpu_layer.verdicts(seen["devices"], servers, force, limit), "source": seen["source"]}


def build_job(settings, device, results):
    """The plain-data job the benchmark (here or in the child) runs."""
    job = {key: settings[key] for key in (
        "paths", "strategies", "batch_sizes", "hidden_sizes", "topk", "steps", "draft_tokens", "hidden_dtype",
        "samples", "target_us", "max_iters", "max_mem_mib", "busy_memory_mib", "graph", "graph_copies", "h2d",
        "split_bytes", "cpu_threads")}
    job["device"] = device
    job["unit_s"] = dict(PROBE["unit_s"])  # the declared unit costs, one place for the runner and the bench
    job["live_batch_size"] = settings.get("live_batch_size")
    job["sweep"] = {"min_bytes": settings["sweep_min_bytes"], "max_bytes": settings["sweep_max_bytes"],
                    "factor": settings["sweep_factor"], "dtype": settings["sweep_dtype"]}
    job["field_names"] = workloads.fields_from_source(results)
    job["behaviour"] = workloads.installed_behaviour(results)
    job["installed_modules"] = workloads.installed_definitions(results)
    job["release"] = workloads.installed_release(results)
    if device == "cuda":
        job["samples"] = max(MIN_CUDA_SAMPLES, job["samples"])
    return job


def collect(ctx):
    raw = ctx.option("copy_bench", {}) or {}
    if not isinstance(raw, dict):
        raise options.OptionError("copy_bench options must be PROBE.KEY=VALUE pairs")
    # isolate=false runs the benchmark in this process (debugging only): the default keeps the probe's own
    # process free of torch and runs everything under the host's chosen interpreter.
    in_process = options.resolve_isolate(raw) is False
    if in_process:
        info, chosen = torch_info(), {"path": sys.executable, "why": "in_process",
                                      "reason": "copy_bench.isolate=false: run in the probing process"}
    else:
        chosen = interpreter.target(ctx)
        info = prior_torch_info(ctx.results, chosen["path"])
        if info is None:
            info, chosen = interpreter.torch_child(ctx, "probes.copy_bench:torch_info_main",
                                                   min(INFO_TIMEOUT_S, max(5.0, ctx.time_left() * 0.3)))
    device = choose_device(info, str(raw.get("device", "auto")))
    settings, sources = options.resolve(raw, device, ctx.results)
    job = build_job(settings, device, ctx.results)
    job["force"] = bool(ctx.option("force"))
    job["gpu_names"] = gpu_names(ctx.results)
    deadline = time.monotonic() + ctx.time_left() - 2.0
    if device == "cuda":
        count = info["device_count"]
        job["gpus"] = sorted(set(g for g in (settings["gpus"] or range(count)) if g < count))
        if not job["gpus"]:
            raise Skip("copy_bench.gpus=%s: no such GPU (torch sees %d)" % (settings["gpus"], count))
        servers = (ctx.results.get("deployment") or {}).get("servers") or []
        job["gpu_policy"] = gpu_policy(gpu_layer.snapshot(ctx), servers, job["force"], settings["busy_memory_mib"],
                                       count)
    if in_process:
        from probes.copybench.devices import bench_all
        devices = bench_all(dict(job, budget_s=max(1.0, deadline - time.monotonic())))
    else:
        from probes.copybench.child import run_isolated
        devices = run_isolated(job, ctx.modules, deadline, python=chosen["path"])
    if devices and all(d.get("status") == "skipped" and d.get("idle_check") for d in devices):
        raise Skip("; ".join("GPU %s: %s" % (d.get("index"), d.get("reason")) for d in devices[:4]))
    data = assemble(info, device, job, settings, sources, devices, not in_process)
    data["interpreter"] = dict(interpreter.summary(chosen), ran="here" if in_process else "child")
    server = interpreter.chosen_server(ctx.results)
    if server is not None:  # whose flags (topk, steps) and interpreter the numbers describe
        data["server"] = server.get("identity") or {"pid": server.get("pid")}
    return data


def assemble(info, device, job, settings, sources, devices, isolate):
    shown = {k: v for k, v in settings.items() if k not in ("gpus",)}
    return {
        "device": device,
        "method": "cuda_events (eager) and cuda_graph_replay" if device == "cuda" else "perf_counter",
        "torch_version": info["torch_version"],
        "has_foreach_copy": _has_foreach(info, devices),
        "torch_info_from": info.get("from") or "child",
        "python": info["executable"],
        "isolated": bool(isolate),
        "settings": shown,
        "settings_source": sources,
        "installed": {"modules": job["installed_modules"],
                      "modules_from": "sglang_source" if job["installed_modules"] else "fallback",
                      "behaviour": job["behaviour"], "field_names": job["field_names"],
                      "release": job["release"], "dtype_pairs": workloads.dtype_pairs(job["release"]),
                      "caveat_packed": strategies.PACKED_CAVEAT},
        "gpus": devices,
        "outliers": analysis.find_outliers(devices),
        "summary": summarize(devices),
    }


def _has_foreach(info, devices):
    """Whether the measuring torch has _foreach_copy_: as env/torch_caps or the info child said, else as the
    benchmark child reported it; None when no torch process said."""
    if info.get("has_foreach_copy") is not None:
        return bool(info["has_foreach_copy"])
    for device in devices:
        found = (device.get("torch") or {}).get("has_foreach_copy") if isinstance(device, dict) else None
        if found is not None:
            return bool(found)
    return None


def summarize(devices):
    """Per path: how often each strategy was fastest in each clock, and the largest eager saving per replay vs
    installed (the report ranks and prices on its own, gpudiag/findings/savings.py)."""
    paths = {}
    for dev in devices:
        for w in dev.get("workloads") or []:
            if w.get("status") != "ok":
                continue
            entry = paths.setdefault(w["path"], {"best": {}, "best_graph": {}, "max_saving_vs_installed_us": None})
            for key in ("best", "best_graph"):   # fastest eagerly (CPU issue), inside a replayed graph (GPU stream)
                if w.get(key):
                    entry[key][w[key]] = entry[key].get(w[key], 0) + 1
            saving = w.get("saving_vs_installed_us")
            if saving is not None and (entry["max_saving_vs_installed_us"] is None
                                       or saving > entry["max_saving_vs_installed_us"]):
                entry["max_saving_vs_installed_us"] = saving
    splits = sorted(d["recommended_split_bytes"] for d in devices if d.get("recommended_split_bytes"))
    return {"paths": paths, "recommended_split_bytes": splits[len(splits) // 2] if splits else None}
