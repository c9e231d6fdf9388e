"""The run's verdict: which hosts are incomplete (a check the user asked for could not run) and the exit code.

One place decides the final exit code of scan, report and repro from the hosts, the findings and `--fail-on`.
Precedence: hosts that could not be scanned (3) > findings at or above the threshold (1) > incomplete (4) > 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from gpudiag.exit_codes import ExitCode
from gpudiag.probe_view import as_dict, as_list, cut_short
from gpudiag.probe_data import data_errors
from gpudiag.derived import remembered
from gpudiag.models import INTERRUPTED, OK, PROBE_ERROR, SEVERITY_RANK, Finding, HostResult
from gpudiag.run_records import LoadedRun
from probes.catalog import DEEP_PROBES  # the deep set, as the probes declare it

INCOMPLETE = "incomplete"
FAIL_ON_LEVELS = ("info", "warning", "error", "critical", INCOMPLETE)
DEFAULT_FAIL_ON = "error"
# One line per exit code: the README's table and the reports say the same.
EXIT_MEANING = {
    int(
        ExitCode.OK
    ): "all hosts ok, every check named on the command line (--deep, --probes, repro) ran, no finding at or above --fail-on",
    int(ExitCode.FINDINGS): "findings at or above --fail-on (default error)",
    int(ExitCode.USAGE): "usage or input error",
    int(ExitCode.HOSTS_FAILED): "some hosts could not be scanned",
    int(ExitCode.INCOMPLETE): "a check asked for (--deep, --probes, repro) could not run on some host",
    int(ExitCode.INTERNAL): "internal error (a bug in gpudiag)",
    int(ExitCode.HANGUP): "hung up (SIGHUP); finished hosts kept",
    int(ExitCode.INTERRUPTED): "interrupted (Ctrl-C); finished hosts kept",
    int(ExitCode.PIPE_CLOSED): "stdout's reader went away",
    int(ExitCode.TERMINATED): "terminated (SIGTERM); finished hosts kept",
}


@dataclass(frozen=True)
class HostVerdict:
    name: str
    status: str  # the host's own status, or `incomplete` when a requested check could not run
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verdict:
    exit_code: int
    fail_on: str
    hosts: tuple[HostVerdict, ...] = ()
    failing_findings: int = 0
    requested: tuple[str, ...] = field(default=())

    @property
    def incomplete(self) -> tuple[HostVerdict, ...]:
        return tuple(h for h in self.hosts if h.status == INCOMPLETE)

    def to_dict(self) -> dict[str, Any]:
        return {
            "exit_code": int(self.exit_code),
            "fail_on": self.fail_on,
            "requested_checks": list(self.requested),
            "failing_findings": self.failing_findings,
            "incomplete_hosts": [{"name": h.name, "reasons": list(h.reasons)} for h in self.incomplete],
        }


def requested_checks(run: LoadedRun) -> tuple[str, ...]:
    """The probes the user asked for by name (--deep, --probes, repro), read from the run's record.

    Runs written before the record existed are read from their argv."""
    stored = as_dict(run.manifest.extra.get("requested"))
    if isinstance(stored.get("checks"), list):
        return tuple(str(p) for p in stored["checks"])
    if run.manifest.kind == "repro":
        return () if as_dict(run.manifest.extra.get("repro")).get("log") else ("cuda_graph",)
    return explicit_checks(run.manifest.argv)


def explicit_checks(argv: Sequence[str], probes: str | None = None, deep: bool | None = None) -> tuple[str, ...]:
    """The checks a scan command line asks for explicitly: --probes names and --deep's GPU probes."""
    words = list(argv)
    if probes is None:
        for i, word in enumerate(words):
            if word == "--probes" and i + 1 < len(words):
                probes = words[i + 1]
            elif word.startswith("--probes="):
                probes = word.split("=", 1)[1]
    if deep is None:
        deep = "--deep" in words
    names = [p.strip() for p in (probes or "").split(",") if p.strip()]
    if deep:
        names += [p for p in DEEP_PROBES if p not in names]
    return tuple(names)


@remembered
def unmet_checks(host: HostResult, requested: Iterable[str]) -> list[str]:
    """Why each requested check did not run (or measured nothing) on this host; [] when all ran."""
    if requested and not host.probes:
        return ["no probe result is stored for this host (its result file is missing or could not be written)"]
    reasons = []
    for name in requested:
        result = host.probes.get(name)
        if result is None:
            reasons.append(f"{name}: did not run on this host")
        elif result.status == "timeout":
            reasons.append(f"{name}: timed out after {result.duration_s:.0f} s")
        elif result.status != "ok":
            why = result.reason or str(as_dict(result.error).get("message") or result.status)
            reasons.append(f"{name}: {result.status} — {why}")
        else:
            gap = _measured_nothing(name, result.data)
            if gap:
                reasons.append(f"{name}: {gap}")
    return reasons


def _measured_nothing(name: str, data: Any) -> str | None:
    """A probe that ran but measured nothing the user asked for (no GPU, every cell skipped)."""
    data = as_dict(data)
    if name == "copy_bench":
        gpus = [g for g in as_list(data.get("gpus")) if isinstance(g, dict)]
        # Without CUDA the bench measures the CPU, as asked; the answers say the GPUs were not measured.
        if data.get("device") != "cpu" and not any(g.get("status") == "ok" for g in gpus):
            kept = any(cut_short(g).get("measured") for g in gpus)  # workloads before a timeout
            return ("no GPU measured in full: " if kept else "no GPU measured: ") + "; ".join(
                str(g.get("reason") or g.get("status")) for g in gpus[:3]
            )
    if name == "cuda_graph":
        cells = [c for c in as_list(data.get("cells")) if isinstance(c, dict)]
        if not cells or all(c.get("status") == "skipped" for c in cells):
            return "every cell skipped — " + str(
                data.get("skip_reason") or next((c.get("detail") for c in cells if c.get("detail")), "no cell ran")
            )
    return None


def host_verdicts(run: LoadedRun, requested: Sequence[str]) -> tuple[HostVerdict, ...]:
    verdicts = []
    for host in run.hosts:
        if host.status not in (OK, PROBE_ERROR):
            verdicts.append(HostVerdict(host.name, host.status, (host.reason,) if host.reason else ()))
            continue
        unmet = unmet_checks(host, requested)
        # A probe whose data did not fit its declaration is a check that could not be read, asked for or not.
        unmet += [m for m in misfits(host) if not any(u.startswith(m.split(":", 1)[0] + ":") for u in unmet)]
        # probe_error keeps its own (worse) status; its unmet checks still say why.
        status = INCOMPLETE if unmet and host.status == OK else host.status
        verdicts.append(HostVerdict(host.name, status, tuple(unmet) or ((host.reason,) if host.reason else ())))
    return tuple(verdicts)


@remembered
def misfits(host: HostResult) -> list[str]:
    """The host's probe data that did not fit its declarations (probe_data.data_errors)."""
    return data_errors(host.probes)


def failing(findings: Iterable[Finding], fail_on: str) -> list[Finding]:
    """Findings at or above the --fail-on threshold (`incomplete`: none; only unmet checks fail)."""
    if fail_on == INCOMPLETE:
        return []
    limit = SEVERITY_RANK[fail_on]
    return [f for f in findings if SEVERITY_RANK.get(f.severity, 9) <= limit]


def verdict(
    run: LoadedRun, findings: Sequence[Finding], fail_on: str = DEFAULT_FAIL_ON, requested: Sequence[str] | None = None
) -> Verdict:
    requested = tuple(requested if requested is not None else requested_checks(run))
    hosts = host_verdicts(run, requested)
    over = failing(findings, fail_on)
    if any(h.status not in (OK, INCOMPLETE, INTERRUPTED) for h in hosts):
        code = ExitCode.HOSTS_FAILED
    elif over:
        code = ExitCode.FINDINGS
    elif run.manifest.interrupted or any(h.status in (INCOMPLETE, INTERRUPTED) for h in hosts):
        code = ExitCode.INCOMPLETE
    else:
        code = ExitCode.OK
    return Verdict(exit_code=code, fail_on=fail_on, hosts=hosts, failing_findings=len(over), requested=requested)
