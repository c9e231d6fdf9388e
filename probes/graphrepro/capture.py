"""Which target layers sglang captures hidden states from, the layer ids a reduced draft gets, and the check
that refuses a launch whose draft could not receive its hidden states.

Read from the installed releases (sglang/srt/models/llama.py in 0.5.11, 0.5.14 and 0.5.23):
`set_eagle3_layers_to_capture(ids)` and `set_dflash_layers_to_capture(ids)` set `layers_to_capture = [id + 1
...]`, and LlamaModel.forward captures before layer `i` for `i in range(start_layer, end_layer)`: an id's
capture point is reached only when `id + 1 < num_hidden_layers` (the last layer's id never is). With no ids,
EAGLE3 captures the points `[2, L // 2, L - 3]`. EAGLE3's draft-extend buffer is sized for 3 aux states
(0.5.11 hard-codes `* 3`; later releases take `num_aux_hidden_states`, else the id count, else 3): fewer
captured states and sglang skips the `hidden_states` copy silently. DFLASH's fc takes
`len(target_layer_ids) * hidden`: fewer captured states raise "DFLASH target_hidden feature dim mismatch".
"""

EAGLE3_AUX_STATES = 3   # the buffer width every release defaults to, in hidden sizes
DERIVED_DFLASH_IDS = 2   # a derived DFLASH draft's context features (real drafts have about five)
WHY = "sglang captures the state before layer id+1, so the last layer's id is never captured"


def capturable_ids(layers):
    """Layer ids whose capture point a target of `layers` decoder layers reaches."""
    return list(range(0, max(0, int(layers) - 1)))


def captured_points(ids, layers, algorithm):
    """The distinct capture points sglang reaches for these ids (None: the release's EAGLE3 default)."""
    layers = int(layers)
    points = [2, layers // 2, layers - 3] if ids is None and algorithm == "EAGLE3" else \
        [int(i) + 1 for i in ids or []]
    return sorted(set(p for p in points if 0 <= p < layers))


def spread_ids(count, layers):
    """`count` distinct capturable ids spread over the target (sglang's own build_target_layer_ids spreads
    over [1, L-3] and so needs 4 layers; a cut target has fewer)."""
    usable = capturable_ids(layers)
    count = max(1, min(int(count), len(usable)))
    if count == 1:
        return [usable[len(usable) // 2]] if usable else []
    span = len(usable) - 1
    return [usable[int(round(i * span / float(count - 1)))] for i in range(count)]


def fitted_ids(ids, layers):
    """A real draft's ids kept where sglang captures them all; else as many ids, spread over the cut target."""
    ids = [int(i) for i in ids or []]
    usable = set(capturable_ids(layers))
    if ids and len(set(ids)) == len(ids) and all(i in usable for i in ids):
        return ids
    return spread_ids(len(ids) or 1, layers)


def eagle3_ids(draft):
    cfg = draft.get("eagle_config") if isinstance(draft.get("eagle_config"), dict) else {}
    ids = cfg.get("eagle_aux_hidden_state_layer_ids")
    return list(ids) if isinstance(ids, list) else None


def dflash_ids(draft):
    cfg = draft.get("dflash_config") if isinstance(draft.get("dflash_config"), dict) else {}
    ids = cfg.get("target_layer_ids", draft.get("target_layer_ids"))
    return list(ids) if isinstance(ids, list) else None


def id_count(draft, algorithm):
    """How many hidden states the draft expects from the target."""
    if algorithm == "EAGLE3":
        ids = eagle3_ids(draft) if draft else None
        return int((draft or {}).get("num_aux_hidden_states") or (len(ids) if ids else EAGLE3_AUX_STATES))
    if algorithm == "DFLASH":
        ids = dflash_ids(draft) if draft else None
        return len(ids) if ids else DERIVED_DFLASH_IDS
    return 0


def layers_needed(algorithm, draft=None):
    """The fewest target layers whose capture points can feed the draft: one more than the states it takes
    (a derived DFLASH draft takes as many as the cut offers, one at least)."""
    count = 1 if algorithm == "DFLASH" and not draft else id_count(draft, algorithm)
    return count + 1 if count else 1


def uses_aux(draft):
    cfg = draft.get("eagle_config") if isinstance(draft.get("eagle_config"), dict) else {}
    return cfg.get("use_aux_hidden_state", True) is not False


def refusal(target_layers, draft, algorithm):
    """None when the draft receives every hidden state it expects; else why the launch is refused."""
    if algorithm == "EAGLE3" and uses_aux(draft):
        ids = eagle3_ids(draft)
        points = captured_points(ids, target_layers, algorithm)
        expected = id_count(draft, algorithm)
        if len(points) != expected:
            shown = "sglang's default %s" % [2, target_layers // 2, target_layers - 3] if ids is None else ids
            return ("EAGLE3 draft would get %d of its %d aux hidden states from a %d-layer target (aux layer "
                    "ids %s; %s): sglang would skip the hidden_states copy" % (
                        len(points), expected, target_layers, shown, WHY))
    if algorithm == "DFLASH":
        ids = dflash_ids(draft)
        if not ids:
            return "DFLASH draft has no dflash_config.target_layer_ids (sglang needs explicit ids to capture)"
        points = captured_points(ids, target_layers, algorithm)
        if len(points) != len(ids):
            return ("DFLASH draft would get %d of its %d target hidden states from a %d-layer target "
                    "(target_layer_ids %s; %s): sglang would raise 'DFLASH target_hidden feature dim mismatch'"
                    % (len(points), len(ids), target_layers, ids, WHY))
    return None
