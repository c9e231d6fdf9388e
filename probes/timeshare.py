"""The host's time handed out as the probes run: one deadline for the whole runner, and each probe's limit
decided when it starts, from what is left then.

A long probe (one that declares `timeout_s`, probes/catalog.py) gets min(its declared limit, its share of the
time left), the share taken among the long probes still to run in proportion to their declared limits, after
keeping a little back for the short probes still to come; what a probe leaves unused is simply still there for
the next one. Never less than its smallest declared unit (one synthetic cell, one workload) when that much is
left, so a probe that can measure one unit is given the time for it. Standard library only.
"""

SHORT_PROBE_S = 5.0   # kept back per short probe still to run after a long one (the light probes take 1-5 s)
LAST_CALL_S = 0.5     # a probe is not started with less than this left


def limit_now(name, left, pending, limits, units, fallback):
    """Seconds probe `name` may take, starting now with `left` seconds of the host's deadline (None: no deadline).

    `pending`: the probes still to run after this one, in order; `limits`: {probe: declared limit} of the long
    probes; `units`: {probe: seconds of its smallest unit}; `fallback`: the limit of a probe that declares none.
    """
    own = limits.get(name, fallback)
    if left is None:
        return own
    if name not in limits:
        return min(own, left)
    later_short = sum(1 for p in pending if p not in limits)
    room = max(left - SHORT_PROBE_S * later_short, 0.5 * left)   # the short ones never take most of it
    sharing = limits[name] + sum(limits[p] for p in pending if p in limits)
    share = room * limits[name] / sharing if sharing > 0 else room
    floor = min(units.get(name, 0.0), left)
    return min(own, max(share, floor), left)


def smallest_units(declared):
    """{probe: seconds of its cheapest declared unit} from the declarations' `unit_s` maps."""
    out = {}
    for name, decl in declared.items():
        costs = [v for v in (decl.get("unit_s") or {}).values() if isinstance(v, (int, float)) and v > 0]
        if costs:
            out[name] = float(min(costs))
    return out
