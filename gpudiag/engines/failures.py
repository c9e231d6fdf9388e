"""Maps what an engine said about a host it could not run the bundle on to a gpudiag host status."""

from __future__ import annotations

import re

from gpudiag.models import AUTH_FAILED, FRAME_ERROR, HOST_KEY_CHANGED, HOST_KEY_UNKNOWN, PYTHON_MISSING, UNREACHABLE

# Checked in order: the first pattern found in the engine's message decides the status.
_PATTERNS = (
    (HOST_KEY_CHANGED, re.compile(r"REMOTE HOST IDENTIFICATION HAS CHANGED|host key for .* has changed", re.I)),
    (HOST_KEY_UNKNOWN, re.compile(r"Host key verification failed|No \S+ host key is known", re.I)),
    (AUTH_FAILED, re.compile(r"Permission denied|Authentication failed|Too many authentication failures", re.I)),
    (
        UNREACHABLE,
        re.compile(
            r"Connection refused|No route to host|Connection timed out|timed out during "
            r"banner|Could not resolve hostname|Name or service not known|Network is "
            r"unreachable|Connection closed by|Connection reset|ssh exited with exit code 255|"
            r"Failed to connect to the host",
            re.I,
        ),
    ),
    (
        PYTHON_MISSING,
        re.compile(
            r"python[\d.]*: (command )?not found|python[\d.]*: No such file or directory|"
            r"exit code 127\b|/usr/bin/env: .?python",
            re.I,
        ),
    ),
)


def status_from_message(text: str, default: str = FRAME_ERROR) -> str:
    for status, pattern in _PATTERNS:
        if pattern.search(text):
            return status
    return default


def one_line(text: str, limit: int = 200) -> str:
    """The most telling line of an engine's message: the last non-empty one, shortened."""
    lines = [line.strip() for line in text.replace("\r", "\n").splitlines() if line.strip()]
    for _status, pattern in _PATTERNS:
        for line in lines:
            if pattern.search(line):
                return line[:limit]
    return (lines[-1] if lines else "no output")[:limit]
