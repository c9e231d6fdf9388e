"""The serving interpreter's kernel libraries (sgl-kernel, flashinfer, triton, deep_gemm, cuda-python) and the
requirements the installed sglang states for them, read from package metadata: nothing is imported.

The interpreter is asked for its sys.path once (probes/sglang_facts/locate.py, the same short child the sglang
facts use); each folder's `*.dist-info` / `*.egg-info` is then read here, the first of a name in path order
winning as an import would. Only the headers of METADATA are read (they end at the first blank line), bounded.
The comparison with sglang's requirements is the control side's (gpudiag/findings/health.py).
"""
import os
import re

from probes.sglang_facts import locate

# Normalised distribution names (PEP 503) whose versions are reported; sglang's own requirements are added.
KERNEL_LIBS = ("sgl-kernel", "sglang-kernel", "flashinfer-python", "flashinfer", "flashinfer-cubin",
               "flashinfer-jit-cache", "triton", "pytorch-triton", "deep-gemm", "sgl-deep-gemm", "cuda-python",
               "cuda-bindings", "torch")
MAX_HEADER_BYTES = 262144
MAX_REQUIRES = 300
MAX_FOLDERS = 200
_SUFFIXES = (".dist-info", ".egg-info")


def normalize(name):
    return re.sub(r"[-_.]+", "-", (name or "").strip()).lower()


def read_headers(dist_info):
    """{"name", "version", "requires": [...]} from a dist-info METADATA or egg-info PKG-INFO, or None."""
    for leaf in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(dist_info, leaf), "rb") as handle:
                head = handle.read(MAX_HEADER_BYTES).decode("utf-8", "replace")
        except OSError:
            continue
        found = {"name": None, "version": None, "requires": []}
        for line in head.splitlines():
            if not line.strip():
                break  # the body (a long description) starts here
            key, _, value = line.partition(":")
            if key == "Name" and found["name"] is None:
                found["name"] = value.strip()
            elif key == "Version" and found["version"] is None:
                found["version"] = value.strip()
            elif key == "Requires-Dist" and len(found["requires"]) < MAX_REQUIRES:
                found["requires"].append(value.strip()[:300])
        return found
    return None


def _folder_name(entry):
    """The normalised project name a `name-version.dist-info` folder carries, or None."""
    stem = entry[:-len(".dist-info")] if entry.endswith(".dist-info") else entry[:-len(".egg-info")]
    return normalize(stem.split("-", 1)[0])


def installed(paths, wanted):
    """{normalised name: (dist_info path)} for the names in `wanted`, the first in path order."""
    found = {}
    for folder in paths[:MAX_FOLDERS]:
        try:
            entries = sorted(os.listdir(folder))
        except OSError:
            continue
        for entry in entries:
            if not entry.endswith(_SUFFIXES):
                continue
            name = _folder_name(entry)
            if name in wanted and name not in found:
                found[name] = os.path.join(folder, entry)
    return found


def requirement_name(line):
    match = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line or "")
    return normalize(match.group(1)) if match else None


def collect_kernel_libs(python, timeout):
    """{"status", "reason", "interpreter", "packages": {name: {version, dist_info}}, "sglang": {...} | None}."""
    record = {"status": "skipped", "reason": None, "interpreter": python, "packages": {}, "sglang": None}
    paths, error = locate.search_paths(python, None, timeout=timeout)
    if error:
        record["reason"] = error
        return record
    sglang_dir = installed(paths, {"sglang"}).get("sglang")
    sglang = read_headers(sglang_dir) if sglang_dir else None
    wanted = set(KERNEL_LIBS)
    if sglang:
        required = [requirement_name(line) for line in sglang["requires"]]
        wanted.update(name for name in required if name)
        record["sglang"] = {"version": sglang["version"], "dist_info": sglang_dir, "requires": sglang["requires"]}
    for name, dist_info in sorted(installed(paths, wanted).items()):
        headers = read_headers(dist_info) or {}
        record["packages"][name] = {"version": headers.get("version"), "dist_info": dist_info}
    record["status"] = "ok"
    return record
