"""The one table of tensors sglang copies into static buffers before each speculative CUDA-graph replay.

Per release read (0.5.11, 0.5.14, 0.5.23 wheels): field names in replay order, the static buffer's dtype,
the batch tensor's dtype, the shape per batch size, whether the field leaves the grouped call for its own
copy_(), and the condition under which the release copies it at all. Both the copy bench workloads and the
synthetic graph harness build their tensors from here. Pure data, stdlib only.
"""
import re

PATHS = ("eagle_draft", "eagle_draft_extend", "dflash_verify")
HIDDEN = "hidden_states"
# The model's dtype stands for None in the dtype column (hidden_states follows the model).
MODEL_DTYPE = None

# Shape rules: "bs" requests, "tok" tokens of the replay (bs*topk for the draft, bs*draft_tokens otherwise),
# "topk", "steps", "hidden", "vocab". A rule is a tuple of products, e.g. ("tok*steps",) or ("bs", "topk").
# A row: (name, buffer dtype, batch dtype, shape rule, own copy_(), condition or None for every replay).
_EAGLE_DRAFT = (
    ("seq_lens", "int64", "int64", ("bs",), False, None),
    ("out_cache_loc", "int64", "int64", ("tok*steps",), False, None),
    ("positions", "int64", "int64", ("tok",), False, None),
    ("topk_p", "float32", "float32", ("bs", "topk"), False, None),
    ("topk_index", "int64", "int64", ("bs", "topk"), False, None),
    ("req_pool_indices", "int64", "int64", ("bs",), False, None),
    ("mrope_positions", "int64", "int64", ("3", "tok"), False, "mrope models"),
    ("rids_int", "int64", "int64", ("bs",), False, "SGLANG_KV_CANARY_ENABLE_TOKEN_ORACLE"),
    ("bootstrap_room_ids_int", "int64", "int64", ("bs",), False, "SGLANG_KV_CANARY_ENABLE_TOKEN_ORACLE"),
    ("draft_probs", "float32", "float32", ("bs", "vocab"), True, "rejection sampling"),
    (HIDDEN, MODEL_DTYPE, MODEL_DTYPE, ("bs", "hidden"), True, None),
    ("dsa_seed_topk", "int32", "int32", ("bs", "topk"), True, "DSA models"),
    ("temperatures", "float32", "float32", ("bs", "1"), True, "rejection sampling"),
    ("sampling_seed", "int64", "int64", ("bs",), True, "rejection sampling, deterministic inference"),
    ("top_ks", "int32", "int32", ("bs",), True, "rejection sampling"),
)
_EAGLE_DRAFT_EXTEND = (
    ("input_ids", "int64", "int64", ("tok",), False, None),
    ("seq_lens", "int64", "int64", ("bs",), False, None),
    ("out_cache_loc", "int64", "int64", ("tok",), False, None),
    ("positions", "int64", "int64", ("tok",), False, None),
    ("req_pool_indices", "int64", "int64", ("bs",), False, None),
    ("mrope_positions", "int64", "int64", ("3", "tok"), False, "mrope models"),
    ("extend_seq_lens", "int32", "int32", ("bs",), False, None),
    ("num_correct_drafts", "int32", "int32", ("bs",), False, None),
    ("num_accept_tokens", "int32", "int32", ("bs",), False, None),
    ("select_index", "int64", "int64", ("bs",), False, None),
    ("mamba_track_indices", "int64", "int64", ("bs",), False, "mamba extra buffer"),
    (HIDDEN, MODEL_DTYPE, MODEL_DTYPE, ("tok", "hidden"), True, None),
)
# DFlash verifies through the target's generic decode runner in TARGET_VERIFY mode; it copies no hidden
# state (the runner builds custom_mask itself, the registry does not copy it).
_GENERIC_VERIFY = (
    ("input_ids", "int64", "int64", ("tok",), False, None),
    ("req_pool_indices", "int64", "int64", ("bs",), False, None),
    ("seq_lens", "int64", "int64", ("bs",), False, None),
    ("out_cache_loc", "int64", "int64", ("tok",), False, None),
    ("positions", "int64", "int64", ("tok",), False, None),
    ("mamba_track_indices", "int64", "int64", ("bs",), False, "mamba track"),
    ("mamba_track_mask", "bool", "bool", ("bs",), False, "mamba track"),
    ("encoder_lens", "int32", "int32", ("bs",), False, "encoder-decoder models"),
    ("mrope_positions", "int64", "int64", ("3", "tok"), False, "mrope models"),
    ("rids_int", "int64", "int64", ("bs",), False, "SGLANG_KV_CANARY_ENABLE_TOKEN_ORACLE"),
    ("bootstrap_room_ids_int", "int64", "int64", ("bs",), False, "SGLANG_KV_CANARY_ENABLE_TOKEN_ORACLE"),
    ("num_token_non_padded", "int32", "int32", ("1",), False, "num_token_non_padded enabled"),
    ("out_cache_loc_swa", "int64", "int64", ("tok",), False, "sliding-window models"),
)


def _release(rows, drop=(), rename=None, buffer_dtypes=None, only=None):
    """Rows of a newer release reshaped for an older one: fields it lacks dropped, names it spelt
    differently renamed, buffer dtypes it allocated differently replaced."""
    out = []
    for name, dtype, src, rule, own, when in rows:
        if name in drop or (only is not None and name not in only):
            continue
        dtype = (buffer_dtypes or {}).get(name, dtype)
        out.append(((rename or {}).get(name, name), dtype, src, rule, own, when))
    return tuple(out)


# Release → path → (grouped: the release batches this path's copies, rows). Newest first.
# 0.5.14 lacks 0.5.23's draft-extend select_index and the draft's DSA/sampling extras and mrope in the
# draft group. Up to 0.5.11 the EAGLE runners copy every field with its own copy_(), in this order, and
# allocate seq_lens as int32 while the batch's seq_lens is int64 (a cast on every replay).
_OLD_SEQ_LENS = {"seq_lens": "int32"}
_OLD_EXTEND_NAMES = {"num_correct_drafts": "num_accepted_drafts", "num_accept_tokens": "num_accepted_tokens"}
TABLE = (
    ((0, 5, 23), {"eagle_draft": (True, _EAGLE_DRAFT), "eagle_draft_extend": (True, _EAGLE_DRAFT_EXTEND),
                  "dflash_verify": (True, _GENERIC_VERIFY)}),
    ((0, 5, 14), {
        "eagle_draft": (True, _release(_EAGLE_DRAFT, drop=("mrope_positions", "dsa_seed_topk", "sampling_seed",
                                                           "top_ks"))),
        "eagle_draft_extend": (True, _release(_EAGLE_DRAFT_EXTEND, drop=("mrope_positions", "select_index",
                                                                         "mamba_track_indices"))),
        "dflash_verify": (True, _GENERIC_VERIFY)}),
    ((0, 5, 11), {
        "eagle_draft": (False, _release(_EAGLE_DRAFT, buffer_dtypes=_OLD_SEQ_LENS, only=(
            "seq_lens", "out_cache_loc", "positions", "topk_p", "topk_index", HIDDEN, "req_pool_indices"))),
        "eagle_draft_extend": (False, _release(_EAGLE_DRAFT_EXTEND, rename=_OLD_EXTEND_NAMES,
                                               buffer_dtypes=_OLD_SEQ_LENS, only=(
            "input_ids", "seq_lens", "extend_seq_lens", "out_cache_loc", "positions", HIDDEN,
            "num_correct_drafts", "num_accept_tokens", "req_pool_indices"))),
        "dflash_verify": (True, _release(_GENERIC_VERIFY, buffer_dtypes=_OLD_SEQ_LENS,
                                         drop=("rids_int", "bootstrap_room_ids_int")))}),
)
NEWEST = TABLE[0][0]
# The 0.5.11 EAGLE runners copy in this order (their replay methods, top to bottom).
_ORDER_0_5_11 = {
    "eagle_draft": ("seq_lens", "out_cache_loc", "positions", "topk_p", "topk_index", HIDDEN, "req_pool_indices"),
    "eagle_draft_extend": ("input_ids", "seq_lens", "extend_seq_lens", "out_cache_loc", "positions", HIDDEN,
                           "num_accepted_drafts", "num_accepted_tokens", "req_pool_indices"),
}
# Names a call-site list can hold that are local variables, not fields (a registry's loop over its slots).
_NOT_FIELDS = ("dst", "src", "buf", "dsts", "srcs")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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


def table_release(version=None):
    """The release of the table that stands for `version`: the newest read at or below it; the newest read
    when the version is unknown; the oldest read for anything older."""
    found = release_tuple(version)
    if found is None:
        return NEWEST
    for release, _ in TABLE:
        if release <= found:
            return release
    return TABLE[-1][0]


def _paths(version):
    wanted = table_release(version)
    return [paths for release, paths in TABLE if release == wanted][0]


def batched(path, version=None):
    """Whether the release copies this path's small fields through one grouped call."""
    return _paths(version)[path][0]


def rows(path, version=None):
    """[{name, dtype, src_dtype, rule, own_copy, when}] for every field the release may copy on `path`,
    in replay order; `when` is None for fields of every replay. dtype None means the model's dtype."""
    if path not in PATHS:
        raise ValueError("unknown replay path %r (known: %s)" % (path, ", ".join(PATHS)))
    found = [{"name": name, "dtype": dtype, "src_dtype": src, "rule": rule, "own_copy": own, "when": when}
             for name, dtype, src, rule, own, when in _paths(version)[path][1]]
    order = _ORDER_0_5_11.get(path) if table_release(version) == (0, 5, 11) else None
    if order:
        found.sort(key=lambda r: order.index(r["name"]) if r["name"] in order else len(order))
    return found


def own_copy_names():
    """Every field some release copies with its own copy_() rather than in the grouped call."""
    return tuple(sorted({row[0] for _, paths in TABLE for _, table in paths.values() for row in table if row[4]}))


def copies_hidden(path):
    return any(r["name"] == HIDDEN for r in rows(path))


def field_name(expression):
    """`buffers.seq_lens[:raw_bs]` or `forward_batch.spec_info.topk_p` → the field name (`seq_lens`)."""
    head = str(expression).split("[", 1)[0].strip()
    names = _IDENT.findall(head.rsplit(".", 1)[-1])
    return names[0] if names else None


def replay_names(path, version=None, names=None):
    """The fields one default replay copies: the release's own names read from its source when given
    (fields the table knows only under a condition dropped, local variables dropped, new names kept),
    else the table's unconditional fields. A source list that names no field the table knows is not
    used: it is a call site the reader could not see through (a registry filling its slots in a loop)."""
    table = {r["name"]: r for r in rows(path, version)}
    default = [r["name"] for r in table.values() if r["when"] is None]
    cleaned = []
    for name in names or ():
        name = field_name(name) if name else None
        if not name or name.endswith("_cpu") or name in _NOT_FIELDS or name in cleaned:
            continue
        if name in table and table[name]["when"] is not None:
            continue
        cleaned.append(name)
    if not any(name in table for name in cleaned):
        return default
    if HIDDEN in default and HIDDEN not in cleaned:
        cleaned.append(HIDDEN)   # the EAGLE replays always carry it, on their own copy_()
    return cleaned


def tokens_per_request(path, draft_tokens, topk):
    """Rows per request of the replay: topk for the EAGLE draft, the draft tokens otherwise."""
    return max(1, int(topk)) if path == "eagle_draft" else int(draft_tokens)


def eagle_steps(draft_tokens, topk):
    """sglang's relation for EAGLE: num_draft_tokens = steps * topk + 1 (chain when topk == 1)."""
    return max(1, (int(draft_tokens) - 1) // max(1, int(topk)))


_DTYPE_SIZES = {"bool": 1, "uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "float16": 2,
                "bfloat16": 2, "float32": 4, "float64": 8}


def dtype_size(name):
    return _DTYPE_SIZES.get(name, 8)


def _dims(rule, sizes):
    dims = []
    for term in rule:
        value = 1
        for factor in term.split("*"):
            value *= int(factor) if factor.isdigit() else int(sizes[factor])
        dims.append(value)
    return tuple(dims)


def field_specs(path, batch_size, hidden_size, topk, steps, draft_tokens, hidden_dtype="bfloat16",
                names=None, release=None, vocab=32000):
    """The tensors one replay of `path` copies: [{name, dtype, src_dtype, shape, numel, bytes, own_copy,
    assumed}]. `dtype` is the static buffer's, `src_dtype` the batch tensor's (they differ where the release
    casts). A name the table does not know is kept as a per-request int64 tensor marked `assumed`.
    `own_copy` marks the fields the release copies with their own copy_(): hidden_states always."""
    table = {r["name"]: r for r in rows(path, release)}
    tokens = int(batch_size) * tokens_per_request(path, draft_tokens, topk)
    sizes = {"bs": int(batch_size), "tok": tokens, "topk": max(1, int(topk)), "steps": max(1, int(steps or 1)),
             "hidden": int(hidden_size or 0), "vocab": int(vocab)}
    specs = []
    for name in replay_names(path, release, names):
        if name == HIDDEN and not hidden_size:
            continue
        row = table.get(name) or {"dtype": "int64", "src_dtype": "int64", "rule": ("bs",), "own_copy": False}
        dtype = row["dtype"] or hidden_dtype
        src_dtype = row["src_dtype"] or hidden_dtype
        shape = _dims(row["rule"], sizes)
        numel = 1
        for dim in shape:
            numel *= dim
        specs.append({"name": name, "dtype": dtype, "src_dtype": src_dtype, "shape": list(shape),
                      "numel": numel, "bytes": numel * dtype_size(dtype), "own_copy": bool(row["own_copy"]),
                      "assumed": name not in table})
    return specs


def dtype_pairs(release=None):
    """{field: (buffer dtype, batch dtype)} for the default fields the release casts on every replay."""
    pairs = {}
    for path in PATHS:
        for row in rows(path, release):
            if row["when"] is None and row["dtype"] != row["src_dtype"]:
                pairs[row["name"]] = (row["dtype"], row["src_dtype"])
    return pairs
