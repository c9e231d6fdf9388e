"""The static input buffers of each speculative replay path for the synthetic graph harness.

Pure data (no torch), taken from the one field table (probes/replay_fields.py) for the release given, the
newest read by default: field name, dtype, shape from batch size, topk, steps, draft tokens and hidden size.
`large` marks the fields the release copies with their own copy_() (hidden_states, by name).
"""
from probes import replay_fields
from probes.replay_fields import PATHS, eagle_steps, tokens_per_request  # noqa: F401

ALGORITHM_PATHS = {"EAGLE": ("eagle_draft", "eagle_draft_extend"),
                   "EAGLE3": ("eagle_draft", "eagle_draft_extend"),
                   "DFLASH": ("dflash_verify",)}


def buffer_specs(path, batch_size, draft_tokens, topk=1, hidden_size=1024, steps=None, release=None,
                 names=None):
    """[{name, dtype, src_dtype, shape, large}] for one replay path and one cell."""
    if path not in PATHS:
        raise ValueError("unknown replay path %r (known: %s)" % (path, ", ".join(PATHS)))
    topk = max(1, int(topk))
    steps = int(steps) if steps else eagle_steps(draft_tokens, topk)
    fields = replay_fields.field_specs(path, batch_size, hidden_size, topk, steps, draft_tokens,
                                       names=names, release=release)
    return [{"name": f["name"], "dtype": f["dtype"], "src_dtype": f["src_dtype"], "shape": f["shape"],
             "large": f["own_copy"]} for f in fields]


def copies_grouped(path, release=None):
    """Whether the release copies the path's small fields through one grouped call (else each on copy_())."""
    return replay_fields.batched(path, release)


def table_release_name(release=None):
    """'0.5.23': the release whose fields the harness copies for `release` (the newest read by default)."""
    return ".".join(str(part) for part in replay_fields.table_release(release))


def buffer_bytes(specs):
    total = 0
    for spec in specs:
        count = 1
        for dim in spec["shape"]:
            count *= dim
        total += count * replay_fields.dtype_size(spec["dtype"])
    return total
