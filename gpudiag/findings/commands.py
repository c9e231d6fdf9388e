"""Commands a report offers ("Reproduce:", the answers' commands) carry the run's own inventory, interpreter and
limit, so pasting one gathers the same evidence from the same hosts through the same Python."""

from __future__ import annotations

import shlex
from typing import Sequence

# Options of the run that decide which hosts are reached and which Python reads them; their values follow them.
CARRIED = ("-i", "--inventory", "--python", "--limit")


def carried_options(argv: Sequence[str]) -> list[str]:
    """The run's -i/--inventory, --python and --limit with their values, as given (both `--opt v` and `--opt=v`)."""
    words, out = list(argv), []
    for i, word in enumerate(words):
        name = word.split("=", 1)[0]
        if name not in CARRIED:
            continue
        if "=" in word:
            out += [name, word.split("=", 1)[1]]
        elif i + 1 < len(words):
            out += [name, words[i + 1]]
    return out


def with_run_options(command: str, argv: Sequence[str]) -> str:
    """`command` with the run's carried options appended, unless the command already sets them."""
    if not command:
        return command
    present = set(command.split())
    extra = carried_options(argv)
    pairs = [(extra[i], extra[i + 1]) for i in range(0, len(extra), 2)]
    kept = [f"{name} {shlex.quote(value)}" for name, value in pairs if name not in present]
    return " ".join([command, *kept])
