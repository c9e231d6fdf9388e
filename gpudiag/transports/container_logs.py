"""The engine's log of a container host (`docker logs`, `podman logs`, `kubectl logs`), fetched through the
transport outside the container: inside it, the server's stdout is a pipe to the engine and cannot be read.

The host cuts the log to its last 8 MiB before sending it (`tail -c`), the same bound the probe uses for
server logs; it is classified here with the one crash-log classifier and only the verdict is kept (quoted
lines are redacted by the classifier). The record has the shape of a `deployment.server_logs` entry.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gpudiag.models import OK, HostResult
from probes.crashlog.classify import classify  # the host's own classifier: one set of rules
from gpudiag.transports.container import parse_container

TAIL_BYTES = 8 * 1024 * 1024
TAIL_LINES = 200000
FETCH_TIMEOUT = 30.0
MIN_FETCH_SECONDS = 3.0
EXIT_MARK = "GPUDIAG-LOGS-EXIT"
# The engine's exit status rides on a last line of its own: `tail -c` keeps it, and a pipeline's status
# would be tail's. Plain POSIX sh, no quotes or backslashes: login shells (sh, tcsh, fish) pass it unchanged.
# An engine still writing after SECONDS (`docker logs` of a daemon that hangs) is stopped by `timeout` where the
# host has one that takes these words (coreutils: status 124, busybox: 143, TERM): `tail` then sends what
# came. Not a background watchdog: its pid is `$!`, and csh reads `!` as history.
SCRIPT = (
    'if timeout SECONDS true >/dev/null 2>&1; then set -- timeout SECONDS "$@"; fi; '
    '{ "$@" 2>&1; code=$?; echo; echo "%s $code"; } | tail -c %d' % (EXIT_MARK, TAIL_BYTES)
)
TIMED_OUT = (124, 143)


def logs_command(spec: str) -> list[str]:
    """The engine's log command for `docker:NAME`, `podman:NAME` or `kubectl:[NAMESPACE/]POD`."""
    engine, name = parse_container(spec)
    if engine == "kubectl":
        namespace, _, pod = name.rpartition("/")
        return ["kubectl", "logs", "--tail", str(TAIL_LINES)] + (["-n", namespace] if namespace else []) + ["--", pod]
    return [engine, "logs", "--tail", str(TAIL_LINES), "--", name]


def fetch_argv(spec: str, seconds: int = 20) -> list[str]:
    """`sh -c SCRIPT sh ENGINE logs ...`: the engine's words reach it as positional arguments, never as code;
    the engine is stopped after `seconds` on the host."""
    return ["sh", "-c", SCRIPT.replace("SECONDS", str(max(1, int(seconds)))), "sh", *logs_command(spec)]


def wanted(host_container: str | None, probes: list[str] | None) -> bool:
    """Container hosts whose scan reads server logs (the deployment probe) get their engine's log."""
    return bool(host_container) and (probes is None or "deployment" in probes)


@dataclass(frozen=True)
class FetchedLog:
    """The engine's log text as the host sent it (at most 8 MiB), or why there is none."""

    where: str
    text: str | None = None
    truncated: bool = False
    reason: str = ""
    cut_note: str = ""  # the read stopped at its time limit on the host


def fetch(transport: Any, spec: str, seconds_left: float) -> FetchedLog | None:
    """The log, or why none was read; None when no fetch was possible (not a container transport, no
    time left). Never raises: a log is extra evidence, not the scan."""
    run_outside = getattr(transport, "run_outside", None)
    if run_outside is None or seconds_left < MIN_FETCH_SECONDS:
        return None
    words = logs_command(spec)
    where = f"{words[0]} logs {words[-1]}"
    budget = min(FETCH_TIMEOUT, seconds_left)
    on_host = max(1, int(budget * 2 / 3))  # the rest carries what came back
    try:
        command = run_outside(fetch_argv(spec, on_host), budget)
    except Exception as exc:  # interrupted, connection lost: the host result stands without the log
        return FetchedLog(where, reason=f"{type(exc).__name__}: {exc}"[:300])
    if command.timed_out:
        return FetchedLog(where, reason=f"no answer within {budget:.0f} s")
    text, status, cut = split_output(command.stdout)
    if status in TIMED_OUT and command.duration_s >= on_host * 0.9:  # stopped by the host's `timeout`
        note = f"read stopped after {on_host} s"
        if not text.strip():
            return FetchedLog(where, reason=f"{note}, nothing read")
        return FetchedLog(where, text=text, truncated=True, cut_note=note)
    if status != 0:
        last = [line.strip() for line in text.splitlines() if line.strip()][-1:] or ["no output"]
        why = f"exit {status}" if status is not None else "no exit status (sh or tail missing, or killed)"
        return FetchedLog(where, reason=f"{why}: {last[0][:200]}")
    return FetchedLog(where, text=text, truncated=cut)


def split_output(stdout: bytes) -> tuple[str, int | None, bool]:
    """(log text, the engine's exit status or None when the mark is missing, whether the host cut it)."""
    text = stdout[-TAIL_BYTES:].decode("utf-8", "replace")
    body, _, last = text.rstrip("\n").rpartition("\n")
    status = None
    if last.startswith(EXIT_MARK + " "):
        try:
            status = int(last[len(EXIT_MARK) + 1 :].strip())
        except ValueError:
            status = None
    else:
        body = text
    cut = len(stdout) >= TAIL_BYTES
    if cut and "\n" in body:
        body = body[body.index("\n") + 1 :]  # the first line was cut mid-way
    if body.endswith("\n"):
        body = body[:-1]  # the blank line the script adds before its mark
    return body, status, cut


def classified(fetched: FetchedLog, engine: str, installed_release: str | None) -> dict[str, Any]:
    """A `deployment.server_logs` record: the classifier's verdict with where the log came from."""
    if fetched.text is None:
        return {"source": None, "outcome": None, "reason": f"{fetched.where}: {fetched.reason}"}
    result = classify(fetched.text, None, installed_release)
    result.update(
        source={"kind": engine, "where": fetched.where, "read_by": "gpudiag, outside the container"},
        bytes_read=len(fetched.text.encode("utf-8")),
        truncated=fetched.truncated,
        **({"cut": "time", "cut_note": fetched.cut_note} if fetched.cut_note else {}),
    )
    return result


def attach(result: HostResult, spec: str, fetched: FetchedLog | None) -> HostResult:
    """The host result with the container's log under `deployment.server_logs[SPEC]` (advice in the flags
    of the release installed in the container); when the deployment probe has no data (the container is
    not running, exec failed), the log's first crash joins the host's reason."""
    if fetched is None:
        return result
    found = classified(fetched, parse_container(spec)[0], _installed_release(result))
    deployment = result.probes.get("deployment")
    if deployment is not None and deployment.status == OK and isinstance(deployment.data, dict):
        data = dict(deployment.data)
        data["server_logs"] = dict(data.get("server_logs") or {}, **{spec: found})
        probes = dict(result.probes, deployment=replace(deployment, data=data))
        return replace(result, probes=probes)
    crashes = found.get("crashes") or []
    if crashes and result.status != OK:
        return replace(result, reason=f"{result.reason}; {fetched.where}: {crashes[0].get('summary')}"[:600])
    return result


def _installed_release(result: HostResult) -> str | None:
    source = result.probe_data("sglang_source")
    version = source.get("version") if isinstance(source, dict) else None
    return version if isinstance(version, str) else None
