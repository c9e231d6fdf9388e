"""The small forward the synthetic harness captures, shaped like one speculative replay path: its inputs
(valid ids, cache locations and lengths in each static buffer's dtype), its weights, the forward itself
(embedding, KV gather by out_cache_loc, masked block attention, logits, top-k) and what a cell allocates.

torch is passed in by the caller (the harness imports it in its child); nothing here imports it.
"""
import math

from probes.graphrepro import specs as specs_mod

POOL_TOKENS = 16384     # rows of the fake KV cache gathered by out_cache_loc
VOCAB = 4096
MIB = 1 << 20


_SMALL_COUNTS = ("seq_lens", "extend_seq_lens", "positions", "num_correct_drafts",
                 "num_accept_tokens", "num_accepted_drafts", "num_accepted_tokens", "select_index")


def make_buffers(torch, spec_list, device, generator, pool_tokens=POOL_TOKENS, vocab=VOCAB, dtype_key="dtype"):
    """One set of valid inputs for the specs (random ids, locations inside the pool, lengths >= 1), in
    the static buffers' dtypes, or with dtype_key="src_dtype" in the batch's (the replay copy casts)."""
    out = {}
    for spec in spec_list:
        shape, name = tuple(spec["shape"]), spec["name"]
        dtype = getattr(torch, spec.get(dtype_key) or spec["dtype"])
        if name in ("input_ids", "topk_index"):
            value = torch.randint(0, vocab, shape, generator=generator)
        elif name == "out_cache_loc":
            value = torch.randint(0, pool_tokens, shape, generator=generator)
        elif name == "req_pool_indices":
            value = torch.randint(0, 256, shape, generator=generator)
        elif name in _SMALL_COUNTS:
            value = torch.randint(1, 64, shape, generator=generator)
        elif spec["dtype"] == "bool":
            value = torch.rand(shape, generator=generator) > 0.3
        else:
            value = torch.randn(shape, generator=generator)
        out[name] = value.to(dtype=dtype).to(device)
    return out


def make_weights(torch, hidden, device, seed=0):
    generator = torch.Generator().manual_seed(seed)
    scale = 1.0 / math.sqrt(hidden)

    def param(*shape):
        return (torch.randn(shape, generator=generator) * scale).to(device=device, dtype=torch.bfloat16)

    return {"embed": param(VOCAB, hidden), "pos": param(128, hidden), "kv": param(POOL_TOKENS, hidden),
            "wq": param(hidden, hidden), "wk": param(hidden, hidden), "wv": param(hidden, hidden),
            "out": param(hidden, VOCAB)}


def forward(torch, bufs, weights, path, batch_size, per_request, topk, steps):
    """Embedding + position, KV gather by out_cache_loc, masked block attention, logits, top-k.

    The EAGLE draft runs `steps` draft steps, each feeding its top-1 back (unrolled in the graph).
    """
    bs, hidden = batch_size, weights["wq"].shape[0]
    tokens = bs * per_request
    # The EAGLE draft copies no input_ids: its first step reads the previous top-k tokens.
    ids = bufs["input_ids"] if "input_ids" in bufs else bufs["topk_index"].reshape(-1)
    logits = values = index = None
    for step in range(steps if path == "eagle_draft" else 1):
        x = weights["embed"][ids] + weights["pos"][bufs["positions"] % 128]
        if "hidden_states" in bufs:
            h = bufs["hidden_states"]
            x = x + (_repeat_rows(h, per_request) if h.shape[0] == bs and per_request > 1 else h)
        kv = weights["kv"][bufs["out_cache_loc"][step * tokens:(step + 1) * tokens]]
        q = (x @ weights["wq"]).view(bs, per_request, hidden)
        k = (kv @ weights["wk"]).view(bs, per_request, hidden)
        v = (kv @ weights["wv"]).view(bs, per_request, hidden)
        scores = (q @ k.transpose(1, 2)).float() / math.sqrt(hidden)
        scores = scores.masked_fill(~_block_mask(torch, bufs, path, bs, per_request, ids.device), float("-inf"))
        attn = torch.softmax(scores, dim=-1).to(v.dtype) @ v
        logits = (attn.reshape(tokens, hidden) @ weights["out"]).float()
        if "topk_p" in bufs:
            logits = logits + _repeat_rows(bufs["topk_p"].float().mean(dim=1, keepdim=True), per_request)
        values, index = logits.topk(max(1, topk), dim=-1)
        ids = index[:, 0]
    return {"logits": logits, "topk_values": values, "topk_index": index}


def _repeat_rows(t, times):
    """Each row `times` times in a row, by expand (no host sync, safe inside a capture)."""
    return t.unsqueeze(1).expand(t.shape[0], times, *t.shape[1:]).reshape(t.shape[0] * times, *t.shape[1:])


def _block_mask(torch, bufs, path, bs, per_request, device):
    """Causal inside the block for EAGLE; the whole block for DFlash."""
    if path == "dflash_verify":
        mask = torch.ones(bs, per_request, per_request, dtype=torch.bool, device=device)
    else:
        mask = torch.ones(per_request, per_request, dtype=torch.bool, device=device).tril()
        mask = mask.unsqueeze(0).expand(bs, per_request, per_request)
    # Keys past the request's length are masked; the diagonal always stays so no row is empty.
    valid = torch.arange(per_request, device=device)[None, :] < bufs["seq_lens"].long().clamp(min=1)[:, None]
    diagonal = torch.eye(per_request, dtype=torch.bool, device=device).unsqueeze(0)
    return (mask & valid[:, None, :]) | diagonal


def estimate_bytes(spec_list, hidden, batch_size, per_request, vocab=VOCAB, pool_tokens=POOL_TOKENS):
    """Upper estimate of what one cell allocates: weights, three input sets (static and two fresh), and
    the activations of the captured forward and of the eager one, with a quarter on top."""
    weights = 2 * (2 * vocab * hidden + 128 * hidden + pool_tokens * hidden + 3 * hidden * hidden)
    tokens = batch_size * per_request
    activations = (8 * tokens * hidden * 2 + batch_size * per_request * per_request * 11
                   + 2 * tokens * vocab * 4)
    return int(1.25 * (weights + 3 * specs_mod.buffer_bytes(spec_list) + 2 * activations))
