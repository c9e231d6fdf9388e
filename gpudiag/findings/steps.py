"""Next steps, decided once: the one line each finding asks of the user, and the order they come in.

The order is what a finding costs the user: a crash (or a failure the repro measured) first, then a measured loss
(speculation slower than its baseline, a saving per decode step), then the rest by severity; fleet drift last among
findings of its severity, since it says only that hosts differ. A finding without its own action is never shown as
"Act on: <title>": its recommendation's first sentence (a command, a flag, an upgrade) stands in for it.
"""

from __future__ import annotations

import re

from gpudiag.models import SEVERITY_RANK, Finding

# What a finding costs, cheapest last: the rank breaks ties within a severity.
CRASHES = ("cuda_graph.log_crash", "cuda_graph.repro_failure", "cuda_graph.log_signature", "hosts.unscanned")
MEASURED_LOSSES = ("serving.speculation_loses",)
DRIFT = ("fleet.drift",)
# The end of a recommendation's first sentence: a period before a capital or the end ("e.g. 32" stays whole).
SENTENCE_END = re.compile(r"(?<=[^.]{3}\.)\s+(?=[A-Z`(])")


def cost(finding: Finding) -> int:
    """0 a crash or failed run, 1 a measured loss, 2 anything else, 3 drift between hosts."""
    if finding.id in CRASHES:
        return 0
    if finding.id in MEASURED_LOSSES or finding.saving_us_per_step is not None:
        return 1
    return 3 if finding.id in DRIFT else 2


def order(finding: Finding) -> tuple[int, int, float, int]:
    """Sort key of a step: severity, then what it costs the user, then the saving it claims, then its hosts."""
    return (
        SEVERITY_RANK.get(finding.severity, 9),
        cost(finding),
        -(finding.saving_us_per_step or 0.0),
        -len(finding.hosts),
    )


def step(finding: Finding) -> str:
    """The finding's one line to act on: its action, else its recommendation's first sentence."""
    if finding.action:
        return finding.action
    first = SENTENCE_END.split(finding.recommendation.strip(), maxsplit=1)[0].rstrip(". ")
    return first or finding.title
