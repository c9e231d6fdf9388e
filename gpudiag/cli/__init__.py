"""The `gpudiag` command: a click group whose subcommands live one per module in this package.

Commands return an ExitCode (or raise); `main` is the one place that turns results and errors into
exit statuses and one-line messages. Only this package exits and writes messages (click.echo). Elsewhere the
renderers draw on the rich consoles the commands give them (stderr by default), and transports/known_hosts.py
warns once on stderr about a line of the operator's own file. Files are written here (--output), by store.py
(through atomic_files.py and run_journal.py), by transports/hostkeys.py (gpudiag's known_hosts, --accept-new),
by render/plots.py (charts), by derived_files.py (what a scan derived of each host) and by user_key.py (the key
sealing it); tests/control/test_layer_rules.py holds these rules.
"""

from __future__ import annotations

import importlib
import os
import re
import signal
import sys
from typing import Any, NoReturn

try:  # Ctrl-C while the command's modules load ends it as Ctrl-C anywhere else does: 130, no traceback
    import click

    from gpudiag import __version__
    from gpudiag.exit_codes import ExitCode
except KeyboardInterrupt:
    sys.exit(130)


class UserError(click.ClickException):
    """A one-line error about the user's input; exits 2 without a traceback."""

    exit_code = ExitCode.USAGE

    def show(self, file: Any = None) -> None:
        click.echo(f"gpudiag: error: {visible(self.format_message())}", err=True)


# Terminal controls and bidi overrides from the operator's own input (a file name, a flag value) are shown
# escaped in an error line, never obeyed by the terminal.
_CONTROLS = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    return _CONTROLS.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), text)


class _PipeClosed(Exception):
    """stdout's reader went away mid-command (click would turn the BrokenPipeError into exit 1)."""


# Command name → (module in this package, attribute). Modules load only when their command runs: a scan
# of one host should not pay for importing the report and repro machinery.
LAZY_COMMANDS = {
    "scan": ("scan", "scan"),
    "hosts": ("hosts", "hosts"),
    "probes": ("probes", "probes"),
    "report": ("report", "report"),
    "repro": ("repro", "repro"),
    "runs": ("run_list", "runs"),
    "diff": ("diff", "diff"),
    "bundle": ("engines", "bundle_cmd"),
    "ingest": ("engines", "ingest"),
    "serving": ("serving", "serving"),
    "bench": ("bench", "bench"),
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

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # click cuts each description to fit one line ("Run the probes on TARGETS (hosts,..."); a whole
        # first sentence, wrapped, says more.
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=1000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            result = super().invoke(ctx)
        except BrokenPipeError as exc:
            raise _PipeClosed() from exc
        # A command's ExitCode becomes the exit status here, however the group was called (main, tests).
        ctx.exit(int(result) if isinstance(result, int) else ExitCode.OK)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpudiag")
def cli() -> None:
    """Remote diagnostics for multi-GPU LLM inference hosts."""


def main() -> NoReturn:
    # standalone_mode=False: click's own mode turns Ctrl-C and a stray EOFError into "Aborted!" with exit 1,
    # and a closed pipe into exit 1, which a CI job would read as "error findings".
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # `python -m gpudiag` left it at SIG_DFL
        code = cli.main(prog_name="gpudiag", standalone_mode=False)
        sys.stdout.flush()  # a pipe closed by now shows here, not at interpreter exit
    except click.exceptions.NoArgsIsHelpError as exc:
        exc.show()
        _exit(ExitCode.USAGE)
    except click.UsageError as exc:
        _usage_error(exc)
    except click.ClickException as exc:
        exc.show()
        _exit(exc.exit_code)
    except (KeyboardInterrupt, click.Abort) as exc:
        cause = exc.__cause__ if isinstance(exc, click.Abort) else None
        if cause is not None and not isinstance(cause, KeyboardInterrupt):
            _internal_error(cause)
        _exit(ExitCode.INTERRUPTED)  # outside a scan, Ctrl-C just ends quietly
    except (_PipeClosed, BrokenPipeError):
        _pipe_closed()
    except Exception as exc:
        _internal_error(exc)
    _exit(code if isinstance(code, int) else ExitCode.OK)


def _exit(code: int) -> NoReturn:
    sys.exit(int(code))


def _usage_error(exc: click.UsageError) -> NoReturn:
    """One line, as for every other input error, with where to read more."""
    where = f" (see {exc.ctx.command_path if exc.ctx is not None else 'gpudiag'} --help)"
    message = visible(" ".join(exc.format_message().split()))
    click.echo(f"gpudiag: error: {message}{where}", err=True)
    _exit(ExitCode.USAGE)


def _pipe_closed() -> NoReturn:
    """The reader left: nothing to say, and no second error when Python flushes stdout at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    _exit(ExitCode.PIPE_CLOSED)


def _internal_error(exc: BaseException) -> NoReturn:
    """An unexpected exception is a gpudiag bug: one line and exit 70, the traceback only on request."""
    if os.environ.get("GPUDIAG_DEBUG"):
        import traceback

        traceback.print_exception(type(exc), exc, exc.__traceback__)
    message = (str(exc).splitlines() or [""])[0]
    click.echo(
        f"gpudiag: internal error: {type(exc).__name__}: {message} (rerun with GPUDIAG_DEBUG=1 for the traceback)",
        err=True,
    )
    _exit(ExitCode.INTERNAL)
