"""What a host printed, judged: one HostResult with one status and a one-line reason (frame read, each probe's
data checked against its declaration, a killed probe, a missing interpreter, a container engine's own error).
The orchestrator runs the hosts; this module only reads what came back, and ingest reads engines' output with it.
"""

from __future__ import annotations

import re
from typing import Any

from gpudiag import bundle
from gpudiag.models import (
    FRAME_ERROR,
    OK,
    PROBE_ERROR,
    PROBE_KILLED,
    PYTHON_MISSING,
    TIMEOUT,
    UNREACHABLE,
    CommandResult,
    Host,
    HostResult,
    ProbeResult,
    probes_from_dict,
)
from gpudiag.schema import SchemaError, check_schema
from gpudiag.probe_data import DATA_ERROR, data_errors, judged
from gpudiag.transports.container import parse_container
from gpudiag.transports.exit_signal import describe_kill


def classify(host: Host, command: CommandResult, nonce: str, deadline: float) -> HostResult:
    """Turn what the host printed into a HostResult with one status and a one-line reason."""
    base: dict[str, Any] = dict(
        name=host.name,
        address=host.address,
        transport=transport_name(host),
        python=host.python,
        duration_s=command.duration_s,
    )
    tails = {"stdout": bundle.tail(command.stdout), "stderr": bundle.tail(command.stderr)}
    if command.overflow:
        return HostResult(
            status=FRAME_ERROR, reason=f"{command.overflow}; the connection was closed there", output_tail=tails, **base
        )
    if command.timed_out and not _holds_frame(command, nonce):  # a frame written before a hang is the answer
        return HostResult(
            status=TIMEOUT, reason=f"no answer within the {deadline:.0f} s deadline", output_tail=tails, **base
        )
    try:
        doc = bundle.extract_frame(command.stdout, nonce)
    except bundle.FrameError as exc:
        return _no_frame(host, command, exc, tails, base)
    try:
        probes, executable = _read_frame(doc)
    except SchemaError as exc:  # a frame of another schema or shape: never read as data
        return HostResult(status=FRAME_ERROR, reason=str(exc), output_tail=tails, **base)
    base["python"] = executable or host.python
    if doc.get("fatal"):
        return HostResult(status=PROBE_ERROR, reason=str(doc["fatal"]), probes=probes, **base)
    misfits = data_errors(probes)  # the probe's data is refused, not the host: it is incomplete (the verdict)
    failed = [
        f"{name} {p.status}" + (f" ({p.error.get('type')}: {str(p.error.get('message', ''))[:80]})" if p.error else "")
        for name, p in probes.items()
        if p.status in ("error", "timeout") and (p.error or {}).get("type") != DATA_ERROR
    ]
    if failed:
        return HostResult(status=PROBE_ERROR, reason="; ".join(failed + misfits), probes=probes, **base)
    return HostResult(status=OK, reason="; ".join(misfits), probes=probes, **base)


def _no_frame(
    host: Host, command: CommandResult, exc: bundle.FrameError, tails: dict[str, str], base: dict[str, Any]
) -> HostResult:
    """No frame in what the host printed: why, in the order the causes rule each other out (a killed runner, the
    container engine's own error, Python 2, a missing interpreter, else the frame error with stderr's last line)."""
    killed = describe_kill(command)
    if killed:
        return HostResult(status=PROBE_KILLED, reason=killed, output_tail=tails, **base)
    engine_failure = _container_failure(host, command)
    if engine_failure:
        return HostResult(status=UNREACHABLE, reason=engine_failure, output_tail=tails, **base)
    if b"Unknown option: -I" in command.stderr[:4096]:  # Python 2 stops at the bootstrap's first flag
        return HostResult(
            status=PYTHON_MISSING,
            output_tail=tails,
            reason=f"{host.python}: Python 2 (it has no -I option); the probes need Python 3.9 or newer "
            "(set `python:` for this host)",
            **base,
        )
    if _python_missing(command, host.python):
        return HostResult(
            status=PYTHON_MISSING,
            output_tail=tails,
            reason=f"{host.python}: no such interpreter on the host (exit {command.exit_code})",
            **base,
        )
    # The runner's own pid announcements (GPUDIAG-PROCESS) say nothing of why the frame is missing.
    lines = command.stderr.decode("utf-8", "replace").strip().splitlines()
    last = [line for line in lines if not line.startswith("GPUDIAG-PROCESS ")][-1:] or [""]
    hint = f"; stderr: {last[0][:160]}" if last[0] else ""
    return HostResult(status=FRAME_ERROR, reason=f"{exc} (exit {command.exit_code}){hint}", output_tail=tails, **base)


def _holds_frame(command: CommandResult, nonce: str) -> bool:
    try:
        bundle.extract_frame(command.stdout, nonce)
    except bundle.FrameError:
        return False
    return True


def _read_frame(doc: dict[str, Any]) -> tuple[dict[str, ProbeResult], str | None]:
    """The probes and interpreter a frame names; SchemaError when its schema or shape is not ours."""
    check_schema(doc, "the frame")
    probes = judged(probes_from_dict(doc, "the frame"))
    python = doc.get("python")
    if python is not None and not isinstance(python, dict):
        raise SchemaError(f"the frame: 'python' is {python!r:.40}, not a JSON object")
    executable = (python or {}).get("executable")
    if executable is not None and not isinstance(executable, str):
        raise SchemaError(f"the frame: 'python.executable' is {executable!r:.40}, not a string")
    return probes, executable


def _python_missing(command: CommandResult, python: str) -> bool:
    """The shell could not start the interpreter: exit 126/127, or a "not found" / "No such file" line
    that names it. sshd's own notes ("Could not chdir to home directory …: No such file or directory")
    are not about the interpreter."""
    if command.exit_code in (126, 127):
        return True
    if command.exit_code in (0, None):
        return False
    err = command.stderr.decode("utf-8", "replace")
    if "Traceback" in err:
        return False
    lines = [line for line in err.splitlines() if not _SSHD_NOTE.search(line)]
    return any(
        ("No such file or directory" in line or "not found" in line) and _names_interpreter(line, python)
        for line in lines
    )


# What sshd itself prints on stderr before running the command; never a sign of the interpreter.
_SSHD_NOTE = re.compile(r"^Could not chdir to home directory |^Environment:|^Last login:", re.I)


def _container_failure(host: Host, command: CommandResult) -> str | None:
    """docker/podman/kubectl failing before the interpreter ran (no such container or pod, the engine
    not installed, its daemon down): the engine's own line, e.g. `docker exec sglang: Error: No such
    container: sglang`. None when the interpreter is the one missing, or the container is not at fault."""
    if not host.container or command.exit_code in (0, None):
        return None
    err = command.stderr.decode("utf-8", "replace")
    if "Traceback" in err or _names_interpreter(err, host.python):
        return None
    if command.exit_code not in (125, 126, 127) and not _ENGINE_ERROR.search(err):
        return None
    engine, name = parse_container(host.container)
    lines = [line.strip() for line in err.splitlines() if line.strip()]
    line = next(
        (text for text in lines if _ENGINE_ERROR.search(text)),
        lines[-1] if lines else f"exit {command.exit_code} with no message",
    )
    return f"{engine} exec {name}: {line[:200]}"


# What docker, podman and kubectl (or the shell looking for them) print when they cannot exec at all.
_ENGINE_ERROR = re.compile(
    r"No such container|no container with|not found|Error from server|"
    r"Error response from daemon|Cannot connect to the Docker daemon|"
    r"No such file or directory|command not found|^Error:",
    re.I | re.M,
)


def _names_interpreter(err: str, python: str) -> bool:
    """Whether the engine's message is about the interpreter (a whole word, not part of `python-server`)."""
    return bool(python) and re.search(rf"(?<![\w.-]){re.escape(python)}(?![\w.-])", err) is not None


def transport_name(host: Host) -> str:
    return host.transport + (f"+{host.container.split(':', 1)[0]}" if host.container else "")
