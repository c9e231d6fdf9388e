"""The console listings and summaries print their tables on."""

from __future__ import annotations

import sys

from gpudiag.cli.common import ResultConsole

# Off a terminal (`gpudiag runs | grep finished`) a table row stays one line: no width to wrap or fold at.
PIPED_WIDTH = 10_000


def table_console() -> ResultConsole:
    """The terminal's width there, unlimited when piped (a narrow COLUMNS included)."""
    return ResultConsole() if sys.stdout.isatty() else ResultConsole(width=PIPED_WIDTH)
