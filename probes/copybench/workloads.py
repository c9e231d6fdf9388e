"""The copy bench's workloads: which replay fields each cell copies (from the one table in
probes/replay_fields.py) and what the installed release does with them (from sglang_source's data).
"""
from probes import replay_fields
from probes.replay_fields import HIDDEN, PATHS, dtype_pairs, dtype_size, field_name  # noqa: F401

INSTALLED_FUNC = "_grouped_foreach_copy_"


def path_has_hidden(path):
    return replay_fields.copies_hidden(path)


def field_specs(path, batch_size, hidden_size, topk, steps, draft_tokens, hidden_dtype="bfloat16",
                names=None, release=None):
    """The fields one replay of `path` copies, as the table has them for `release` (see
    replay_fields.field_specs); `names` read from the installed release replace the table's."""
    return replay_fields.field_specs(path, batch_size, hidden_size, topk, steps, draft_tokens, hidden_dtype,
                                     names=names, release=release)


def workload_grid(paths, batch_sizes, hidden_sizes):
    """(path, batch_size, hidden_size) cells; a path without a hidden tensor gets one cell per batch size."""
    cells = []
    for path in paths:
        for bs in batch_sizes:
            if path_has_hidden(path):
                cells.extend((path, bs, h) for h in hidden_sizes)
            else:
                cells.append((path, bs, None))
    return cells


def rotated_grid(cells, rotation=None):
    """(cells, offset): GPU `place` of `count` starts its own share of the grid, so a budget too short for
    every cell loses different field sets on different GPUs instead of the same ones on all."""
    place, count = (rotation or (0, 1))[:2]
    if not cells or count <= 1:
        return list(cells), 0
    offset = (int(place) * len(cells)) // int(count) % len(cells)
    return list(cells[offset:]) + list(cells[:offset]), offset


def device_grid(job):
    """This device's workloads in its rotated order (job["rotation"]: its [place, count] among the GPUs)."""
    return rotated_grid(workload_grid(job["paths"], job["batch_sizes"], job["hidden_sizes"]), job.get("rotation"))


def priority_cells(cells, live_batch_size=None):
    """The cells the report's cost per decode step reads, one per path in PATHS order: at the live server's batch
    size when the grid has it, else the largest batch size; the largest hidden size of that batch size."""
    out = []
    for path in sorted(set(c[0] for c in cells), key=lambda p: (PATHS.index(p) if p in PATHS else len(PATHS), p)):
        mine = [c for c in cells if c[0] == path]
        at_live = [c for c in mine if live_batch_size is not None and c[1] == live_batch_size]
        out.append(max(at_live or mine, key=lambda c: (c[1], c[2] or 0)))
    return out


def workload_name(path, batch_size, hidden_size):
    return "%s/bs%d" % (path, batch_size) + ("/h%d" % hidden_size if hidden_size else "")


def sweep_sizes(min_bytes, max_bytes, factor, cap_bytes):
    """Sizes of the one-tensor sweep: min … max by `factor`, none whose source, its saved copy and the
    destination exceed the cap."""
    sizes, size = [], max(1, int(min_bytes))
    factor = max(2, int(factor))
    while size <= max_bytes and 3 * size <= cap_bytes:
        sizes.append(size)
        size *= factor
    return sizes


# --- what the installed release does (from the sglang_source probe's data) -------------------------------

_EAGLE_KEYS = {"eagle_draft": "draft", "eagle_draft_extend": "draft_extend"}


def call_site_path(qualname):
    """Which replay path a call site of `_grouped_foreach_copy_` belongs to, or None."""
    q = str(qualname or "")
    if "DraftExtend" in q or "draft_extend" in q.lower():
        return "eagle_draft_extend"
    if "Draft" in q or "EAGLE" in q or "Eagle" in q:
        return "eagle_draft"
    if "Prefill" in q:
        return None
    if any(k in q for k in ("DecodeInputBuffers", "populate_from_forward_batch", "CudaGraphRunner",
                            "BufferRegistry", "fill_from")):
        return "dflash_verify"   # the generic decode/verify runner DFlash verifies through
    return None


def _source(results):
    data = (results or {}).get("sglang_source")
    return data if isinstance(data, dict) and data.get("found", True) else None


def _module_of(target):
    """The module a call resolves to: {module, file, line}, or a dotted 'module._grouped_foreach_copy_'."""
    if isinstance(target, dict):
        return target.get("module")
    if isinstance(target, str) and target:
        suffix = "." + INSTALLED_FUNC
        return target[:-len(suffix)] if target.endswith(suffix) else target
    return None


def _gpu_fields(names):
    """Field names of device tensors, in order, once each (host mirrors such as seq_lens_cpu dropped)."""
    out = []
    for name in names:
        name = field_name(name) if name else None
        if name and not name.endswith("_cpu") and name not in out:
            out.append(name)
    return out


def fields_from_source(results):
    """{path: [field names]} the installed release copies on each path: the EAGLE runners' grouped and
    per-tensor fields, and the generic runner's call-site list."""
    data = _source(results)
    if not data:
        return {}
    found = {}
    for path, key in _EAGLE_KEYS.items():
        info = (data.get("eagle") or {}).get(key) or {}
        names = _gpu_fields(list(info.get("grouped_fields") or []) + list(info.get("per_tensor_fields") or []))
        if names:
            found[path] = names
    for site in ((data.get("grouped_foreach_copy") or {}).get("call_sites") or []):
        if site.get("reachable") is False:
            continue  # dead code (0.5.14's populate_from_forward_batch) copies nothing at run time
        path = call_site_path(site.get("qualname"))
        names = _gpu_fields(site.get("fields") or [])
        if path and path not in found and _names_fields(path, names, data.get("version")):
            found[path] = names
    return found


def _names_fields(path, names, version):
    """Whether a call site's list names at least one field the table knows for the path: a registry that
    fills its slots in a loop shows only its loop variable (`dst`)."""
    known = {row["name"] for row in replay_fields.rows(path, version)}
    return any(name in known for name in names)


def installed_behaviour(results):
    """{path: {kind: per_tensor|grouped|unknown, hidden_states_separate, module, evidence}} for the release."""
    data = _source(results)
    out = {p: {"kind": "unknown", "hidden_states_separate": None, "module": None, "evidence": None}
           for p in PATHS}
    if not data:
        return out
    for site in (data.get("grouped_foreach_copy") or {}).get("call_sites") or []:
        path = call_site_path(site.get("qualname")) if site.get("reachable") is not False else None
        if path and out[path]["kind"] == "unknown":
            names = _gpu_fields(site.get("fields") or [])
            out[path] = {"kind": "grouped", "hidden_states_separate": (HIDDEN not in names) if names else None,
                         "module": _module_of(site.get("resolves_to")), "evidence": _evidence(site)}
    for path, key in _EAGLE_KEYS.items():
        info = (data.get("eagle") or {}).get(key)
        if not isinstance(info, dict) or "batched" not in info:
            continue
        ev = (info.get("evidence") or [None])[0] or _evidence(info)
        if info.get("batched"):
            resolved = [_module_of(t) for t in info.get("grouped_resolves_to") or [] if _module_of(t)]
            out[path] = {"kind": "grouped", "hidden_states_separate": bool(info.get("hidden_states_separate")),
                         "module": resolved[0] if resolved else out[path]["module"], "evidence": ev}
        else:
            out[path] = {"kind": "per_tensor", "hidden_states_separate": None, "module": None, "evidence": ev}
    if not installed_definitions(results):
        # The release was read and has no grouped copy at all: every path copies tensor by tensor.
        for path in PATHS:
            if out[path]["kind"] == "unknown":
                out[path]["kind"] = "per_tensor"
    return out


def _evidence(item):
    if not isinstance(item, dict) or not item.get("file"):
        return None
    return {"file": item.get("file"), "line": item.get("line"), "snippet": item.get("snippet")}


def installed_release(results):
    """The installed sglang's version as sglang_source read it, or None."""
    data = _source(results)
    return data.get("version") if data else None


def installed_definitions(results):
    """Modules defining `_grouped_foreach_copy_` in the installed release, as sglang_source found them."""
    data = _source(results)
    if not data:
        return []
    modules = []
    for item in ((data.get("grouped_foreach_copy") or {}).get("definitions") or []):
        module = item.get("module")
        if module and module not in modules:
            modules.append(module)
    return modules
