"""The `gpudiag` command: a click group whose subcommands live one per module in this package.

Deviation from DESIGN.md's single `cli.py`: the commands are split into modules of this package
(scan, hosts, report, repro, engines) to keep each small, loaded when their command runs; only this
package prints, writes files or exits.
"""
from __future__ import annotations

import enum
import importlib
import os
import sys

import click

from gpudiag import __version__


class ExitCode(enum.IntEnum):
    OK = 0                 # all hosts ok, no error-severity finding
    FINDINGS = 1           # error-or-worse findings
    USAGE = 2              # usage or input error
    HOSTS_FAILED = 3       # some hosts could not be scanned
    NOTHING_RAN = 4        # repro: every cell skipped (no CUDA / nothing to run on)
    INTERNAL = 70          # a bug in gpudiag itself (EX_SOFTWARE), never confused with "error findings"
    INTERRUPTED = 130      # Ctrl-C (128 + SIGINT, as shells report it)
    TERMINATED = 143       # SIGTERM (timeout, CI, Slurm): finished hosts kept, the run marked interrupted
    HANGUP = 129           # SIGHUP (the terminal went away): the same


class UserError(click.ClickException):
    """A one-line error about the user's input; exits 2 without a traceback."""
    exit_code = ExitCode.USAGE

    def show(self, file=None) -> None:  # type: ignore[override]
        click.echo(f"gpudiag: error: {self.format_message()}", err=True)


# Command name → (module in this package, attribute). Modules load only when their command runs: a scan
# of one host should not pay for importing the report and repro machinery.
LAZY_COMMANDS = {
    "scan": ("scan", "scan"),
    "hosts": ("hosts", "hosts"),
    "report": ("report", "report"),
    "repro": ("repro", "repro"),
    "bundle": ("engines", "bundle_cmd"),
    "ingest": ("engines", "ingest"),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(LAZY_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in LAZY_COMMANDS:
            return None
        module, attribute = LAZY_COMMANDS[cmd_name]
        command: click.Command = getattr(importlib.import_module(f"gpudiag.cli.{module}"), attribute)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpudiag")
def cli() -> None:
    """Remote diagnostics for multi-GPU LLM inference hosts."""


def main() -> None:
    # standalone_mode=False: click's own mode turns Ctrl-C and a stray EOFError into "Aborted!" with exit 1,
    # which a CI job would read as "error findings".
    try:
        code = cli.main(prog_name="gpudiag", standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, click.Abort) as exc:
        cause = exc.__cause__ if isinstance(exc, click.Abort) else None
        if cause is not None and not isinstance(cause, KeyboardInterrupt):
            _internal_error(cause)
        sys.exit(ExitCode.INTERRUPTED)  # outside a scan, Ctrl-C just ends quietly
    except BrokenPipeError:  # `gpudiag report | head`: the reader left; nothing to say
        sys.stdout = None  # type: ignore[assignment]  # no flush at exit onto the closed pipe
        sys.exit(1)
    except Exception as exc:
        _internal_error(exc)
    sys.exit(code if isinstance(code, int) else ExitCode.OK)


def _internal_error(exc: BaseException) -> None:
    """An unexpected exception is a gpudiag bug: one line and exit 70, the traceback only on request."""
    if os.environ.get("GPUDIAG_DEBUG"):
        import traceback
        traceback.print_exception(type(exc), exc, exc.__traceback__)
    message = (str(exc).splitlines() or [""])[0]
    click.echo(f"gpudiag: internal error: {type(exc).__name__}: {message} "
               f"(rerun with GPUDIAG_DEBUG=1 for the traceback)", err=True)
    sys.exit(ExitCode.INTERNAL)
