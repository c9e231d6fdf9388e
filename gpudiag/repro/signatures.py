"""Crash-log classification as the control side uses it (`repro --log`, container logs fetched by a scan).

The classifier lives probe-side (probes/crashlog, standard library only) so that a host classifies its live
server's log, and a repro cell its failure, with exactly the rules used here.
"""

from __future__ import annotations

from typing import Any

from probes.crashlog.classify import OUTCOMES, classify

__all__ = ["OUTCOMES", "classify_log"]


def classify_log(text: str, installed_release: str | None = None) -> dict[str, Any]:
    """known_signature | unclassified_crash | clean, with every crash in order (probes.crashlog.classify)."""
    return classify(text, None, installed_release)
