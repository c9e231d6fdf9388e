"""How a host's time is spent, as the control side words it. The control side does not split a --timeout: the
runner on the host holds one deadline and hands its time out as the probes run (probes/timeshare.py), each
long probe getting its share of what is left when it starts, what one leaves unused going to the next. This
module says so before a scan, and after it says what each long probe was given, from the limits the runner
reported back with its results."""

from __future__ import annotations

from collections.abc import Mapping

from gpudiag.models import ProbeResult

MAX_HOST_LINES = 5  # hosts named one by one after a scan; more are counted


def plan_line(declared: Mapping[str, float], timeout: float | None) -> str | None:
    """One line saying how the host will share a --timeout too short for the long probes' declared limits."""
    if timeout is None or not declared or sum(declared.values()) <= timeout:
        return None
    parts = ", ".join(f"{name} up to {declared[name]:.0f} s" for name in sorted(declared))
    return (
        f"--timeout {timeout:.0f} s is less than the GPU probes declare ({parts}): the host hands its time out as "
        "they run, each its share of what is left in proportion to its declared limit, what one leaves unused "
        "going to the next"
    )


def given_text(result: ProbeResult) -> str | None:
    """'given 42 s of its 900 s' when the host gave a probe less than it declares, else None."""
    limit, declared = result.limit_s, result.declared_s
    if limit is None or declared is None or limit >= declared:
        return None
    return f"given {limit:.0f} s of its {declared:.0f} s"


def given(probes: Mapping[str, ProbeResult]) -> list[str]:
    """'copy_bench given 42 s of its 900 s, used 9 s' for each probe the host gave less than it declares."""
    return [
        f"{name} {text}, used {result.duration_s:.0f} s"
        for name, result in sorted(probes.items())
        if (text := given_text(result))
    ]


def given_lines(hosts: list[tuple[str, Mapping[str, ProbeResult]]]) -> list[str]:
    """Per host, what its long probes were given when it was less than declared; the first few hosts named."""
    lines = [f"{name}: {'; '.join(parts)}" for name, probes in hosts if (parts := given(probes))]
    more = len(lines) - MAX_HOST_LINES
    return lines[:MAX_HOST_LINES] + (
        [f"and {more} more host(s) whose GPU probes got less than declared"] if more > 0 else []
    )
