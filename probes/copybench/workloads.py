"""The tensors sglang copies into static buffers before each CUDA-graph replay, as plain data.

Three replay paths: EAGLE draft, EAGLE draft-extend and DFlash verify (the generic runner in target-verify
mode). Field names, dtypes and shapes follow the release's buffer allocation; when the sglang_source probe
found the call-site field lists of the installed release, those names are used instead of the defaults.
"""
import re

INSTALLED_FUNC = "_grouped_foreach_copy_"
PATHS = ("eagle_draft", "eagle_draft_extend", "dflash_verify")
HIDDEN = "hidden_states"

# Shape rules: "bs" requests, "tok" tokens of the replay (bs*topk for the draft, bs*draft_tokens otherwise),
# "topk", "steps", "hidden". A rule is a tuple of products, e.g. ("tok*steps",) or ("bs", "topk").
_SMALL = {
    "input_ids": ("int64", ("tok",)),
    "req_pool_indices": ("int64", ("bs",)),
    "seq_lens": ("int64", ("bs",)),
    "out_cache_loc": ("int64", ("tok",)),
    "positions": ("int64", ("tok",)),
    "topk_p": ("float32", ("bs", "topk")),
    "topk_index": ("int64", ("bs", "topk")),
    "extend_seq_lens": ("int32", ("bs",)),
    "num_correct_drafts": ("int32", ("bs",)),
    "num_accept_tokens": ("int32", ("bs",)),
    "accept_length": ("int32", ("bs",)),
    "rids_int": ("int64", ("bs",)),
    "bootstrap_room_ids_int": ("int64", ("bs",)),
    "num_token_non_padded": ("int32", ("1",)),
    "mamba_track_indices": ("int64", ("bs",)),
    "mamba_track_mask": ("bool", ("bs",)),
    "encoder_lens": ("int32", ("bs",)),
    "out_cache_loc_swa": ("int64", ("tok",)),
}

# Source dtypes (the ForwardBatch / spec-info tensor copied from) where they differ from the buffer's:
# none in the newest release read (0.5.23), whose buffers take the batch's dtypes.
_SOURCE_DTYPES = {}
# Buffer dtypes of older releases, newest first: (last release with them, {field: buffer dtype}). Up to 0.5.11
# the decode buffers and both EAGLE runners allocate seq_lens as int32 while the batch's seq_lens is int64,
# so every replay casts it; 0.5.14 allocates int64 buffers (runner_utils/buffers.py, EAGLE runners).
_OLDER_BUFFERS = (((0, 5, 11), {"seq_lens": "int32"}),)
_BATCH_DTYPES = {"seq_lens": "int64"}   # ScheduleBatch.seq_lens, int64 in every release read

# Per path: the default field names (in replay order) and path-specific overrides of the table above.
_PATHS = {
    # EAGLEDraftCudaGraphRunner.replay: num_tokens_per_bs = topk; out_cache_loc holds every draft step.
    "eagle_draft": (("seq_lens", "out_cache_loc", "positions", "topk_p", "topk_index", HIDDEN,
                     "req_pool_indices"),
                    {"out_cache_loc": ("int64", ("tok*steps",)), HIDDEN: (None, ("bs", "hidden"))}),
    # EAGLEDraftExtendCudaGraphRunner: one row per draft token of every request.
    "eagle_draft_extend": (("input_ids", "seq_lens", "out_cache_loc", "positions", "req_pool_indices",
                            "extend_seq_lens", "num_correct_drafts", "num_accept_tokens", HIDDEN),
                           {HIDDEN: (None, ("tok", "hidden"))}),
    # DFlash verify runs the target's generic graph runner in TARGET_VERIFY mode (draft_tokens per request);
    # that path copies no hidden-state tensor.
    "dflash_verify": (("input_ids", "req_pool_indices", "seq_lens", "out_cache_loc", "positions"), {}),
}

_TOKENS_PER_REQUEST = {"eagle_draft": "topk", "eagle_draft_extend": "draft_tokens",
                       "dflash_verify": "draft_tokens"}

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def path_has_hidden(path):
    return HIDDEN in _PATHS[path][0]


def field_name(expression):
    """`buffers.seq_lens[:raw_bs]` or `forward_batch.spec_info.topk_p` → the field name (`seq_lens`)."""
    head = str(expression).split("[", 1)[0].strip()
    names = _IDENT.findall(head.rsplit(".", 1)[-1])
    return names[0] if names else None


def _dims(rule, sizes):
    dims = []
    for term in rule:
        value = 1
        for factor in term.split("*"):
            value *= int(factor) if factor.isdigit() else int(sizes[factor])
        dims.append(value)
    return tuple(dims)


def release_tuple(version):
    """'0.5.11.post2' → (0, 5, 11); None when there is no leading number."""
    parts = []
    for piece in str(version or "").split("."):
        digits = re.match(r"\d+", piece)
        if not digits:
            break
        parts.append(int(digits.group()))
        if len(parts) == 3:
            break
    return tuple(parts) or None


def dtype_pairs(release=None):
    """{field: (buffer dtype, source dtype)} for the fields whose dtypes depend on the release; without a
    release the newest one read (0.5.23): buffers and sources alike."""
    pairs = {name: (_SMALL[name][0], dtype) for name, dtype in _SOURCE_DTYPES.items()}
    found = release_tuple(release)
    for last, buffers in _OLDER_BUFFERS:
        if found is not None and found <= last:
            for name, dtype in buffers.items():
                pairs[name] = (dtype, _SOURCE_DTYPES.get(name) or _BATCH_DTYPES.get(name) or dtype)
    return pairs


def field_specs(path, batch_size, hidden_size, topk, steps, draft_tokens, hidden_dtype="bfloat16",
                names=None, release=None):
    """The fields one replay of `path` copies: [{name, dtype, src_dtype, shape, numel, bytes, assumed}].

    `names` (from the installed release) replaces the default names; a name this table does not know is
    kept as a per-request int64 tensor marked `assumed`. hidden_states is always part of an EAGLE replay.
    `dtype` is the static buffer's, `src_dtype` the batch tensor's (they differ where the release casts).
    """
    default_names, overrides = _PATHS[path]
    tokens = batch_size * {"topk": topk, "draft_tokens": draft_tokens}[_TOKENS_PER_REQUEST[path]]
    sizes = {"bs": batch_size, "tok": tokens, "topk": topk, "steps": steps, "hidden": hidden_size}
    wanted = [n for n in (names or default_names) if n]
    if HIDDEN in default_names and HIDDEN not in wanted:
        wanted.append(HIDDEN)
    specs, seen, pairs = [], set(), dtype_pairs(release)
    for name in wanted:
        if name in seen:
            continue
        seen.add(name)
        if name == HIDDEN and (not hidden_size or HIDDEN not in default_names):
            continue
        dtype, rule = overrides.get(name) or _SMALL.get(name) or ("int64", ("bs",))
        assumed = name not in overrides and name not in _SMALL
        dtype = dtype or hidden_dtype
        dtype, src_dtype = pairs.get(name, (dtype, dtype))
        shape = _dims(rule, sizes)
        specs.append({"name": name, "dtype": dtype, "src_dtype": src_dtype, "shape": list(shape),
                      "numel": _numel(shape), "bytes": _numel(shape) * dtype_size(dtype), "assumed": assumed})
    return specs


def _numel(shape):
    total = 1
    for d in shape:
        total *= d
    return total


_DTYPE_SIZES = {"bool": 1, "uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "float16": 2,
                "bfloat16": 2, "float32": 4, "float64": 8}


def dtype_size(name):
    return _DTYPE_SIZES.get(name, 8)


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
        if path and names and path not in found:
            found[path] = names
    return found


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
