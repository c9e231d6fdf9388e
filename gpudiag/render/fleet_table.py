"""The report's fleet table: hosts whose rows agree (status, GPUs, driver, torch, sglang, serving) are one row
with their count and names, so its length follows what differs in the fleet, not how many hosts it has.

Split from render/markdown.py, which renders the rest of the report.
"""

from __future__ import annotations

from typing import Any

from gpudiag.findings import host_facts
from gpudiag.run_records import LoadedRun
from gpudiag.render.answers_block import host_list
from gpudiag.render.blocks import table
from gpudiag.render.safe_text import md
from gpudiag.verdict import Verdict

COLUMNS = ("status", "GPUs", "driver", "torch", "sglang", "speculative", "CUDA graphs (decode)")


def fleet_section(run: LoadedRun, verdict: Verdict) -> list[str]:
    if not run.hosts:
        return ["## Fleet", "", "No hosts: this run read a file on this machine and contacted none.", ""]
    shown = {h.name: h.status for h in verdict.hosts}
    rows: dict[tuple[Any, ...], list[str]] = {}
    pythons: dict[tuple[str, str], list[str]] = {}
    for h in run.hosts:
        try:
            f = host_facts(h)
        except Exception as exc:  # noqa: BLE001 - one host's odd data never breaks the fleet's report
            row: tuple[Any, ...] = (shown.get(h.name, h.status), f"data could not be read ({type(exc).__name__})")
            rows.setdefault(row + ("-",) * 5, []).append(h.name)
            continue
        torch = f"{f.torch} (another Python than sglang's)" if f.torch_elsewhere else f.torch
        row = (shown.get(h.name, f.status), f.gpus, f.driver, torch, f.sglang, f.speculative, f.cuda_graphs)
        rows.setdefault(row, []).append(f.name)
        if (f.sglang_interpreter, f.torch_interpreter) != ("-", "-"):
            same = f.torch_interpreter.split(" (")[0] == f.sglang_interpreter.split(" (")[0]
            pythons.setdefault((f.sglang_interpreter, "the same Python" if same else f.torch_interpreter), []).append(
                f.name
            )
    lines = ["## Fleet", ""] + table([("hosts",) + COLUMNS] + [(_names(n),) + r for r, n in rows.items()])
    return lines + _interpreters(pythons)


def _names(names: list[str]) -> str:
    """One host by its name; several as their count and names (ten, then how many more)."""
    return names[0] if len(names) == 1 else host_list(names)


def _interpreters(pythons: dict[tuple[str, str], list[str]]) -> list[str]:
    if pythons and all(torch == "the same Python" for _, torch in pythons):
        return [
            "Interpreters: torch and sglang were read in the same Python on every host: "
            + "; ".join(f"{md(_names(names))} {md(sglang)}" for (sglang, _), names in pythons.items())
            + ".",
            "",
        ]
    if not pythons:
        return []
    return [
        "Interpreters: the Python whose sglang the source facts describe, and the one torch's facts "
        "(env, torch_caps) were read in.",
        "",
    ] + table(
        [("hosts", "sglang read from (chosen by)", "torch read in")]
        + [(_names(names), sglang, torch) for (sglang, torch), names in pythons.items()]
    )
