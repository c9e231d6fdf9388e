"""The per-host appendix sections that describe what the probes read: environment, torch capabilities, sglang
source facts (render/source_facts.py) and the running servers. Tables, one row per fact, every list sorted."""

from __future__ import annotations

import re
from typing import Any

from gpudiag.probe_view import as_dict, as_list, dig, probe
from gpudiag.findings import (
    HostFacts,
    command_line,
    copy_path_text,
    host_facts,
    release_of,
    scope,
    servers_of,
    torch_facts,
)
from gpudiag.models import HostResult
from gpudiag.render.blocks import fenced, table
from gpudiag.render.safe_text import code, md
from gpudiag.render.source_facts import source_facts

TORCH_CHECKS = ("mixed_pairs_one_call", "non_contiguous", "mismatched_shapes", "non_blocking")


def host_sections(host: HostResult) -> list[str]:
    lines: list[str] = []
    for section in (environment(host), torch_capabilities(host), source_facts(host), deployment(host)):
        lines += section
    return lines


def environment(host: HostResult) -> list[str]:
    env = probe(host, "env")
    if env is None:
        return []
    f = host_facts(host)
    # One line of facts: the fleet table already has GPUs, driver, torch and sglang.
    lines = ["#### Environment", "", _environment_line(env, f), ""]
    if f.torch_elsewhere:
        lines += [
            "torch was read in another Python than sglang: the torch facts may not describe the torch the "
            "server runs with.",
            "",
        ]
    return lines + _gpus(env)


def _environment_line(env: dict[str, Any], f: HostFacts) -> str:
    python = as_dict(env.get("python"))
    torch = as_dict(env.get("torch"))
    facts: list[tuple[str, Any]] = [
        ("hostname", env.get("hostname")),
        ("os", env.get("os")),
        ("kernel", env.get("kernel")),
        ("CPUs", env.get("cpu_count")),
        ("memory", f"{env['memory_total_mib']} MiB" if env.get("memory_total_mib") else None),
        (
            "python (probes)",
            f"{python.get('version', '-')} "
            f"({python.get('executable', '-')})" + (", venv" if python.get("venv") else ""),
        ),
        (
            "torch",
            f.torch + (f" (CUDA {torch['cuda']})" if torch.get("cuda") else "")
            if torch.get("available", True)
            else f"not available: {torch.get('reason')}",
        ),
        ("compute capability", f.compute_capability),
        ("topology", dig(env, "topology", "summary")),
    ]
    return "; ".join(f"{label} {md(value)}" for label, value in facts if value not in (None, "", "-")) + "."


def _gpus(env: dict[str, Any]) -> list[str]:
    """One table, a column per GPU; or why there are none."""
    devices = [d for d in as_list(dig(env, "gpus", "devices")) if isinstance(d, dict)]
    if devices:
        return table(
            [
                ("GPU",) + tuple(str(d.get("index")) for d in devices),
                ("PCI bus",) + tuple(str(d.get("pci_bus_id") or "-").split(":", 1)[-1] for d in devices),
                ("memory used (MiB)",)
                + tuple(f"{d.get('memory_used_mib', '-')} / {d.get('memory_total_mib', '-')}" for d in devices),
                ("processes",)
                + tuple(
                    ", ".join(
                        f"{p.get('name')} ({p.get('pid')})" for p in as_list(d.get("processes")) if isinstance(p, dict)
                    )
                    or "-"
                    for d in devices
                ),
            ]
        )
    if dig(env, "gpus", "reason"):
        return [f"GPUs: {md(dig(env, 'gpus', 'status'))} — {md(dig(env, 'gpus', 'reason'))}", ""]
    return []


def torch_capabilities(host: HostResult) -> list[str]:
    caps = probe(host, "torch_caps")
    if caps is None:
        return []
    version, interpreter = torch_facts(host)
    has = caps.get("has_foreach_copy")
    lines = [
        "#### torch capabilities",
        "",
        f"torch {md(caps.get('torch_version') or version or '-')}: torch._foreach_copy_ "
        f"{'present' if has else 'absent' if has is False else 'unknown'}; read in "
        f"{md(interpreter[0] + ' (' + interpreter[1] + ')') if interpreter else '-'}; pairs written "
        f"{md(caps.get('pair_order') or 'src->dst')}.",
        "",
    ]
    said = scope(host, interpreter[0] if interpreter else None, "torch facts")
    lines += [md(said[0].upper() + said[1:]) + ".", ""] if said else []
    checks = sorted(as_dict(caps.get("checks")).items(), key=lambda kv: _device_key(kv[0]))
    if checks:
        # Which copy ran (fast multi_tensor_apply or per-tensor), where torch_caps recorded it.
        with_paths = any(copy_path_text(as_dict(check)) for _, check in checks)
        rows: list[tuple[Any, ...]] = [
            ("device", "status", "dtype pairs ok") + TORCH_CHECKS + (("copy path",) if with_paths else ()) + ("note",)
        ]
        grouped: dict[tuple[Any, ...], list[str]] = {}
        for device, check in checks:
            check = as_dict(check)
            pairs = as_dict(check.get("pairs"))
            ok = sum(1 for v in pairs.values() if v == "ok")
            # Devices that read the same (busy GPUs differ only in the pid) share one row.
            note = re.sub(r",? e\.g\. pid \d+", "", str(check.get("reason") or ""))
            row = (
                (check.get("status") or ("ok" if check.get("ok") else "-"), f"{ok} of {len(pairs)}" if pairs else "-")
                + tuple(_short(check.get(name)) for name in TORCH_CHECKS)
                + ((copy_path_text(check) or "-",) if with_paths else ())
                + (note,)
            )
            grouped.setdefault(row, []).append(device)
        rows += [(", ".join(devices),) + row for row, devices in grouped.items()]
        lines += table(rows)
    return lines


def _device_key(name: str) -> tuple[int, int, str]:
    kind, _, index = name.partition(":")
    return (0 if kind == "cpu" else 1, int(index) if index.isdigit() else -1, name)


def _short(outcome: Any) -> str:
    """'ok', or the outcome's first clause ('raises: RuntimeError')."""
    if outcome in (None, ""):
        return "-"
    text = str(outcome)
    return text if text == "ok" else text.split(":")[0] + (": " + text.split(":")[1].strip() if ":" in text else "")


def deployment(host: HostResult) -> list[str]:
    data = probe(host, "deployment")
    if data is None:
        return []
    chosen = as_dict(data.get("interpreter"))
    lines = ["#### Deployment", ""]
    if chosen.get("path"):
        lines += [
            f"Serving interpreter: {code(chosen['path'])} (chosen: {md(chosen.get('why') or '-')}"
            + (f", server pid {md(chosen['pid'])}" if chosen.get("pid") else "")
            + ")"
            + (f"; {md(chosen['note'])}" if chosen.get("note") else "")
            + ".",
            "",
        ]
    servers = servers_of(host)
    if not servers:
        return lines + ["No running sglang server found.", ""]
    for s in servers:
        visible = s.get("cuda_visible_devices") or dig(s, "env", "CUDA_VISIBLE_DEVICES")
        release = f"; {md(release_of(s))}" if len(servers) > 1 else ""
        lines += [
            f"Server pid {md(s.get('pid', '-'))} ({md(s.get('python') or '-')}{release}), CUDA_VISIBLE_DEVICES="
            f"{md(visible) if visible not in (None, '') else 'unset (every GPU)'}:",
            "",
        ]
        lines += fenced(None, None, command_line(s), "")
    return lines
