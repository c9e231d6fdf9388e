"""How each probe measured what the report cites, for the probes that ran: the appendix's last section (the report
itself stays at the findings and what to do)."""

from __future__ import annotations

from typing import Any

from gpudiag.derived import remembered
from gpudiag.models import HostResult
from gpudiag.run_records import LoadedRun
from gpudiag.probe_view import probe
from gpudiag.render.copy_timings import METHOD_TEXT, methods_and_samples, timings
from gpudiag.render.safe_text import md

METHOD_LINES = (
    (
        "env",
        "Environment: hostname, OS and Python read on each host by the probing interpreter, torch's build in a "
        "child of the serving interpreter; GPUs, driver and topology from `nvidia-smi` (each command under a "
        "timeout).",
    ),
    (
        "sglang_source",
        "Source facts: the installed sglang read as text and AST on the host (never imported); "
        "every fact names its file (relative to site-packages) and line. Integrity: files hashed "
        "against the wheel's RECORD (the cited files; `--verify-all` hashes all), or `git status` "
        "of a checkout.",
    ),
    (
        "deployment",
        "Deployment: running sglang servers found from the process table; flags parsed from their command lines.",
    ),
    (
        "torch_caps",
        "torch capabilities: `torch._foreach_copy_` looked up, then run on each dtype pair and "
        "compared with a per-tensor `copy_`, in the serving interpreter when one is known.",
    ),
    (
        "cuda_graph",
        "CUDA-graph repro: each cell (path, batch size, draft tokens) captures and replays in its own "
        "child process, output compared with eager; failures matched against known signatures.",
    ),
)


def methodology(run: LoadedRun) -> list[str]:
    ran = {name for h in run.hosts for name, p in h.probes.items() if p.status == "ok"}
    lines = [f"- {text}" for probe_name, text in METHOD_LINES if probe_name in ran]
    if "copy_bench" in ran:
        methods, samples = methods_and_samples(t for h in run.hosts for t in copy_timings_of(h))
        measured = "; ".join(f"`{md(m)}`: {METHOD_TEXT.get(m, md(m))}" for m in methods) or "none recorded"
        counts = f"{'/'.join(map(str, samples))} samples per timing" if samples else "no sample counts recorded"
        lines.append(
            "- Copy timings: each strategy copies the tensors a replay copies, checked against saved "
            "copies of its sources; medians with p10/p90, eager and inside a captured graph. Per decode "
            f"step: one replay per path. Methods: {measured}; {counts}. A GPU is an outlier when the "
            "median of its figures over its siblings' is more than 20% off (three GPUs or more)."
        )
    if not lines:
        return []
    return ["## Methodology", ""] + lines + [""]


@remembered
def copy_timings_of(host: HostResult) -> list[dict[str, Any]]:
    """The methods and sample counts of the host's copy-bench timings, each pair once (all the methodology reads)."""
    kept = {
        (str(t["method"]) if t.get("method") else None, t["samples"] if isinstance(t.get("samples"), int) else None)
        for t in timings(probe(host, "copy_bench"))
    }
    return [{"method": method, "samples": samples} for method, samples in kept]
