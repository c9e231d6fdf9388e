"""`--fail-on LEVEL`, the one option scan, report and repro share to choose what fails a CI job."""

from __future__ import annotations

from typing import Any

import click

from gpudiag.verdict import DEFAULT_FAIL_ON, FAIL_ON_LEVELS


def fail_on_option(f: Any) -> Any:
    return click.option(
        "--fail-on",
        type=click.Choice(FAIL_ON_LEVELS),
        default=DEFAULT_FAIL_ON,
        show_default=True,
        help="Exit 1 when a finding is at or above this severity; `incomplete`: findings never "
        "fail, only checks that could not run (exit 4).",
    )(f)
