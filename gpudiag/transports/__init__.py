"""One interface for reaching a host: `run(argv, stdin, timeout, output_limit) -> CommandResult`.

Output is captured within bounds (transports/capture.py): a command whose stdout passes
`output_limit` bytes is closed and its result says so (`overflow`). `events` reads the progress lines
in the host's stderr as they arrive (transports/events.py).

A transport raises `TransportError` with a host status (unreachable, auth_failed, ...) when it cannot
run the command at all; a command that ran and failed is a CommandResult, not an exception.
"""

from __future__ import annotations

from gpudiag.models import UNREACHABLE, Host
from gpudiag.transports.base import Transport, TransportError

__all__ = ["Transport", "TransportError", "transport_for"]


def transport_for(host: Host, **ssh_options: object) -> Transport:
    """The transport chain for a host: local or ssh, wrapped by a container exec when it has one."""
    from gpudiag.transports.container import ContainerTransport
    from gpudiag.transports.local import LocalTransport

    base: Transport
    if host.skip_reason:  # the inventory asks for something gpudiag cannot do: never connect
        raise TransportError(UNREACHABLE, f"not scanned: {host.skip_reason}")
    if host.transport == "local":
        base = LocalTransport()
    elif host.transport == "ssh":
        from gpudiag.transports.ssh import SSHTransport

        base = SSHTransport(host, **ssh_options)  # type: ignore[arg-type]
    else:
        raise ValueError(f"{host.name}: unknown transport {host.transport!r}")
    if host.container:
        return ContainerTransport(base, host.container)
    return base
