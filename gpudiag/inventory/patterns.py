"""Host ranges and Ansible host patterns, read as pdsh and Ansible read them.

Ranges: pdsh/Slurm `gpu-[01-03,07]` and Ansible `gpu-[01:08]`, `[a:f]`, `[1:9:2]`; several brackets
multiply, zero padding follows the first bound. A bracket that is neither is an error, never a host.
Patterns: terms joined by `,` or by `:` (outside brackets; with a `,` only `,` separates, as in Ansible,
and a term that still holds a `:` is refused); `!term` removes, `&term` intersects, the plain
terms are a union (Ansible evaluates them in that order, and starts from `all` when only `!`/`&` terms
are given); a term is a group, a host, a range, a shell wildcard, `~regex`, or any of these but a
range with a subscript (`gpus[0]`, `gpus[-1]`, `gpus[1:2]`, `gpus[1:]`) selecting from its hosts in
Ansible's order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpudiag.inventory.base import MAX_RANGE, InventoryError, YamlFile

_ANSIBLE_RANGE = re.compile(r"^(?P<start>[0-9]+|[a-zA-Z]):(?P<end>[0-9]+|[a-zA-Z])(?::(?P<step>[0-9]+))?$")
_PDSH_ITEM = re.compile(r"^(?P<lo>[0-9]+)(?:-(?P<hi>[0-9]+))?$")


class PatternError(InventoryError):
    """A range or pattern that cannot be expanded; a usage error."""


def has_range(text: str) -> bool:
    return "[" in text or "]" in text


def expand_range(text: str) -> list[str]:
    """Every name a ranged name stands for, in order; a name without brackets is itself."""
    names = _expand(text, text)
    if len(names) > MAX_RANGE:
        raise PatternError(f"host range {text!r} has {len(names)} hosts; at most {MAX_RANGE}")
    return names


def _expand(text: str, whole: str) -> list[str]:
    start = text.find("[")
    close = text.find("]")
    if start < 0:
        if close >= 0:
            raise PatternError(f"host range {whole!r}: ']' without '['")
        return [text]
    end = text.find("]", start)
    if end < 0 or "[" in text[start + 1 : end]:
        raise PatternError(f"host range {whole!r}: '[' without its ']'")
    if 0 <= close < start:
        raise PatternError(f"host range {whole!r}: ']' without '['")
    head, body, tail = text[:start], text[start + 1 : end], text[end + 1 :]
    items = _bracket(body, whole)
    rest = _expand(tail, whole)
    if len(items) * len(rest) > MAX_RANGE:
        raise PatternError(f"host range {whole!r} has too many hosts (at most {MAX_RANGE})")
    return [f"{head}{item}{after}" for item in items for after in rest]


def _bracket(body: str, whole: str) -> list[str]:
    ansible = _ANSIBLE_RANGE.match(body)
    if ansible:
        return _ansible_items(ansible, whole)
    items: list[str] = []
    for part in body.split(","):
        match = _PDSH_ITEM.match(part.strip())
        if not match:
            raise PatternError(f"host range {whole!r}: cannot expand [{body}] (expected [01-03,07] or [01:08])")
        lo, hi = match.group("lo"), match.group("hi") or match.group("lo")
        if int(hi) < int(lo):
            raise PatternError(f"host range {whole!r}: {lo}-{hi} runs backwards")
        width = len(lo) if lo.startswith("0") and len(lo) > 1 else 0
        items += [str(n).zfill(width) for n in range(int(lo), int(hi) + 1)]
        if len(items) > MAX_RANGE:
            raise PatternError(f"host range {whole!r} has too many hosts (at most {MAX_RANGE})")
    return items


def _ansible_items(match: re.Match[str], whole: str) -> list[str]:
    start, end, step = match.group("start"), match.group("end"), int(match.group("step") or 1)
    if start.isdigit() != end.isdigit() or step < 1:
        raise PatternError(f"host range {whole!r}: expected [START:END] or [START:END:STEP]")
    if start.isdigit():
        width = len(start) if start.startswith("0") and len(start) > 1 else 0
        if int(end) - int(start) > MAX_RANGE * step:
            raise PatternError(f"host range {whole!r} has too many hosts (at most {MAX_RANGE})")
        items = [str(n).zfill(width) for n in range(int(start), int(end) + 1, step)]
    else:
        items = [chr(c) for c in range(ord(start), ord(end) + 1, step)]
    if not items:
        raise PatternError(f"host range {whole!r} is empty (start after end)")
    return items


@dataclass(frozen=True)
class Term:
    text: str
    op: str  # "" union, "!" exclude, "&" intersect


def split_pattern(pattern: str) -> list[Term]:
    """`a:b:!c:&d` or `a,b,!c,&d` → terms; separators inside brackets belong to the range. As Ansible's
    split_host_pattern: a pattern holding `,` is split at `,` only, so a `:` left in a term is no separator
    there; such a term (`gpus,web:!gpus[0]`) is refused, unless it is a `[user@]host:port` or IPv6 address."""
    pieces = _outside_brackets(pattern, ",")
    if len(pieces) > 1:
        for piece in pieces:
            _refuse_mixed(piece.strip(), pattern)
    else:
        pieces = _outside_brackets(pattern, ":")
    terms = [_term(piece.strip(), pattern) for piece in pieces if piece.strip()]
    if not terms:
        raise PatternError(f"pattern {pattern!r} names nothing")
    return terms


def _outside_brackets(text: str, separator: str) -> list[str]:
    pieces, depth, word = [], 0, ""
    for c in text:
        depth = depth + 1 if c == "[" else max(0, depth - 1) if c == "]" else depth
        if c == separator and depth == 0:
            pieces.append(word)
            word = ""
        else:
            word += c
    return pieces + [word]


def _term(text: str, pattern: str) -> Term:
    op = text[0] if text[0] in "!&" else ""
    if op and not text[1:].strip():
        raise PatternError(f"pattern {pattern!r}: {op!r} with no name after it")
    return Term(text[1:].strip() if op else text, op)


# A term with a `:` that is an address, not a separator: `ops@gpu-09:2222`, `fe80::1`.
_ADDRESS = re.compile(r"^[!&]?(?:[^@\s]+@)?(?:[^:\[\]\s@]+:[0-9]{1,5}|[0-9a-fA-F]*:[0-9a-fA-F.]*:[0-9a-fA-F:.]*)$")


def _refuse_mixed(piece: str, pattern: str) -> None:
    """A `,`-separated term holding a `:` outside brackets: Ansible reads it as one name that matches nothing
    (it warns "Could not match supplied host pattern, ignoring"); gpudiag says so, with the pattern to write."""
    if len(_outside_brackets(piece, ":")) == 1 or _ADDRESS.match(piece):
        return
    words = [w.strip() for p in _outside_brackets(pattern, ",") for w in _outside_brackets(p, ":") if w.strip()]
    raise PatternError(
        f"pattern {pattern!r} mixes ',' and ':': Ansible splits a pattern holding ',' at ',' only, so {piece!r} "
        f"is one name there and matches nothing; write {','.join(words)!r} (one separator throughout)"
    )


def is_wildcard(text: str) -> bool:
    return "*" in text or "?" in text


# Ansible's PATTERN_WITH_SUBSCRIPT: `expr[i]`, `expr[-i]`, `expr[a:b]`, `expr[a:]` (and the old `[a-b]`)
_SUBSCRIPT = re.compile(r"^(?P<base>.+)\[(?:(?P<index>-?[0-9]+)|(?P<start>[0-9]+)[:-](?P<end>[0-9]*))\]$")


@dataclass(frozen=True)
class Subscript:
    base: str
    start: int
    end: int | None  # None: the one host at `start`; -1: to the last host

    def apply(self, names: list[str], pattern: str) -> list[str]:
        """Ansible's _apply_subscript, exactly: `[a:b]` is inclusive; `[a:0]` is `[a]` as there."""
        if not names:
            return names
        if self.end:
            end = len(names) - 1 if self.end == -1 else self.end
            return names[self.start : end + 1]
        if not -len(names) <= self.start < len(names):
            raise PatternError(
                f"pattern {pattern!r}: {self.base!r} has {len(names)} host(s); [{self.start}] selects none"
            )
        return [names[self.start]]


def split_subscript(text: str) -> Subscript | None:
    """`gpus[1:]` → Subscript("gpus", 1, -1); a regex (`~...`) never has one."""
    match = None if text.startswith("~") else _SUBSCRIPT.match(text)
    if match is None:
        return None
    if match.group("index") is not None:
        return Subscript(match.group("base"), int(match.group("index")), None)
    return Subscript(match.group("base"), int(match.group("start")), int(match.group("end") or -1))


def compile_regex(text: str, pattern: str) -> re.Pattern[str]:
    """`~regex` as Ansible matches it: re.match, anchored at the start only."""
    try:
        return re.compile(text[1:])
    except (re.error, RecursionError, OverflowError) as exc:
        raise PatternError(f"pattern {pattern!r}: {text!r} is not a regular expression: {exc}") from None


def regex_matches(regex: re.Pattern[str], name: str) -> bool:
    return regex.match(name) is not None


def with_files(terms: list[Term], what: str) -> list[Term]:
    """Each `@FILE` term replaced by the patterns in the file, one a line (as Ansible reads a --limit file)."""
    out: list[Term] = []
    for term in terms:
        if term.op or not term.text.startswith("@"):
            out.append(term)
            continue
        for line in pattern_file(term.text, what):
            out += split_pattern(line)
    return out


def pattern_file(written: str, what: str) -> list[str]:
    try:
        lines = Path(written[1:]).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InventoryError(f"{what} {written}: cannot read: {exc}") from None
    patterns = [line.strip() for line in lines if line.strip()]
    if not patterns:
        raise InventoryError(f"{what} {written}: the file names no hosts")
    return patterns


def expand_host_range(doc: YamlFile, name: str, node: yaml.Node) -> list[str]:
    """`gpu-[01:04]` (Ansible) or `gpu-[01-03,07]` (pdsh) → every host it stands for; errors name file:line."""
    try:
        return expand_range(name)
    except PatternError as exc:
        raise doc.error(node, str(exc)) from None
