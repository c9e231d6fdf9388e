"""clean_data's "already clean" walk (a plain loop) against a plain statement of the rule, over documents that
are each one mutation away from clean: a hostile string, key, number or nesting anywhere must be seen."""

import random

from gpudiag.render import safe_text
from gpudiag.render.safe_text import MAX_DEPTH, MAX_ITEMS, clean_data

HOSTILE = ["a\x1b[31m", "\u202e", "x\ny", "\t", "\x7f", "\u200b", "é", "z" * 513, "k" * 129, "\ud800"]
NUMBERS = [float("nan"), float("inf"), -float("inf"), 10**18, -(10**18), 10**18 - 1, 1.5, True, None]


def _rule(value, depth):
    """The rule as the docstring of _items_kept states it, item by item."""
    if type(value) is str:
        return len(value) <= 512 and value.isprintable()
    if type(value) is float:
        return value == value and abs(value) != float("inf")
    if type(value) is int:
        return abs(value) < 10**18
    if type(value) is dict:
        return (
            depth < MAX_DEPTH
            and len(value) <= MAX_ITEMS
            and all(
                type(k) is str and len(k) <= 128 and k.isprintable() and _rule(v, depth + 1) for k, v in value.items()
            )
        )
    if type(value) is list:
        return depth < MAX_DEPTH and len(value) <= MAX_ITEMS and all(_rule(v, depth + 1) for v in value)
    return type(value) is bool or value is None


def _document(rng, depth=0):
    if depth > 4 or rng.random() < 0.3:
        return rng.choice(["ok", "cuda:0", 3, 2.5, False, None, "-" * 512, "k" * 128])
    if rng.random() < 0.5:
        return [_document(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {f"key{i}": _document(rng, depth + 1) for i in range(rng.randrange(4))}


def _mutated(rng, value):
    """`value` with one container's item (or key) replaced by something hostile, or nested past MAX_DEPTH."""
    containers = []

    def collect(node):
        if isinstance(node, (dict, list)):
            containers.append(node)
            for child in node.values() if isinstance(node, dict) else node:
                collect(child)

    collect(value)
    target = rng.choice(containers)
    bad = rng.choice([rng.choice(HOSTILE), rng.choice(NUMBERS), _deep(MAX_DEPTH), [0] * (MAX_ITEMS + 1)])
    if isinstance(target, dict) and target and rng.random() < 0.3:
        target[rng.choice(HOSTILE)] = 1
    elif isinstance(target, dict):
        target[f"key{rng.randrange(9)}"] = bad
    else:
        target.append(bad)
    return value


def _deep(levels):
    node: object = "leaf"
    for _ in range(levels):
        node = {"n": node}
    return node


def test_the_walk_keeps_exactly_what_the_rule_keeps():
    rng = random.Random(5)
    seen = {True: 0, False: 0}
    for _ in range(3000):
        doc = {"data": _document(rng)}
        if rng.random() < 0.8:
            doc = _mutated(rng, doc)
        expected = _rule(doc, 0)
        assert safe_text._dict_kept(doc, 0, 512) is expected, doc
        assert (clean_data(doc) is doc) is expected
        seen[expected] += 1
    assert seen[True] > 100 and seen[False] > 100
