"""The static input buffers of each speculative replay path, as sglang's graph runners hold them.

Pure data (no torch): field name, dtype name and shape from batch size, topk, steps, draft tokens and
hidden size. `optional` fields are None on some paths of a release; `large` fields are copied with a
plain copy_() (DMA engine) instead of the grouped foreach copy, as sglang does for hidden_states.
"""

PATHS = ("eagle_draft", "eagle_draft_extend", "dflash_verify")
ALGORITHM_PATHS = {"EAGLE": ("eagle_draft", "eagle_draft_extend"),
                   "EAGLE3": ("eagle_draft", "eagle_draft_extend"),
                   "DFLASH": ("dflash_verify",)}


def eagle_steps(draft_tokens, topk):
    """sglang's relation for EAGLE: num_draft_tokens = steps * topk + 1 (chain when topk == 1)."""
    return max(1, (int(draft_tokens) - 1) // max(1, int(topk)))


def tokens_per_request(path, draft_tokens, topk):
    if path == "eagle_draft":
        return max(1, int(topk))
    return int(draft_tokens)


def buffer_specs(path, batch_size, draft_tokens, topk=1, hidden_size=1024, steps=None, with_optional=True):
    """[{name, dtype, shape, optional, large}] for one replay path and one cell."""
    if path not in PATHS:
        raise ValueError("unknown replay path %r (known: %s)" % (path, ", ".join(PATHS)))
    bs = int(batch_size)
    topk = max(1, int(topk))
    steps = int(steps) if steps else eagle_steps(draft_tokens, topk)
    per_request = tokens_per_request(path, draft_tokens, topk)
    tokens = bs * per_request
    specs = [
        _spec("input_ids", "int64", (tokens,)),
        _spec("req_pool_indices", "int32", (bs,)),
        _spec("seq_lens", "int32", (bs,)),
        _spec("positions", "int64", (tokens,)),
    ]
    if path == "eagle_draft":
        specs += [_spec("out_cache_loc", "int64", (tokens * steps,)),
                  _spec("topk_p", "float32", (bs, topk)),
                  _spec("topk_index", "int64", (bs, topk)),
                  _spec("hidden_states", "bfloat16", (bs, hidden_size), large=True)]
    elif path == "eagle_draft_extend":
        specs += [_spec("out_cache_loc", "int64", (tokens,)),
                  _spec("extend_seq_lens", "int32", (bs,)),
                  _spec("accept_length", "int32", (bs,)),
                  _spec("hidden_states", "bfloat16", (tokens, hidden_size), large=True)]
    else:  # dflash_verify: the draft block runs in TARGET_VERIFY mode
        specs += [_spec("out_cache_loc", "int64", (tokens,)),
                  _spec("target_hidden", "bfloat16", (tokens, hidden_size), large=True)]
        if with_optional:
            specs.append(_spec("custom_mask", "bool", (bs * per_request * per_request,), optional=True))
    return specs


def _spec(name, dtype, shape, optional=False, large=False):
    return {"name": name, "dtype": dtype, "shape": list(shape), "optional": optional, "large": large}


def buffer_bytes(specs):
    sizes = {"int64": 8, "int32": 4, "float32": 4, "bfloat16": 2, "float16": 2, "bool": 1}
    total = 0
    for spec in specs:
        count = 1
        for dim in spec["shape"]:
            count *= dim
        total += count * sizes[spec["dtype"]]
    return total
