"""After a probe runner died of SIGKILL: was it the kernel's OOM killer? One short follow-up on the same
transport reads the kernel's OOM records (probes/kernel_log.py), and the kills are matched against the pids
the runner announced on its stderr (itself and the children it started, probes/events.py).

The verdict is one structured value on the host result (`oom`: confirmed, not_found, not_readable or
not_checked, with the matched kill's pid, process, sizes and kernel line) and the host's reason is written
from it once. The follow-up never fails the host: whatever goes wrong is the verdict's reason.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, replace
from typing import Any

from gpudiag import bundle
from gpudiag.models import PROBE_KILLED, CommandResult, Host, HostResult
from gpudiag.transports.exit_signal import describe_kill, kill_signal

# The host's own parser: one reading of the kernel's formats, the same text on both sides.
from probes.kernel_log import MAX_LINE, MAX_LINES, parse_oom_kills

FOLLOW_UP_TIMEOUT = 20.0
MIN_SECONDS = 3.0  # of the host's deadline left, or the follow-up is not started
OUTPUT_LIMIT = 2**20
CLOCK_SLACK_S = 5.0  # a kill stamped this long before the runner started still counts (clock rounding)
MAX_REASON = 300
_ANNOUNCED = re.compile(rb"^GPUDIAG-PROCESS (\S+) (\{.{1,900}\})\r?$", re.M)


@dataclass(frozen=True)
class Announced:
    pid: int
    role: str
    clock_s: float | None


def announced_processes(stderr: bytes, nonce: str) -> list[Announced]:
    """The processes the runner named on its stderr with this run's nonce (at most 32 are kept)."""
    found = []
    for tag, body in _ANNOUNCED.findall(stderr):
        if tag.decode("ascii", "replace") != nonce:
            continue
        try:
            doc = json.loads(body)
        except ValueError:
            continue
        if not isinstance(doc, dict):
            continue
        pid, clock, role = doc.get("pid"), doc.get("clock_s"), doc.get("role")
        if isinstance(pid, int) and not isinstance(pid, bool) and 0 < pid < 2**31:
            found.append(
                Announced(
                    pid,
                    role[:20] if isinstance(role, str) else "?",
                    float(clock) if isinstance(clock, (int, float)) and not isinstance(clock, bool) else None,
                )
            )
    return found[:32]


def wanted(command: CommandResult) -> bool:
    """A SIGKILL (the OOM killer's signal), told by the transport or by the shell's 137."""
    killed = kill_signal(command)
    return killed is not None and killed[0] == "SIGKILL"


def follow_up(transport: Any, host: Host, command: CommandResult, nonce: str, seconds_left: float) -> dict[str, Any]:
    """The `oom` verdict for a killed runner; never raises."""
    processes = announced_processes(command.stderr, nonce)
    if not processes:
        return _verdict("not_checked", reason="the runner was killed before it announced its pid")
    if seconds_left < MIN_SECONDS:
        return _verdict("not_checked", reason="no time left before the host's deadline")
    timeout = min(FOLLOW_UP_TIMEOUT, seconds_left)
    own_nonce = secrets.token_hex(8)
    payload = {"entry": "probes.kernel_log:main", "nonce": own_nonce, "modules": _modules()}
    try:
        answer = transport.run(
            bundle.bootstrap_argv(host.python), json.dumps(payload).encode() + b"\n", timeout, output_limit=OUTPUT_LIMIT
        )
    except Exception as exc:  # the connection is gone, the run was stopped: the kill stands without it
        return _verdict("not_readable", reason=f"the follow-up could not run: {exc}")
    try:
        doc = bundle.extract_frame(answer.stdout, own_nonce)
    except bundle.FrameError as exc:
        how = describe_kill(answer, oom_hint=False) or f"exit {answer.exit_code}"
        if answer.timed_out:
            how = f"no answer within {timeout:.0f} s"
        return _verdict("not_readable", reason=f"the follow-up gave no answer ({how}; {exc})")
    return judge(doc.get("kernel_log"), processes, bool(host.container))


def judge(found: Any, processes: list[Announced], in_container: bool = False) -> dict[str, Any]:
    """The verdict from what the host sent (`{"source", "lines"}` or `{"source": None, "reasons"}`)."""
    if not isinstance(found, dict):
        return _verdict("not_readable", reason="the follow-up's answer holds no kernel_log")
    source = found.get("source")
    if not isinstance(source, str):
        reasons = [str(r) for r in found.get("reasons") or [] if isinstance(r, str)][:5]
        return _verdict("not_readable", reason="; ".join(reasons) or "no kernel log on the host")
    sent = found.get("lines")
    lines = [line[:MAX_LINE] for line in sent if isinstance(line, str)][-MAX_LINES:] if isinstance(sent, list) else []
    by_pid = {p.pid: p for p in processes}
    started = min((p.clock_s for p in processes if p.clock_s is not None), default=None)
    matches = [
        kill
        for kill in parse_oom_kills(lines)
        if kill["pid"] in by_pid
        and (started is None or "clock_s" not in kill or kill["clock_s"] >= started - CLOCK_SLACK_S)
    ]
    if not matches:
        note = "the pids are the container's own; the kernel logs the host's" if in_container else ""
        return _verdict("not_found", source=source[:80], reason=note)
    kill = matches[-1]
    fields = {k: v for k, v in kill.items() if k != "clock_s"}
    return _verdict("confirmed", source=source[:80], role=by_pid[kill["pid"]].role, **fields)


def _verdict(verdict: str, reason: str = "", **fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"verdict": verdict, **fields}
    if reason:
        doc["reason"] = reason[:MAX_REASON]
    return doc


def _modules() -> dict[str, list[Any]]:
    return {k: list(v) for k, v in bundle.probe_modules(["kernel_log"]).items()}


def describe(oom: dict[str, Any]) -> str:
    """The verdict in words, e.g. `oom: confirmed (kernel: Killed process 1234 (python3) anon-rss 61.2 GiB)`."""
    verdict = oom.get("verdict")
    if verdict == "confirmed":
        where = "kernel, memory cgroup limit" if oom.get("scope") == "cgroup" else "kernel"
        rss = oom.get("anon_rss_kb")
        size = f" anon-rss {_size(rss)}" if isinstance(rss, int) else ""
        return f"oom: confirmed ({where}: Killed process {oom.get('pid')} ({oom.get('process')}){size})"
    if verdict == "not_found":
        note = f"; {oom['reason']}" if oom.get("reason") else ""
        return f"oom: not found in the kernel log ({oom.get('source')}{note})"
    if verdict == "not_readable":
        return f"oom: kernel log not readable ({oom.get('reason')})"
    return f"oom: not checked ({oom.get('reason')})"


def _size(kb: int) -> str:
    if kb >= 2**20:
        return f"{kb / 2**20:.1f} GiB"
    if kb >= 2**10:
        return f"{kb / 2**10:.1f} MiB"
    return f"{kb} kB"


def attach(result: HostResult, command: CommandResult, oom: dict[str, Any] | None) -> HostResult:
    """The killed host's result with the verdict on it and its reason written from it."""
    if oom is None or result.status != PROBE_KILLED:
        return result
    read = oom.get("verdict") in ("confirmed", "not_found")  # the log was read: no hint to go and read it
    killed = describe_kill(command, oom_hint=not read) or result.reason
    return replace(result, oom=oom, reason=f"{killed}; {describe(oom)}")
