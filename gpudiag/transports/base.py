"""The transport interface and its one error, below every transport (local, ssh, container) and the package's
factory that chooses among them."""

from __future__ import annotations

from typing import Protocol

from gpudiag.models import CommandResult
from gpudiag.transports.events import EventReader


class TransportError(Exception):
    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


class Transport(Protocol):
    def run(
        self,
        argv: list[str],
        stdin: bytes,
        timeout: float,
        output_limit: int = ...,
        events: EventReader | None = None,
        hold_stdin: bool = ...,
    ) -> CommandResult: ...

    def close(self) -> None: ...
