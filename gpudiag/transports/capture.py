"""Bounded capture of what a host prints: memory stays bounded whatever the host sends.

stdout counts against a cap (default 64 MiB); until the frame starts only a short tail of it is kept
(login banners, a `yes` loop), from the frame's first line on everything is kept up to the cap. stderr
is kept as a tail, less the progress events an EventReader takes out of it as they arrive. Over the cap the
caller closes the command and the host is a frame_error.
"""

from __future__ import annotations

from gpudiag.transports.events import EventReader

DEFAULT_OUTPUT_LIMIT = 64 * 2**20
STDERR_TAIL = 64 * 2**10
NOISE_TAIL = 64 * 2**10  # stdout kept from before the frame starts
FRAME_MARKER = b"GPUDIAG-BEGIN "  # the framing line (gpudiag.bundle); noise before it is not kept


class BoundedCapture:
    def __init__(self, limit: int = DEFAULT_OUTPUT_LIMIT, events: EventReader | None = None):
        self.limit = limit
        self.events = events
        self.total = 0  # stdout bytes received, kept or not
        self.overflowed = False
        self._noise = bytearray()  # before the frame: a tail only
        self._frame: bytearray | None = None
        self._stderr = bytearray()

    def add_stdout(self, data: bytes) -> bool:
        """Take a chunk; False once the output passed the cap (stop reading and close the command)."""
        if self.overflowed:
            return False
        self.total += len(data)
        if self.total > self.limit:
            self.overflowed = True
            self._frame = None  # nothing over the cap is read: free it at once
            return False
        if self._frame is not None:
            self._frame += data
            return True
        self._noise += data
        start = self._frame_start()
        if start is not None:
            self._frame = bytearray(self._noise[start:])
            del self._noise[start:]
        if len(self._noise) > NOISE_TAIL + len(FRAME_MARKER):
            del self._noise[: len(self._noise) - NOISE_TAIL - len(FRAME_MARKER)]
        return True

    def _frame_start(self) -> int | None:
        at = self._noise.find(FRAME_MARKER)
        while at != -1:
            if at == 0 or self._noise[at - 1] == 0x0A:  # at the start of a line
                return at
            at = self._noise.find(FRAME_MARKER, at + 1)
        return None

    def add_stderr(self, data: bytes) -> None:
        if self.events is not None:
            data = self.events.feed(data)
        self._stderr += data
        if len(self._stderr) > STDERR_TAIL:
            del self._stderr[: len(self._stderr) - STDERR_TAIL]

    @property
    def stdout(self) -> bytes:
        return bytes(self._noise) + bytes(self._frame or b"")

    @property
    def stderr(self) -> bytes:
        rest = self.events.rest() if self.events is not None else b""
        return bytes(self._stderr) + rest

    def describe_overflow(self) -> str:
        return f"output exceeded {self.limit / 2**20:g} MiB"
