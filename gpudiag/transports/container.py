"""Wraps another transport so the command runs inside a container: docker/podman exec or kubectl exec.

The container spec is `docker:NAME`, `podman:NAME` or `kubectl:POD` (optionally `kubectl:NAMESPACE/POD`).
The argv stays a list all the way down: the ssh transport quotes every word for the remote shell. The inner
transport holds stdin open until the command ends or is stopped; the orchestrator asks the runner to watch it.
"""

from __future__ import annotations

from gpudiag.models import CommandResult
from gpudiag.transports.base import Transport
from gpudiag.transports.capture import DEFAULT_OUTPUT_LIMIT
from gpudiag.transports.events import EventReader

ENGINES = ("docker", "podman", "kubectl")


def parse_container(spec: str) -> tuple[str, str]:
    """`engine:name` → (engine, name); a bare name means docker."""
    engine, sep, name = spec.partition(":")
    if not sep:
        engine, name = "docker", spec
    if engine not in ENGINES:
        raise ValueError(f"container {spec!r}: engine must be one of {', '.join(ENGINES)}")
    if not name:
        raise ValueError(f"container {spec!r}: no container name")
    for part in name.split("/"):
        if part.startswith("-"):  # `docker exec -i --privileged` would read it as an option
            raise ValueError(f"container {spec!r}: a name may not begin with '-'")
    return engine, name


def exec_prefix(spec: str) -> list[str]:
    engine, name = parse_container(spec)
    if engine == "kubectl":
        namespace, _, pod = name.rpartition("/")
        prefix = ["kubectl", "exec", "-i"]
        if namespace:
            prefix += ["-n", namespace]
        return prefix + [pod, "--"]
    return [engine, "exec", "-i", name]


class ContainerTransport:
    def __init__(self, inner: Transport, spec: str):
        self.inner = inner
        self.spec = spec
        self.prefix = exec_prefix(spec)

    def run(
        self,
        argv: list[str],
        stdin: bytes,
        timeout: float,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
        events: EventReader | None = None,
        hold_stdin: bool = True,
    ) -> CommandResult:
        # stdin held open: the engine's shim keeps the command's output open after the exec client is gone, so
        # the end of stdin is the one sign the runner inside gets that the control side is gone.
        return self.inner.run(
            self.prefix + list(argv), stdin, timeout, output_limit=output_limit, events=events, hold_stdin=hold_stdin
        )

    def run_outside(self, argv: list[str], timeout: float) -> CommandResult:
        """On the machine that runs the container (the engine's own commands, e.g. its logs)."""
        return self.inner.run(list(argv), b"", timeout)

    def close(self) -> None:
        self.inner.close()
