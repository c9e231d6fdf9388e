"""The one line a report gives on how a run's ssh hosts got their settings: `ssh -G` or gpudiag's own
ssh_config reader (and why), from run.json's `ssh_settings`."""

from __future__ import annotations

from typing import Any, Mapping

from gpudiag.render.answers_block import hosts_label


def ssh_settings_line(extra: Mapping[str, Any]) -> str | None:
    """`ssh settings: resolved by ...`; hosts named only where the resolvers differ. None for a run
    without ssh hosts (or one stored before this was recorded)."""
    block = extra.get("ssh_settings")
    resolved = block.get("resolved_by") if isinstance(block, dict) else None
    if not isinstance(resolved, dict) or not resolved:
        return None
    by_resolver: dict[str, list[str]] = {}
    for name, how in resolved.items():
        by_resolver.setdefault(str(how), []).append(str(name))
    if len(by_resolver) == 1:
        return f"ssh settings: resolved by {next(iter(by_resolver))}"
    parts = [f"{how} for {hosts_label(names)}" for how, names in by_resolver.items()]
    return "ssh settings: resolved by " + "; by ".join(parts)
