"""Kernel libraries (sgl-kernel, flashinfer, deep_gemm, cuda-python, ...) of the serving interpreter that do not
meet the installed sglang's `Requires-Dist`, both read by the env probe (`kernel_libs`) from package metadata.
"""

from __future__ import annotations

from typing import Any

from gpudiag.findings.common import source
from gpudiag.findings.requirements import normalize, parse_requirement, satisfies
from gpudiag.models import Evidence, Finding, HostResult
from gpudiag.probe_view import as_dict, as_list, dig, probe

# Distributions (PEP 503 names) that hold the GPU kernels sglang calls; their versions must be the ones it
# was built against.
KERNEL_LIBS = frozenset(
    (
        "sgl-kernel",
        "sglang-kernel",
        "flashinfer-python",
        "flashinfer",
        "flashinfer-cubin",
        "flashinfer-jit-cache",
        "triton",
        "deep-gemm",
        "sgl-deep-gemm",
        "cuda-python",
    )
)


def kernel_libs_mismatch(hosts: list[HostResult]) -> list[Finding]:
    """Kernel libraries missing or at another version than the installed sglang's METADATA requires."""
    findings = []
    for host in hosts:
        libs = as_dict(dig(probe(host, "env"), "kernel_libs"))
        sglang = as_dict(libs.get("sglang"))
        packages = {normalize(str(k)): as_dict(v) for k, v in as_dict(libs.get("packages")).items()}
        rows = _unmet(as_list(sglang.get("requires")), packages)
        if rows:
            findings.append(
                Finding(
                    id="health.kernel_libs_mismatch",
                    severity="warning",
                    title=f"{len(rows)} kernel librar{'y' if len(rows) == 1 else 'ies'} not as sglang "
                    f"{sglang.get('version') or ''} requires".replace("  ", " "),
                    hosts=(host.name,),
                    evidence=(
                        Evidence(
                            kind="source",
                            host=host.name,
                            file=str(sglang.get("dist_info") or "") + "/METADATA" if sglang.get("dist_info") else None,
                            text=f"Requires-Dist of sglang against {libs.get('interpreter') or 'the interpreter'}'s "
                            "installed dist-info",
                            table=(("distribution", "sglang requires", "installed"),) + tuple(rows),
                        ),
                    ),
                    recommendation="Kernels built for another release fail at import or compute wrong results: "
                    "reinstall them at the versions sglang pins (`pip install sglang==<version>` brings them).",
                    sources=(source(host, "env"),),
                    action="Install the kernel libraries at the versions sglang requires",
                )
            )
    return findings


def _unmet(requires: list[Any], packages: dict[str, dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(name, required, installed) for each kernel library the requirements ask for and the host does not meet.
    Requirements under extras (`; extra == "srt"`) bind only a library that is installed, and one of them met
    is enough (0.4.x asks `sgl-kernel==0.2.8` under `srt` and any `sgl-kernel` under `blackwell`)."""
    always: dict[str, list[str]] = {}
    extras: dict[str, list[str]] = {}
    for line in requires:
        wanted = parse_requirement(str(line))
        if wanted is None or wanted.name not in KERNEL_LIBS:
            continue
        if wanted.marker and not wanted.extra_only:
            continue  # a platform marker this side cannot evaluate for the host
        (extras if wanted.extra_only else always).setdefault(wanted.name, []).append(wanted.specifier)
    rows = []
    for name in sorted(set(always) | set(extras)):
        installed = packages.get(name, {}).get("version")
        if installed is None:
            if name in always:
                rows.append((name, " ".join(s or "any" for s in always[name]), "not installed"))
            continue
        unmet = [spec for spec in always.get(name, []) if satisfies(str(installed), spec) is False]
        options = extras.get(name, [])
        if options and all(satisfies(str(installed), spec) is False for spec in options):
            unmet.append(" or ".join(options))
        if unmet:
            rows.append((name, "; ".join(unmet), str(installed)))
    return rows
