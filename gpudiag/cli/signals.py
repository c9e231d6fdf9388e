"""How a command that runs hosts stops: SIGINT, SIGTERM and SIGHUP all end it as Ctrl-C does (finished hosts
kept, the run marked interrupted, exit 128 + the signal); once only writing is left, signals are ignored."""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

from gpudiag.cli import ExitCode

# Signals that end a scan as Ctrl-C does: finished hosts kept, the run marked interrupted, 128 + signal.
STOP_SIGNALS = {
    signal.SIGINT: ExitCode.INTERRUPTED,
    signal.SIGTERM: ExitCode.TERMINATED,
    signal.SIGHUP: ExitCode.HANGUP,
}


class StopSignals:
    """Which stop signal arrived first, if any, and the exit code it calls for."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._finishing = False

    @property
    def signal_name(self) -> str | None:
        return signal.Signals(self.signum).name if self.signum is not None else None

    @property
    def exit_code(self) -> int:
        return int(STOP_SIGNALS.get(self.signum, ExitCode.INTERRUPTED))  # type: ignore[call-overload]

    def handle(self, signum: int, frame: object) -> None:
        # The first signal stops the scan (KeyboardInterrupt in the orchestrator's wait); later ones, and
        # any once only writing is left, are noted and ignored.
        if self.signum is None and not self._finishing:
            self.signum = signum
            raise KeyboardInterrupt
        if self.signum is None:
            self.signum = signum

    def finishing(self) -> None:
        self._finishing = True


@contextlib.contextmanager
def interrupt_policy() -> Iterator[StopSignals]:
    """SIGINT, SIGTERM and SIGHUP stop the command the same way; the previous handlers come back afterwards."""
    stop = StopSignals()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {signum: signal.signal(signum, stop.handle) for signum in STOP_SIGNALS}
    try:
        yield stop
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
