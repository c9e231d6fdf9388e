"""CUDA-graph crash reproduction on the EAGLE / DFlash paths (`gpudiag repro cuda-graph-crash`).

Two modes: `sglang` launches the host's sglang with dummy weights, one server per draft-token value
capturing every batch size; `synthetic` captures and replays a small forward shaped like each replay
path, with torch alone. Every cell runs in a child (a worker or a supervised server) so a poisoned
CUDA context, segfault or hang never stops the run.
Without CUDA every planned cell is reported `skipped` with its reason.
"""
import shutil
import tempfile

from probes import events
from probes.context import run_command
from probes.graphrepro import (cells, configs, declared, device_facts, live_shapes, placement, planner, results,
                                sglang_repro, sweep)
from probes.graphrepro.synthetic_cell import synthetic_cell
from probes.graphrepro.worker import Worker
from probes.hostinfo import interpreter

# Declared once (docs/adding-a-probe.md); PROBE is literals, read from the source by probes/catalog.py.
PROBE = {
    "set": "deep",
    "order": 2,
    "needs": ("env", "sglang_source"),
    "timeout_s": 1200,
    "summary": "where CUDA-graph capture breaks on the EAGLE / DFlash paths",
    "gpu": "yes",
    "torch": "yes",
    "sglang": "optional",
    "cost": "deep: one capture per cell, idle GPUs only",
    # What one unit of work costs, margin included (a synthetic cell took ~0.8-1.2 s on an H200, worker start
    # shared; an sglang launch waits for a server to load and capture): the runner and the probe plan with it.
    "unit_s": {"synthetic cell": 1.2, "sglang launch": 120},
}
OPTIONS, SHAPE, NOTES = declared.OPTIONS, declared.SHAPE, declared.NOTES   # probes/graphrepro/declared.py

ALGORITHMS = declared.ALGORITHMS
DEFAULTS = declared.DEFAULTS   # declared with their help text in probes/graphrepro/declared.py
INFO_TIMEOUT = 120.0
# Kept back from the probe's limit to kill a server group and return the cells measured (sglang mode); a
# synthetic worker child dies in a second, so synthetic cells keep back less.
RESERVE_SECONDS = 20.0
SYNTHETIC_RESERVE_SECONDS = 4.0
SYNTHETIC_CELL_S = PROBE["unit_s"]["synthetic cell"]
SGLANG_LAUNCH_S = PROBE["unit_s"]["sglang launch"]
MIN_CELL_SECONDS = RESERVE_SECONDS + 10.0   # no sglang launch starts with less time than this left


def settings_from(options):
    settings = dict(DEFAULTS)
    settings.update(dict((k, v) for k, v in (options or {}).items() if v is not None))
    settings["algorithms"] = [a.upper() for a in settings["algorithms"] if a.upper() in ALGORITHMS]
    settings["batch_sizes"] = sorted(set(int(b) for b in settings["batch_sizes"]))
    return settings


def sglang_imports(python, timeout=60.0):
    """find_spec only: importing sglang here would be slow and could initialise CUDA."""
    code = "import importlib.util,sys; sys.exit(0 if importlib.util.find_spec('sglang') else 1)"
    return run_command([python, "-c", code], timeout=timeout)["ok"]


def choose_mode(requested, python, timeout=60.0):
    if requested in ("synthetic", "sglang"):
        return [requested]
    if requested == "both":
        return ["sglang", "synthetic"]
    return ["sglang"] if sglang_imports(python, timeout) else ["synthetic"]


def collect(ctx):
    options = ctx.option("cuda_graph", {}) or {}
    settings = settings_from(options)
    given = set(k for k, v in options.items() if v is not None)
    force = bool(options.get("force", ctx.option("force", False)))
    # Every child (device query, synthetic cells, sglang servers) runs under the host's chosen interpreter.
    chosen = interpreter.target(ctx)
    python = chosen["path"]
    if options.get("plan"):
        return plan_only(ctx, settings, given, force, chosen)
    idle = placement.idle_devices(ctx)
    info_worker = Worker(modules=ctx.modules or None, env=placement.child_env(), python=python)
    try:
        info = info_worker.call("probes.graphrepro.synthetic:device_info", {"memory": False},
                                min(INFO_TIMEOUT, max(1.0, synthetic_work_left(ctx))))
    finally:
        info_worker.close()
        info_worker.remove_logs()
    data = {"settings": settings, "environment": device_facts.environment(ctx, info), "cells": [], "boundaries": [],
            "boundary": None, "signatures": [], "advice": [], "notes": [], "gpu": None,
            "memory_cap_mib": settings["max_mem_mib"], "interpreter": interpreter.summary(chosen)}
    # The device query and the mode choice are one short child each: they keep back what a worker needs,
    # not a server group's 20 s, so a probe given 20 s still reaches its cells.
    modes = choose_mode(settings["mode"], python, min(60.0, max(1.0, synthetic_work_left(ctx))))
    data["mode"], data["modes"] = modes[0], modes
    live_shapes.apply(settings, ctx.results.get("deployment") or {}, given, data["notes"])
    server = interpreter.chosen_server(ctx.results)
    if server is not None:  # the answers describe this server's interpreter and model
        data["server"] = server.get("identity") or {"pid": server.get("pid")}
    live_shapes.hidden_size_from_model(settings, "hidden_size" in given, data["notes"])
    reason = device_facts.no_cuda_reason(info, python)
    picked = None
    if reason is None:
        picked, reason = placement.pick_gpus(ctx, info, idle, settings, force, data["notes"])
    if reason is not None:
        for mode in modes:
            data["cells"] += results.skipped_cells(settings, mode, reason)
        data["skip_reason"] = reason
        return data
    device = [d for d in info["devices"] if d["index"] == picked[0]] or [{"index": picked[0]}]
    data["gpu"] = dict(device[0])
    env = placement.child_env(",".join(str(i) for i in picked))
    known = "compute capability %s" % device[0].get("compute_capability", "")   # for the signatures' requires
    for mode in modes:
        runner = run_sglang if mode == "sglang" else run_synthetic
        try:
            runner(ctx, settings, data, env, known, python)
        except Exception as exc:  # keep the cells already measured; the note says what stopped the sweep
            data["notes"].append("%s sweep stopped: %s: %s" % (mode, type(exc).__name__, exc))
    results.summarise(data, device[0].get("compute_capability", ""))
    gap = cells.unmeasured(data["cells"])
    if gap is not None:
        data["unmeasured"] = gap
    return data


def plan_only(ctx, settings, given, force, chosen):
    """`--plan`: every launch a run would make, with no GPU touched (no torch child, no CUDA)."""
    notes = []
    modes = choose_mode(settings["mode"], chosen["path"], min(60.0, max(1.0, ctx.time_left() - RESERVE_SECONDS)))
    live_shapes.apply(settings, ctx.results.get("deployment") or {}, given, notes)
    plan = planner.plan(ctx, settings, chosen["path"], modes, force, RESERVE_SECONDS, most_steps)
    return {"settings": settings, "mode": modes[0], "modes": modes, "cells": [], "boundaries": [],
            "boundary": None, "signatures": [], "advice": [], "notes": notes + plan.pop("notes"), "plan": plan,
            "interpreter": interpreter.summary(chosen),
            "environment": {"torch": None, "sglang": (ctx.results.get("sglang_source") or {}).get("version")}}


def work_left(ctx, reserve=None):
    """Seconds a cell may use: the probe's time left less what cleaning up and returning need."""
    return max(0.0, ctx.time_left() - (RESERVE_SECONDS if reserve is None else reserve))


def synthetic_work_left(ctx):
    return work_left(ctx, SYNTHETIC_RESERVE_SECONDS)


def installed_release(ctx):
    return (ctx.results.get("sglang_source") or {}).get("version")


def most_steps(labels, values, per_label):
    """The most cells (or launches) a sweep can take: bisection tries the ends, then halves the gap."""
    tries = 1 if len(values) < 2 else 2 + max(0, (len(values) - 2).bit_length())
    return len(labels) * per_label * tries


def run_synthetic(ctx, settings, data, env, known, python):
    """Every path's cells, the most informative first: the top draft-token count of every path at every batch
    size (largest first, paths taken in turn), then each row's bisection. A cell starts whenever one fits in
    the time left; those that do not are budget cells with the seconds they would need."""
    values = sweep.draft_token_values(*settings["draft_tokens"])
    release = installed_release(ctx)
    labels = results.planned_labels(settings, "synthetic")
    steps = events.NumberedSteps("cuda_graph", "cell", most_steps(labels, values, len(settings["batch_sizes"])))
    worker = Worker(modules=ctx.modules or None, env=env, python=python)
    oracles = {}
    try:
        for label, algorithm, path in labels:
            measure = steps.wrap(synthetic_oracle(ctx, settings, worker, path, algorithm, release, known),
                                 lambda bs, dt, label=label: "%s bs=%d draft=%d" % (label, bs, dt))
            oracles[label] = memoized(budget_guarded(ctx, path, algorithm, measure))
        for batch_size in sorted(set(settings["batch_sizes"]), reverse=True):
            for label, _, _ in labels:
                oracles[label](batch_size, values[-1])
        for label, _, _ in labels:
            results.record(data, label, sweep.sweep(settings["batch_sizes"], values, oracles[label]), "synthetic")
    finally:
        worker.close()
        worker.remove_logs()


def synthetic_oracle(ctx, settings, worker, path, algorithm, release, known):
    """One synthetic cell measured in the worker child, its timeout cut to the work time left: a cell cut short
    by that cut is a budget cell, not a hang."""
    def oracle(batch_size, draft_tokens):
        args = {"path": path, "batch_size": batch_size, "draft_tokens": draft_tokens, "topk": settings["topk"],
                "hidden_size": settings["hidden_size"], "max_mem_mib": settings["max_mem_mib"],
                "release": release}   # its replay fields
        full = float(settings["cell_timeout"])
        timeout = max(1.0, min(full, synthetic_work_left(ctx)))
        result = worker.call("probes.graphrepro.synthetic:run_cell", args, timeout)
        if not isinstance(result, dict):
            result = {}
        if result.get("status") == "timeout" and timeout < full:
            worker.close()
            return cells.budget_cell(path, algorithm, batch_size, draft_tokens, SYNTHETIC_CELL_S,
                                     when="during this cell (it had %.0f s)" % timeout)
        return synthetic_cell(result, path, algorithm, batch_size, draft_tokens, release, known, worker)
    return oracle


def budget_guarded(ctx, path, algorithm, oracle):
    """The oracle, or a budget cell when the time left cannot hold one synthetic cell."""
    def guarded(batch_size, draft_tokens):
        if synthetic_work_left(ctx) < SYNTHETIC_CELL_S:
            return cells.budget_cell(path, algorithm, batch_size, draft_tokens, SYNTHETIC_CELL_S)
        return oracle(batch_size, draft_tokens)
    return guarded


def memoized(oracle):
    """Each cell (batch size, draft tokens) or launch (draft tokens) run once: the first pass's results are
    the rows' first steps."""
    seen = {}

    def once(*key):
        if key not in seen:
            seen[key] = oracle(*key)
        return seen[key]
    return once


def run_sglang(ctx, settings, data, env, known, python):
    values = sweep.draft_token_values(*settings["draft_tokens"])
    source = ctx.results.get("sglang_source") or {}
    flags = source.get("server_flags")
    if not flags:
        data["notes"].append("sglang's server flags unknown (sglang_source gave none): canonical spellings used")
    algorithms = [str(a).upper() for a in source.get("speculative_algorithms") or []]
    if not algorithms:
        data["notes"].append("sglang's speculative algorithms unknown (sglang_source gave none): all launched")
    labels = results.planned_labels(settings, "sglang")
    steps = events.NumberedSteps("cuda_graph", "launch", most_steps(labels, values, 1))
    workdir = tempfile.mkdtemp(prefix="gpudiag-repro-")
    launches = {}
    try:
        for label, algorithm, _ in labels:
            if algorithms and algorithm not in algorithms:
                data["cells"] += results.absent_algorithm_cells(settings, algorithm, source.get("version"), values[-1])
                data["notes"].append("%s not launched: sglang %s has no %s (it has %s)" % (
                    algorithm, source.get("version") or "(version unknown)", algorithm, ", ".join(algorithms)))
                continue

            def launch(draft_tokens, algorithm=algorithm):
                sizes = settings["batch_sizes"]
                if ctx.time_left() < MIN_CELL_SECONDS:
                    return [cells.budget_cell("sglang", algorithm, b, draft_tokens, SGLANG_LAUNCH_S, "sglang",
                                              "before this launch") for b in sizes]
                try:
                    return sglang_repro.run_launch(settings, algorithm, sizes, draft_tokens,
                                                   workdir, python, flags, env, source.get("version"), known,
                                                   lambda: work_left(ctx))
                except configs.ConfigError as exc:
                    return [cells.cell("sglang", algorithm, b, draft_tokens, "error", str(exc), "sglang")
                            for b in sizes]
            launches[label] = memoized(steps.wrap(launch, lambda dt, label=label: "%s draft=%d, sglang server"
                                                   % (label, dt)))
        for label in launches:   # every algorithm's top draft-token count before any bisection
            launches[label](values[-1])
        for label, launch in launches.items():
            results.record(data, label, sweep.sweep_launches(settings["batch_sizes"], values, launch), "sglang")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
