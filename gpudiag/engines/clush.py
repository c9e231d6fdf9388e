"""ClusterShell's output forms. `clush` prefixes every line with `host: ` like pdsh (frames.py reads that);
`clush -b` gathers each node set's output under a header instead:

    ---------------
    gpu-[01-02] (2)
    ---------------
    <the lines those hosts printed, identical for all of them>

`ungather` turns that back into the prefixed form, every content line once per host of the header's node
set; stderr lines (clush prints them prefixed even with -b) and clush's own `clush: ...` lines stay as
they are. Node sets are expanded as ClusterShell prints them (comma lists of pdsh-style ranges, a
` (N)` count); a form gpudiag cannot expand (`@group` names from -r) is refused with one line. The
header format is ClusterShell's own (CLI/Display.py: a 15-dash SEP, the node set, ` (N)` when N > 1).
"""

from __future__ import annotations

import re

from gpudiag.inventory.patterns import PatternError, expand_range

SEP = "-" * 15
_COUNT = re.compile(r" \((?P<count>\d+)\)$")
_NODESET = re.compile(r"^[A-Za-z0-9_.\-\[\],]+$")
_BRACKET = re.compile(r"\[([^\]]*)\]")
_SPAN = re.compile(r"^(\d{1,18})\s*[-:]\s*(\d{1,18})")
_LONG_NUMBER = re.compile(r"\d{19}")
MAX_HOSTS = 100_000  # one header standing for more hosts than this is not clush's


class GatheredFormError(ValueError):
    """clush -b output gpudiag cannot take apart; the message says why in one line."""


def is_gathered(lines: list[str]) -> bool:
    """True when the text holds at least one `clush -b` header."""
    return any(header_at(lines, i) for i in range(len(lines) - 2) if lines[i] == SEP)


def header_at(lines: list[str], i: int) -> bool:
    return (
        i + 2 < len(lines)
        and lines[i] == SEP
        and lines[i + 2] == SEP
        and bool(_NODESET.match(_COUNT.sub("", lines[i + 1]) or "-"))
    )


def expand_nodeset(text: str) -> list[str]:
    """`gpu-[01-02],cpu1 (3)` → ["gpu-01", "gpu-02", "cpu1"]; the count, when given, must match."""
    match = _COUNT.search(text)
    body = _COUNT.sub("", text)
    if body.startswith("@") or ",@" in body:
        raise GatheredFormError(f"clush output names the group {body!r} (clush -r); run clush without -r")
    hosts: list[str] = []
    for part in top_level_parts(body):
        if estimated_size(part) > MAX_HOSTS:  # before expanding: a hostile range must not fill memory
            raise GatheredFormError(f"clush node set {body[:80]!r} stands for more than {MAX_HOSTS} hosts")
        try:
            hosts.extend(expand_range(part))
        except PatternError as exc:
            raise GatheredFormError(f"clush node set {body!r}: {exc}") from None
        if len(hosts) > MAX_HOSTS:
            raise GatheredFormError(f"clush node set {body[:80]!r} stands for more than {MAX_HOSTS} hosts")
    if match and int(match.group("count")) != len(hosts):
        raise GatheredFormError(f"clush node set {text!r} expands to {len(hosts)} hosts, not {match.group('count')}")
    return hosts


def estimated_size(part: str) -> int:
    """How many names one comma-free part stands for, counted from its brackets without expanding them."""
    if _LONG_NUMBER.search(part):
        return MAX_HOSTS + 1  # no real node set numbers its hosts past 18 digits
    size = 1
    for body in _BRACKET.findall(part):
        count = 0
        for item in body.split(","):
            bounds = _SPAN.match(item.strip())
            count += abs(int(bounds.group(2)) - int(bounds.group(1))) + 1 if bounds else 1
        size *= max(count, 1)
    return size


def top_level_parts(text: str) -> list[str]:
    """Split at commas outside brackets: `a[1,3],b` → ["a[1,3]", "b"]."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p]


def ungather(lines: list[str]) -> list[str]:
    """The gathered form as prefixed lines. A host named by two headers is refused: clush prints each
    node once, so the second header is a host's own output posing as clush's."""
    out: list[str] = []
    hosts: list[str] | None = None
    seen: set[str] = set()
    budget = 64 * sum(len(line) + 1 for line in lines) + (1 << 20)
    i = 0
    while i < len(lines):
        if header_at(lines, i):
            hosts = expand_nodeset(lines[i + 1])
            twice = seen.intersection(hosts)
            if twice:
                raise GatheredFormError(
                    f"clush -b output shows {sorted(twice)[0]} under two headers; a host's output may be posing "
                    "as clush's: run clush without -b"
                )
            seen.update(hosts)
            i += 3
            continue
        line = lines[i]
        if hosts is None or line.startswith("clush: "):
            out.append(line)
        else:
            out.extend(f"{host}: {line}" for host in hosts)
            budget -= len(hosts) * (len(line) + 8)
            if budget < 0:  # one block repeated for a huge node set: refuse rather than fill memory
                raise GatheredFormError("clush -b output expands to more than 64 times its size; run clush without -b")
        i += 1
    return out
