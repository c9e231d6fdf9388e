"""Host health from the env probe's `health` section: a PCIe link trained below what GPU and host allow, clocks
held down by a hardware or thermal reason, memory errors that were not corrected, Xid lines since boot
(kernel libraries against sglang's requirements: kernel_libs.py).

Each rule reads only what the host recorded (`nvidia-smi -q`, the kernel log); a counter the
driver printed as N/A is unknown and never judged. A GPU that is idle lowers its PCIe generation on purpose, so
a lower generation is judged only while its clocks are not held by the Idle reason.
"""

from __future__ import annotations

from typing import Any

from gpudiag.findings.common import source
from gpudiag.models import Evidence, Finding, HostResult
from gpudiag.probe_view import as_dict, as_list, dig, number, probe

XID_CATALOG = "https://docs.nvidia.com/deploy/xid-errors/index.html"
# Reasons that slow the clocks because something is wrong (heat, power delivery), against the normal limits.
HARD_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")
SOFT_REASONS = ("sw_power_cap",)
# Xids NVIDIA's catalog says need a reset, a drain or the hardware looked at (the rest are often an
# application's own fault, such as 13 or 31).
SEVERE_XIDS = {
    48: "double-bit ECC error",
    63: "row remapping / page retirement recorded",
    64: "row remapping / page retirement failed",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}


def _gpus(host: HostResult) -> list[dict[str, Any]]:
    health = as_dict(dig(probe(host, "env"), "health"))
    return [g for g in as_list(health.get("gpus")) if isinstance(g, dict)]


def _label(gpu: dict[str, Any]) -> str:
    return f"{gpu.get('bus_id') or '?'} {gpu.get('name') or ''}".strip()


def _int(value: Any) -> int | None:
    found = number(value)
    return int(found) if found is not None else None


def pcie_degraded(hosts: list[HostResult]) -> list[Finding]:
    """A link narrower than its maximum, or a busy GPU's link at a lower generation than GPU and host allow."""
    findings = []
    for host in hosts:
        rows = []
        for gpu in _gpus(host):
            pcie = as_dict(gpu.get("pcie"))
            gen, gen_max = _int(pcie.get("gen_current")), _int(pcie.get("gen_max"))
            width, width_max = _int(pcie.get("width_current")), _int(pcie.get("width_max"))
            idle = dig(gpu, "clock_reasons", "idle")
            narrow = width is not None and width_max is not None and width < width_max
            slow = gen is not None and gen_max is not None and gen < gen_max and idle is False
            if narrow or slow:
                rows.append(
                    (_label(gpu), f"Gen{gen} x{width}", f"Gen{gen_max} x{width_max}", "no" if idle is False else "?")
                )
        if rows:
            findings.append(
                Finding(
                    id="health.pcie_degraded",
                    severity="warning",
                    title=f"PCIe link below its maximum on {len(rows)} GPU(s)",
                    hosts=(host.name,),
                    evidence=(
                        Evidence(
                            kind="measurement",
                            host=host.name,
                            text="nvidia-smi -q: GPU Link Info, current against the maximum GPU and host allow",
                            table=(("GPU", "current", "maximum", "idle"),) + tuple(rows),
                        ),
                    ),
                    recommendation="Host-device copies and CPU-GPU traffic run at the lower rate: reseat the card or "
                    "riser, check the slot's BIOS link settings, then compare `nvidia-smi -q -d PCI` under load.",
                    sources=(source(host, "env"),),
                    action="Reseat or move the GPU(s) listed and recheck the PCIe link under load",
                )
            )
    return findings


def throttling(hosts: list[HostResult]) -> list[Finding]:
    """Clock event reasons active when the host was scanned: hardware or thermal slowdown, or the power cap."""
    findings = []
    for host in hosts:
        rows, hard = [], False
        for gpu in _gpus(host):
            reasons = as_dict(gpu.get("clock_reasons"))
            active = [r for r in HARD_REASONS + SOFT_REASONS if reasons.get(r) is True]
            if active:
                hard = hard or any(r in HARD_REASONS for r in active)
                rows.append((_label(gpu), ", ".join(active)))
        if rows:
            findings.append(
                Finding(
                    id="health.throttling",
                    severity="warning" if hard else "info",
                    title=f"clocks held down on {len(rows)} GPU(s) ({'hardware or thermal' if hard else 'power cap'})",
                    hosts=(host.name,),
                    evidence=(
                        Evidence(
                            kind="measurement",
                            host=host.name,
                            text="nvidia-smi -q: Clocks Event Reasons active at scan time",
                            table=(("GPU", "active reasons"),) + tuple(rows),
                        ),
                    ),
                    recommendation="Hardware slowdown and power-brake point at power delivery (PSU, cabling) or the "
                    "board; thermal slowdown at cooling. Every timing measured on these GPUs is slower than the "
                    "hardware allows until it clears. A power cap under full load is the board's normal limit."
                    if hard
                    else "The GPUs ran at their power limit when scanned: expected under full load, a limit "
                    "below the default (`nvidia-smi -q -d POWER`) is a setting to check.",
                    sources=(source(host, "env"),),
                    action="Check power delivery and cooling of the GPU(s) listed" if hard else "",
                )
            )
    return findings


def _memory_rows(gpu: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(GPU, counter, value, severity) rows for the memory errors a GPU recorded."""
    label, rows = _label(gpu), []
    volatile = _int(dig(gpu, "ecc", "volatile", "uncorrected"))
    aggregate = _int(dig(gpu, "ecc", "aggregate", "uncorrected"))
    remapped = as_dict(gpu.get("remapped_rows"))
    retired = as_dict(gpu.get("retired_pages"))
    checks = (
        ("uncorrected ECC errors since reset", volatile, bool(volatile), "error"),
        ("uncorrected ECC errors over its life", aggregate, bool(aggregate) and not volatile, "warning"),
        (
            "remapped rows (uncorrectable)",
            _int(remapped.get("uncorrectable")),
            bool(_int(remapped.get("uncorrectable"))),
            "warning",
        ),
        ("row remapping pending (needs a reset)", "yes", remapped.get("pending") is True, "warning"),
        ("row remapping failed", "yes", remapped.get("failure") is True, "error"),
        (
            "retired pages (double bit)",
            _int(retired.get("double_bit")),
            bool(_int(retired.get("double_bit"))),
            "warning",
        ),
        ("page retirement pending", "yes", retired.get("pending") is True, "warning"),
        ("GPU reset required", "yes", gpu.get("reset_required") is True, "error"),
    )
    for what, value, present, severity in checks:
        if present:
            rows.append((label, what, str(value), severity))
    return rows


def memory_errors(hosts: list[HostResult]) -> list[Finding]:
    """Uncorrected ECC errors, uncorrectable remapped rows, pending or failed remapping, retired pages."""
    findings = []
    for host in hosts:
        rows = [row for gpu in _gpus(host) for row in _memory_rows(gpu)]
        if not rows:
            continue
        severe = any(row[3] == "error" for row in rows)
        findings.append(
            Finding(
                id="health.ecc_uncorrectable",
                severity="error" if severe else "warning",
                title=f"uncorrected memory errors recorded on {len({r[0] for r in rows})} GPU(s)",
                hosts=(host.name,),
                evidence=(
                    Evidence(
                        kind="measurement",
                        host=host.name,
                        text="nvidia-smi -q: ECC Errors, Remapped Rows, Retired Pages, GPU Reset Status",
                        table=(("GPU", "counter", "value"),) + tuple(r[:3] for r in rows),
                    ),
                ),
                recommendation="An uncorrected error ends the process that met it; a pending remap or retirement "
                "takes effect at the next GPU reset. Drain the GPU, reset it (`nvidia-smi -r -i <index>`) and "
                "rescan; a failed remap or errors that return mean the board needs NVIDIA's field diagnostic.",
                sources=(source(host, "env"),),
                action="Drain and reset the GPU(s) listed, then rescan",
            )
        )
    return findings


def xid_since_boot(hosts: list[HostResult]) -> list[Finding]:
    """NVRM Xid lines in this boot's kernel log, counted per device and code."""
    findings = []
    for host in hosts:
        xid = as_dict(dig(probe(host, "env"), "health", "xid"))
        counts: dict[tuple[str, int], list[Any]] = {}
        for event in as_list(xid.get("events")):
            code = _int(dig(event, "xid"))
            if code is None:
                continue
            entry = counts.setdefault((str(dig(event, "pci") or "?"), code), [0, str(dig(event, "text") or "")])
            entry[0] += 1
        if not counts:
            continue
        severe = sorted({code for _, code in counts if code in SEVERE_XIDS})
        rows = tuple(
            (pci, str(code), SEVERE_XIDS.get(code, "see the catalog"), str(n), text[:120])
            for (pci, code), (n, text) in sorted(counts.items())
        )
        findings.append(
            Finding(
                id="health.xid",
                severity="error" if severe else "warning",
                title=f"{sum(n for n, _ in counts.values())} Xid line(s) since boot"
                + (f" (Xid {', '.join(str(c) for c in severe)})" if severe else ""),
                hosts=(host.name,),
                evidence=(
                    Evidence(
                        kind="text",
                        host=host.name,
                        text=f"`NVRM: Xid` lines in {xid.get('source') or 'the kernel log'} (this boot)",
                        table=(("device", "Xid", "meaning", "lines", "first text"),) + rows,
                    ),
                ),
                recommendation=f"Look each code up in NVIDIA's Xid catalog ({XID_CATALOG}): ECC, NVLink, GSP and "
                "fallen-off-the-bus codes need the GPU drained and reset or the host rebooted; others (13, 31, 43) "
                "are often a process's own fault and follow it.",
                sources=(source(host, "env"),),
                action="Look up the Xid codes listed and drain the GPU if they are hardware codes"
                if severe
                else "Look up the Xid codes listed in NVIDIA's Xid catalog",
            )
        )
    return findings


def links_down(hosts: list[HostResult]) -> list[Finding]:
    """NVLink links inactive beside active ones on the same GPU, or an NVSwitch fabric that did not complete."""
    findings = []
    for host in hosts:
        rows = []
        for gpu in _gpus(host):
            active, inactive = _int(dig(gpu, "nvlink", "active")), _int(dig(gpu, "nvlink", "inactive"))
            if active and inactive:
                rows.append((_label(gpu), f"{inactive} of {active + inactive} NVLink links inactive"))
            state, status = dig(gpu, "fabric", "state"), dig(gpu, "fabric", "status")
            if (isinstance(state, str) and state != "Completed") or (isinstance(status, str) and status != "Success"):
                rows.append((_label(gpu), f"fabric state {state or '?'}, status {status or '?'}"))
        if rows:
            findings.append(
                Finding(
                    id="health.links_down",
                    severity="warning",
                    title=f"GPU interconnect not fully up on {len({r[0] for r in rows})} GPU(s)",
                    hosts=(host.name,),
                    evidence=(
                        Evidence(
                            kind="measurement",
                            host=host.name,
                            text="nvidia-smi nvlink -s and nvidia-smi -q (Fabric)",
                            table=(("GPU", "state"),) + tuple(rows),
                        ),
                    ),
                    recommendation="Tensor-parallel traffic falls back to fewer links or PCIe: check the "
                    "nvidia-fabricmanager service (`systemctl status nvidia-fabricmanager`) and the Xid lines, "
                    "then reset the GPUs or reboot the host.",
                    sources=(source(host, "env"),),
                    action="Check nvidia-fabricmanager and the NVLink links of the GPU(s) listed",
                )
            )
    return findings
