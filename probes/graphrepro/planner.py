"""`repro cuda-graph-crash --plan`: every server launch the repro would make, built by the same code the run
uses (configs, capture rules, the release's flags), with no GPU touched: no torch, no CUDA, only nvidia-smi's
list for the GPUs it would take. The sweep bisects draft tokens, so only its first launches are known ahead:
the top value always, the bottom one when the top fails; the rest differ in the draft-token value only.
"""
import os
import tempfile

from probes.graphrepro import configs, launch_plan, placement, sglang_repro, sweep

WORKDIR = os.path.join(tempfile.gettempdir(), "gpudiag-repro-XXXXXX")   # a fresh one per run, removed after
SET_ENV = ("CUDA_DEVICE_ORDER", "CUDA_VISIBLE_DEVICES")   # what the repro sets over the probe's environment


def gpus_for(ctx, settings, force):
    """{"gpus": [indices] or [], "why"}: the GPUs a run would take now, by the run's own policy."""
    idle = placement.idle_devices(ctx)
    notes = []
    chosen, why = placement.pick_gpus(ctx, {"devices": []}, idle, settings, force, notes)
    if chosen is None:
        return {"gpus": [], "why": why}
    reason = "idle by %s" % (idle.get("source") or "nvidia-smi")
    return {"gpus": chosen, "why": "; ".join([reason] + notes)}


def sglang_launches(settings, python, source, gpus):
    """One entry per launch the sweep makes first, per algorithm the release has."""
    flags = source.get("server_flags")
    known = [str(a).upper() for a in source.get("speculative_algorithms") or []]
    values = sweep.draft_token_values(*settings["draft_tokens"])
    firsts = [(values[-1], "always")]
    if len(values) > 1:
        firsts.append((values[0], "if %d draft tokens fail; then bisection over %d-%d" % (
            values[-1], values[0], values[-1])))
    env = dict(placement.child_env(",".join(str(i) for i in gpus["gpus"]) or None))
    shown_env = dict((k, env[k]) for k in SET_ENV if k in env)
    launches, notes = [], []
    for algorithm in settings["algorithms"]:
        if known and algorithm not in known:
            notes.append("%s not launched: sglang %s has no %s" % (algorithm, source.get("version"), algorithm))
            continue
        for draft_tokens, when in firsts:
            launches.append(one_launch(settings, algorithm, draft_tokens, when, python, flags, shown_env, gpus))
    return launches, notes


def one_launch(settings, algorithm, draft_tokens, when, python, flags, env, gpus):
    sizes = sorted(int(b) for b in settings["batch_sizes"])
    try:
        built = sglang_repro.launch_configs(settings, algorithm, draft_tokens)
    except configs.ConfigError as exc:
        return {"algorithm": algorithm, "draft_tokens": draft_tokens, "when": when, "refused": str(exc),
                "argv": [], "env": env, "target_config": None, "draft_config": None, "cells": [],
                "gpus": gpus["gpus"], "gpus_why": gpus["why"]}
    tag = "%s-%d" % (algorithm.lower(), draft_tokens)
    spec = sglang_repro.launch_spec(settings, algorithm, sizes, draft_tokens, os.path.join(WORKDIR, "target-" + tag),
                                    os.path.join(WORKDIR, "draft-" + tag), built["layers"])
    argv, omitted = launch_plan.build_argv(python, spec, flags)
    rejected = launch_plan.rejected_values(argv, flags)
    refused = built["refused"] or ("the release's parser would refuse " + "; ".join(rejected) if rejected else None)
    return {"algorithm": algorithm, "draft_tokens": draft_tokens, "when": when, "argv": argv,
            "omitted_flags": omitted, "env": env, "target_config": built["target"], "draft_config": built["draft"],
            "config_sources": dict((k, v) for k, v in built["sources"].items() if k != "draft_dir"),
            "config_notes": built["notes"], "layers": built["layers"], "refused": refused,
            "cells": [[size, draft_tokens] for size in sizes], "gpus": gpus["gpus"], "gpus_why": gpus["why"],
            "limits": sglang_repro.launch_limits(sizes)}


def budget(settings, mode_list, probe_left, reserve, most_launches):
    """The time plan: the probe's limit now, what it keeps back, and how many worst-case launches fit."""
    sizes = settings["batch_sizes"]
    limits = sglang_repro.launch_limits(sizes)
    work = max(0.0, probe_left - reserve)
    out = {"probe_s": round(probe_left, 1), "reserve_s": reserve, "work_s": round(work, 1), "modes": mode_list,
           "launch": limits, "cell_timeout_s": settings["cell_timeout"]}
    if "sglang" in mode_list:
        fit = int(work // limits["worst_s"]) if limits["worst_s"] else 0
        out.update(launches_at_most=most_launches, launches_fit_at_worst=fit,
                   fits=fit >= most_launches,
                   what_fits="every launch, even at worst" if fit >= most_launches else
                   "%d of at most %d launches at their worst waits; waits are cut to the time left and a launch "
                   "past it is skipped, said so" % (fit, most_launches))
    return out


def plan(ctx, settings, python, modes, force, reserve, most_steps):
    """{"launches", "budget", "gpus", "notes"}: what a run with these settings would do, nothing started."""
    gpus = gpus_for(ctx, settings, force)
    source = ctx.results.get("sglang_source") or {}
    launches, notes = ([], [])
    if "sglang" in modes:
        launches, notes = sglang_launches(settings, python, source, gpus)
        if not source.get("server_flags"):
            notes.append("sglang's server flags unknown (sglang_source gave none): canonical spellings shown")
    algorithms = sorted(set(item["algorithm"] for item in launches))
    values = sweep.draft_token_values(*settings["draft_tokens"])
    most = most_steps(algorithms, values, 1)
    return {"launches": launches, "gpus": gpus, "notes": notes,
            "budget": budget(settings, modes, ctx.time_left(), reserve, most)}
