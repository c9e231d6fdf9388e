"""The remote command line, written so that every login shell reads it the same way.

sshd hands the command to the user's login shell: bash, dash, zsh, tcsh or fish. They agree on
single-quoted text only while it holds no `'`, no `\\` (fish reads `\\'` inside single quotes as an
escape), no `!` (csh history) and no newline (csh refuses it). So a word is written bare when it is
made of characters no shell treats specially, single-quoted when its characters are printable ASCII
outside those four, and refused otherwise: a value that would need per-shell quoting never runs.
"""

from __future__ import annotations

import re

_BARE = re.compile(r"^[A-Za-z0-9_@+:,./-][A-Za-z0-9_@%+=:,./-]*$")  # no leading % (fish), = (zsh)
_QUOTABLE = re.compile(r"^[ -~]*$")  # printable ASCII
_NEVER_IN_QUOTES = set("'\\!")
ALLOWED = "letters, digits, space and printable ASCII except ' \\ !"


class UnsafeWord(ValueError):
    """A word that login shells would not all read the same way."""


def shell_word(word: str) -> str:
    """The word as it goes on the remote command line; UnsafeWord when no shell-neutral form exists."""
    if _BARE.match(word):
        return word
    bad = sorted({c for c in word if c in _NEVER_IN_QUOTES or not _QUOTABLE.fullmatch(c)})
    if bad:
        shown = ", ".join(repr(c) for c in bad[:5])
        raise UnsafeWord(
            f"{word[:60]!r} holds {shown}, which login shells (bash, dash, zsh, tcsh, fish) "
            f"read differently; allowed: {ALLOWED}"
        )
    return f"'{word}'"


def command_line(argv: list[str]) -> str:
    return " ".join(shell_word(word) for word in argv)
