"""Real reproduction: launch the host's sglang with dummy weights for one cell and classify the outcome."""
import functools
import os
import time

from probes.crashlog.cell import cell_fields, classify_cell
from probes.graphrepro import capture, configs, launch_plan, launcher, traffic
from probes.graphrepro.cells import BUDGET_SPENT, cell as new_cell

READY_TIMEOUT = 900.0
REQUEST_TIMEOUT = 180.0
MIN_REQUEST_SECONDS = 10.0   # a batch size is not started with less work time than this
AFTER_REQUESTS_SECONDS = 12.0   # the settle pause, the health check and the request threads' slack
LOG_EXCERPT_LINES = 30
IMPORT_TIMEOUT = 120.0   # importing sglang's server module once, before the first launch
# A death before the server was ready and outside graph capture is no result: the launch itself was wrong.
OWN_ERROR = "the repro's own error: the server died before it was ready"


CAPTURE_FAMILIES = ("capture_failure", "oom_in_capture", "capture_hang")
# One launch's log is read once, not once per batch size (its cells share the verdict, read-only).
_verdict = functools.lru_cache(maxsize=2)(classify_cell)


def classify(ready, results, alive_after, acceptance, judge_acceptance, log_text, release=None, known=""):
    """(status, detail, verdict) for one launched cell; `verdict` is the crash-log classifier's reading of the
    server's log (probes.crashlog.cell), the same `repro --log` gives. Pure: tests feed it recorded outcomes."""
    verdict = _verdict(log_text, release if isinstance(release, str) else None, str(known or ""))
    if ready == "hang":
        return "hang", "server neither ready nor dead before the timeout", verdict
    if ready == "died":
        if verdict["family"] == "not_a_graph_problem":   # an import error or a taken port is no graph failure
            return "error", "%s, not in graph code: %s" % (OWN_ERROR, verdict["crash"]), verdict
        if verdict["phase"] == "capture" or verdict["family"] in CAPTURE_FAMILIES:
            return "capture_failed", "server died during start-up (graph capture)", verdict
        last = [line for line in log_text.strip().splitlines() if line.strip()][-1:] or ["no output"]
        return "error", "%s, outside graph capture: %s" % (OWN_ERROR, last[0][:200]), verdict
    failed = [r for r in results if not r.get("ok")]
    if failed or not alive_after:
        timeouts = [r for r in failed if str(r.get("error", "")).startswith("timeout")]
        if alive_after and timeouts and len(timeouts) == len(failed):
            return "hang", "%d of %d requests got no answer; server still running" % (
                len(timeouts), len(results)), verdict
        what = "server died" if not alive_after else "server answered errors"
        first = failed[0].get("error") if failed else "no error on the requests"
        return "crashed_on_request", "%s under %d concurrent requests (%s)" % (what, len(results), first), verdict
    if judge_acceptance and acceptance is not None and acceptance <= 1.0:
        return "silent_failure", "acceptance length %.2f: no draft token accepted" % acceptance, verdict
    return "ok", "", verdict


def launch_configs(settings, algorithm, draft_tokens):
    """The target and draft config.json one launch writes, built to sglang's capture rules (capture.py):
    {"target", "draft", "sources", "layers", "refused", "notes"}. `layers` is the target's cut as written
    (never more than the model has, raised where the draft needs more capturable layers); `refused` says
    why the draft could not receive its hidden states, else None. Reads config.json files only."""
    notes = []
    draft_src = settings.get("draft_model")
    if settings.get("draft_algorithm") not in (None, algorithm):
        draft_src = None  # the deployment's draft belongs to another algorithm
    own_draft = None
    if draft_src and os.path.isfile(os.path.join(draft_src, "config.json")):
        own_draft = configs.read_config(draft_src)
    asked = int(settings["layers"])
    needed = capture.layers_needed(algorithm, own_draft)
    target, target_source = configs.target_config(settings.get("model"), max(asked, needed))
    layers = configs.layer_count(target)
    if layers > asked:
        notes.append("%s target cut to %d layers, not %d: its draft takes %d hidden states and %s" % (
            algorithm, layers, asked, capture.id_count(own_draft, algorithm), capture.WHY))
    if own_draft is not None:
        draft = configs.fit_draft(own_draft, target, algorithm, draft_tokens)
        draft_source = os.path.join(draft_src, "config.json")
    else:
        draft = configs.derive_draft(target, algorithm, draft_tokens)
        draft_source = "derived from the target for %s" % algorithm
    if algorithm == "DFLASH":
        draft = configs.set_layers(draft, layers)  # the launch's layer-cut override reaches the draft too
    return {"target": target, "draft": draft, "layers": layers, "notes": notes,
            "sources": {"target": target_source, "draft": draft_source, "draft_dir": draft_src},
            "refused": capture.refusal(layers, draft, algorithm)}


def prepare_dirs(workdir, settings, algorithm, draft_tokens):
    """Write the reduced target and the draft model dirs; returns (target_dir, draft_dir, built), `built`
    being launch_configs' answer."""
    built = launch_configs(settings, algorithm, draft_tokens)
    tag = "%s-%d" % (algorithm.lower(), draft_tokens)
    target_dir = configs.write_model_dir(os.path.join(workdir, "target-" + tag), built["target"])
    configs.copy_code_files(settings.get("model"), target_dir)
    draft_dir = configs.write_model_dir(os.path.join(workdir, "draft-" + tag), built["draft"])
    configs.copy_code_files(built["sources"]["draft_dir"], draft_dir)
    return target_dir, draft_dir, built


def launch_spec(settings, algorithm, sizes, draft_tokens, target_dir, draft_dir, layers):
    """What launch_plan.build_argv turns into one server's argv (a fresh loopback port each time)."""
    topk = int(settings.get("topk", 1))
    return {"model_dir": target_dir, "draft_dir": draft_dir, "algorithm": algorithm, "batch_sizes": sizes,
            "draft_tokens": draft_tokens, "layers": layers, "steps": max(1, (draft_tokens - 1) // topk),
            "topk": topk, "tp": settings.get("tp", 1), "port": launcher.free_port(),
            "mem_fraction": settings.get("mem_fraction", 0.5), "model_override": settings.get("model_override")}


def launch_limits(sizes):
    """The most one launch may wait: for readiness, then per batch size for its requests and the pause."""
    per_size = REQUEST_TIMEOUT + AFTER_REQUESTS_SECONDS
    return {"import_check_s": IMPORT_TIMEOUT, "ready_s": READY_TIMEOUT, "per_batch_size_s": per_size,
            "worst_s": READY_TIMEOUT + per_size * len(sizes)}


def run_launch(settings, algorithm, batch_sizes, draft_tokens, workdir, python, flags, env, release, known,
               time_left):
    """One server for one draft-token budget, graphs captured for every batch size; then concurrent
    requests at each batch size, smallest first. Returns one cell per batch size. The group is always killed.

    `release` (the installed sglang) words the advice; `known` (e.g. "compute capability sm_103") takes part
    in the signatures' `requires`. `time_left()` is the work time left (the caller keeps its own reserve for
    cleanup): readiness waits and request timeouts are cut to it, and batch sizes it leaves no time for are
    skipped."""
    started = time.monotonic()
    target_dir, draft_dir, built = prepare_dirs(workdir, settings, algorithm, draft_tokens)
    layers, sources = built["layers"], dict((k, v) for k, v in built["sources"].items() if k != "draft_dir")
    sizes = sorted(int(b) for b in batch_sizes)
    launch = launch_spec(settings, algorithm, sizes, draft_tokens, target_dir, draft_dir, layers)
    argv, omitted = launch_plan.build_argv(python, launch, flags)
    common = {"command": argv, "omitted_flags": omitted, "config_sources": sources, "config_notes": built["notes"]}

    def skipped_all(detail):
        return [new_cell("sglang", algorithm, s, draft_tokens, "skipped", detail, "sglang", **common) for s in sizes]
    refused = launch_plan.rejected_values(argv, flags)
    reason = "refused before launch: " + built["refused"] if built["refused"] else \
        "the release's parser would refuse %s" % "; ".join(refused) if refused else \
        launch_plan.missing_dependency(python, env, timeout=min(IMPORT_TIMEOUT, max(5.0, time_left())))
    if reason:  # never launched: an uncapturable cut, a refused flag or a missing module is no graph failure
        return skipped_all(reason)
    log_path = os.path.join(workdir, "server-%s-dt%d.log" % (algorithm.lower(), draft_tokens))
    outcomes, skipped = {}, {}
    with launcher.ServerProcess(argv, launch["port"], log_path, env) as server:
        ready_budget = min(READY_TIMEOUT, max(0.0, time_left() - MIN_REQUEST_SECONDS))
        ready = server.wait_ready(ready_budget)
        if ready == "hang" and ready_budget < READY_TIMEOUT:
            ready = "budget"  # not a hang: the wait was cut short by the time left
        alive = ready == "ready"
        for size in sizes:
            if not alive:
                break
            request_timeout = min(REQUEST_TIMEOUT, time_left() - AFTER_REQUESTS_SECONDS)
            if request_timeout < MIN_REQUEST_SECONDS:
                skipped[size] = "%s before batch size %d" % (BUDGET_SPENT, size)
                continue
            results = traffic.send_concurrent(launch["port"], size, timeout=request_timeout, seed=size)
            time.sleep(1.0)  # a crash right after the answers still counts
            alive = server.alive() and server.health()
            outcomes[size] = (results, alive, traffic.acceptance_length(results))
        exit_state = server.exit_description()
    log_text = server.log_text()
    common.update(server_exit=exit_state, launch_s=round(time.monotonic() - started, 2))
    missing = launch_plan.import_failure(log_text, python) if ready == "died" else None
    if missing:  # a module only a server child imports (the scheduler's) is missing from the venv
        return skipped_all(missing)
    if ready == "budget":
        detail = "%s while waiting for the server to be ready (%.0f s)" % (BUDGET_SPENT, ready_budget)
        return skipped_all(detail)
    return [new_cell("sglang", algorithm, s, draft_tokens, "skipped", skipped[s], "sglang", **common)
            if s in skipped else _launch_cell(algorithm, draft_tokens, common, s, ready, outcomes, settings, log_text,
                                              release, known) for s in sizes]


def _launch_cell(algorithm, draft_tokens, common, size, ready, outcomes, settings, log_text, release, known):
    if ready == "ready" and size not in outcomes:
        return new_cell("sglang", algorithm, size, draft_tokens, "skipped",
                        "not reached: the server died at a smaller batch size", "sglang", **common)
    results, alive, acceptance = outcomes.get(size, ([], False, None))
    status, detail, verdict = classify(ready, results, alive, acceptance, settings.get("judge_acceptance", False),
                                       log_text, release, known)
    cell = new_cell("sglang", algorithm, size, draft_tokens, status, detail, "sglang", acceptance_length=acceptance,
                    **common)
    if status != "ok":
        cell.update(cell_fields(verdict))
        cell["log_excerpt"] = log_text.strip().splitlines()[-LOG_EXCERPT_LINES:]
    elif verdict["note"]:   # a healthy server whose log still shows something worth a look
        cell.update(signature=verdict["note"], advice_assumes=verdict["advice_assumes"])
    return cell
