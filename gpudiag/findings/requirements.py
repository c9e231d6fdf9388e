"""A `Requires-Dist` line and whether an installed version satisfies it: the PEP 440 subset package metadata uses
(`==`, `!=`, `>=`, `<=`, `>`, `<`, `~=`, `===`, `==X.*`), without the `packaging` library (not a dependency).

Versions compare by release, then pre-release (a < b < rc), post and dev parts; a local part (`+cu128`) is ignored
unless the specifier names one, as PEP 440 says. A version this cannot read satisfies nothing and is said so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_VERSION = re.compile(
    r"^\s*v?(?:(\d+)!)?(\d+(?:\.\d+)*)"
    r"(?:[-_.]?(a|alpha|b|beta|c|rc|pre|preview)[-_.]?(\d*))?"
    r"(?:(?:-(\d+))|(?:[-_.]?(post|rev|r)[-_.]?(\d*)))?"
    r"(?:[-_.]?dev[-_.]?(\d*))?"
    r"(?:\+([a-z0-9]+(?:[-_.][a-z0-9]+)*))?\s*$",
    re.IGNORECASE,
)
_PRE = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}
_SPEC = re.compile(r"^\s*(===|==|!=|~=|>=|<=|>|<)\s*([^\s,;]+)\s*$")
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(?:\(([^)]*)\)|([^;]*))?(?:;(.*))?$")
INF = float("inf")


@dataclass(frozen=True)
class Requirement:
    name: str  # normalised (PEP 503)
    specifier: str  # as written, e.g. "==0.3.9.post2" or ">=13.0"
    marker: str  # after `;`, empty without one
    line: str

    @property
    def extra_only(self) -> bool:
        """Whether the marker only names an extra: the requirement holds when that extra was asked for."""
        return bool(self.marker) and all(
            re.match(r"^\(*\s*extra\s*==", part.strip()) for part in re.split(r"\bor\b|\band\b", self.marker)
        )


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


def parse_requirement(line: str) -> Requirement | None:
    match = _NAME.match(line or "")
    if not match:
        return None
    spec = (match.group(2) or match.group(3) or "").strip()
    return Requirement(normalize(match.group(1)), spec, (match.group(4) or "").strip(), line.strip())


def version_key(text: str) -> tuple | None:
    """A sortable key of a PEP 440 version, or None when the text is not one."""
    match = _VERSION.match(text or "")
    if not match:
        return None
    epoch, release, pre_l, pre_n, post_implicit, post_l, post_n, dev_n, _local = match.groups()
    parts = [int(p) for p in release.split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    dev = int(dev_n or 0) if "dev" in text.lower() else None
    post = int(post_implicit) if post_implicit else (int(post_n or 0) if post_l else None)
    if pre_l:
        pre: tuple = (_PRE[pre_l.lower()], int(pre_n or 0))
    elif dev is not None and post is None:
        pre = (-INF,)  # 1.0.dev1 sorts before 1.0a1
    else:
        pre = (INF,)
    return (int(epoch or 0), tuple(parts), pre, -INF if post is None else post, INF if dev is None else dev)


def _local(text: str) -> str | None:
    return text.split("+", 1)[1].lower() if "+" in text else None


def _public(text: str) -> str:
    return text.split("+", 1)[0]


def _clause(version: str, op: str, wanted: str) -> bool | None:
    """One `op wanted` against `version`; None when either side is unreadable."""
    if op == "===":
        return version.strip().lower() == wanted.strip().lower()
    if wanted.endswith(".*") and op in ("==", "!="):
        have, prefix = version_key(_public(version)), version_key(wanted[:-2])
        if have is None or prefix is None:
            return None
        release = [int(p) for p in re.findall(r"\d+", wanted[:-2])]
        mine = list(have[1]) + [0] * len(release)
        same = have[0] == prefix[0] and mine[: len(release)] == release
        return same if op == "==" else not same
    compared = version if _local(wanted) else _public(version)
    have, want = version_key(compared), version_key(wanted)
    if have is None or want is None:
        return None
    if op == "==":
        return have == want and (not _local(wanted) or _local(version) == _local(wanted))
    if op == "!=":
        return have != want
    if op == ">=":
        return have >= want
    if op == "<=":
        return have <= want
    if op == ">":
        return have > want
    if op == "<":
        return have < want
    # ~=X.Y.Z: >= X.Y.Z and == X.Y.*
    numbers = re.match(r"\d+(?:\.\d+)*", wanted.strip())
    kept = numbers.group(0).split(".") if numbers else []
    if len(kept) < 2:
        return None
    return have >= want and bool(_clause(version, "==", ".".join(kept[:-1]) + ".*"))


def satisfies(version: str, specifier: str) -> bool | None:
    """Whether `version` meets every clause of `specifier` (empty: any version); None when unreadable."""
    verdict = True
    for part in [p for p in specifier.split(",") if p.strip()]:
        match = _SPEC.match(part)
        if not match:
            return None
        ok = _clause(version, match.group(1), match.group(2))
        if ok is None:
            return None
        verdict = verdict and ok
    return verdict
