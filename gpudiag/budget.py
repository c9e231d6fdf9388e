"""The GPU probes' time limits planned inside a user's --timeout: each GPU probe declares its own limit
(probes/catalog.py), and when their sum does not fit the host's deadline they share what is left after the
light probes in proportion to their declared limits, so one probe never eats the budget of the next."""

from __future__ import annotations

LIGHT_RESERVE_S = 60.0  # connecting, starting Python and the light probes, inside a user's --timeout
MIN_PROBE_S = 10.0  # below this a GPU probe cannot start its child and say anything useful
ANSWER_ROOM_S = 20.0  # the runner's answer travelling back (orchestrator.runner_budget keeps as much)


def planned_limits(declared: dict[str, float], timeout: float | None) -> dict[str, float]:
    """Each GPU probe's limit: as declared when they fit in `timeout` (or no --timeout was given), else a share
    of what the light probes leave, in proportion to the declared limits."""
    if timeout is None or not declared:
        return dict(declared)
    room = max(0.0, timeout - min(ANSWER_ROOM_S, 0.2 * timeout) - LIGHT_RESERVE_S)
    total = sum(declared.values())
    if total <= room:
        return dict(declared)
    return {name: round(max(MIN_PROBE_S, room * limit / total), 1) for name, limit in declared.items()}


def plan_line(declared: dict[str, float], planned: dict[str, float], timeout: float | None) -> str | None:
    """One line saying how a --timeout was shared out, when it changed a declared limit; None otherwise."""
    if planned == declared or timeout is None:
        return None
    parts = ", ".join(f"{name} {planned[name]:.0f} s of its {declared[name]:.0f} s" for name in sorted(planned))
    return (
        f"--timeout {timeout:.0f} s: the GPU probes share what the light probes leave ({parts}); "
        "raise --timeout to give them their declared limits"
    )
