"""Command-line targets → Hosts: inventory groups and hosts, host ranges, Ansible patterns
(`a:b`, `group:!host`, `a:&b`, wildcards, `~regex`, subscripts `g[0]` `g[1:2]` `g[-1]` `g[1:]`,
`@FILE` of patterns), ad-hoc hosts, and `--limit`. Errors quote the pattern as typed."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from gpudiag.inventory.adhoc import default_ssh_config, lookup_keys, may_be_typo, parse_adhoc, split_target
from gpudiag.inventory.base import LOCAL_NAMES, Inventory, InventoryError, add_unique, suggest
from gpudiag.inventory.patterns import (
    PatternError,
    Term,
    compile_regex,
    expand_range,
    has_range,
    is_wildcard,
    regex_matches,
    split_pattern,
    split_subscript,
    with_files,
)
from gpudiag.inventory.sshconfig import SshConfig
from gpudiag.models import Host, safe_file_name

# how close a bare word must be to an inventory name to be taken for a typo rather than a new host
TYPO_CUTOFF = 0.8


def resolve_targets(
    targets: list[str],
    inventory: Inventory | None,
    python: str | None = None,
    ssh_config: SshConfig | None = None,
    limit: str | None = None,
) -> list[Host]:
    """Each target as inventory group, host, range or pattern, or ad-hoc host; duplicates removed, order
    kept; `limit` (a pattern, or @FILE of host names) keeps only the hosts it also selects.

    `--python` (python) overrides every host's interpreter. Names stay unique: a different host that
    would share a name gets a `-2`, `-3` suffix.
    """
    resolver = _Resolver(inventory, ssh_config)
    by_name: dict[str, Host] = {}
    for target in targets:
        for host in resolver.resolve(target):
            if python:
                moot = inventory is not None and host.name in inventory.python_skips
                host = host.with_(python=python, python_explicit=True, skip_reason=None if moot else host.skip_reason)
            add_unique(by_name, host)
    selected = list(by_name.values())
    if limit is not None:
        keep = resolver.limit_names(limit, selected)
        selected = [h for h in selected if h.name in keep]
        if not selected:
            raise InventoryError(f"--limit {limit!r} leaves none of {' '.join(targets)}")
    if not selected:
        raise InventoryError(f"{' '.join(targets) or 'no targets'}: selects no hosts")
    return selected


@dataclass(frozen=True)
class _Pick:
    """A host a pattern term selects, by the name its Host will carry, before it is resolved."""

    name: str
    key: str  # the inventory name, or the ad-hoc target as written
    in_inventory: bool


class _Resolver:
    def __init__(self, inventory: Inventory | None, ssh_config: SshConfig | None):
        self.inventory = inventory
        self._ssh = ssh_config

    @property
    def ssh(self) -> SshConfig:
        if self._ssh is None:
            self._ssh = default_ssh_config()
        return self._ssh

    def resolve(self, target: str) -> list[Host]:
        if not target.strip():
            raise InventoryError("empty target")
        exact = self._exact(target)
        if exact is not None:
            return exact
        if target == "all":
            raise InventoryError("target 'all' needs an inventory: pass -i FILE (or have inventory.yaml here)")
        if target in LOCAL_NAMES or split_target(target) is not None:
            return [self._adhoc(target)]
        if target.startswith("@"):
            return self._pattern(target)
        if self._selects_from_inventory(target):
            return self._pattern(target)
        self._refuse_unknown_subscript(target)
        self._refuse_port_typo(target)
        if has_range(target):
            names = self._range_names(target)
            if names is not None:
                self._prefetch(names)
                return [host for name in names for host in self.resolve(name)]
        return self._pattern(target)

    def _range_names(self, target: str) -> list[str] | None:
        """A ranged target whose every name is a host (`gpu-[01-03]`); None for a pattern holding ranges."""
        try:
            names = expand_range(target)
        except PatternError:
            if len(split_pattern(target)) == 1:
                raise
            return None
        if all(self._exact_names(n) is not None or n in LOCAL_NAMES or split_target(n) is not None for n in names):
            return names
        if len(split_pattern(target)) == 1:
            bad = next(n for n in names if split_target(n) is None)
            raise InventoryError(f"target {target!r}: {bad!r} is not a host name or [user@]host[:port]")
        return None

    def _exact_names(self, name: str) -> list[str] | None:
        """A group's host names, plus a host of the same name; None: the inventory has no such name."""
        inv = self.inventory
        if inv is None or (name not in inv.groups and name not in inv.hosts):
            return None
        return list(dict.fromkeys(list(inv.groups.get(name, [])) + ([name] if name in inv.hosts else [])))

    def _exact(self, name: str) -> list[Host] | None:
        names = self._exact_names(name)
        if names is None or self.inventory is None:
            return None
        self._prefetch(names)
        return [self.inventory.hosts[n] for n in names]

    def _prefetch(self, names: list[str]) -> None:
        """The ssh config lookups of hosts about to be resolved, asked of `ssh -G` side by side."""
        if self._ssh is not None:  # none yet: no ssh host resolved so far, nor a config to ask about
            self._ssh.prefetch(lookup_keys(names, self.inventory.hosts if self.inventory is not None else {}))

    def _adhoc(self, target: str) -> Host:
        inv = self.inventory
        if inv is not None and may_be_typo(target) and not self.ssh.configures(target):
            hint = self._suggest(target, TYPO_CUTOFF)  # close to an inventory name: a typo, never sent to DNS
            if hint:
                raise InventoryError(
                    f"target {target!r} is not in {inv.path}{hint}; write {target}:22 to reach it as a plain ssh host"
                )
            inv.notes.setdefault(target, []).append(f"not in {inv.path}: reached as an ssh host ({target}:22 says so)")
        return parse_adhoc(target, ssh_config=self.ssh)

    def _refuse_port_typo(self, target: str) -> None:
        """`gpu-01:abc` (a host and what should be its port) would be a union with `abc` sent to DNS."""
        head, _, tail = target.rpartition(":")
        plain = target.count(":") == 1 and head and tail and tail[0] not in "!&~@" and not tail.isdigit()
        known = not plain or tail in LOCAL_NAMES or self._exact_names(tail) is not None or self.ssh.configures(tail)
        if known or is_wildcard(tail) or has_range(tail):
            return
        where = f"a host or group in {self.inventory.path}" if self.inventory else "an inventory name"
        raise InventoryError(f"target {target!r}: {tail!r} is not a port (write {head}:PORT), nor {where}")

    def _pattern(self, pattern: str) -> list[Host]:
        """Ansible's order: the union of the plain terms (or `all`), then `&` terms, then `!` terms.
        Names are combined first; only the hosts left are resolved (ssh config applied)."""
        terms = with_files(split_pattern(pattern), "target")
        plain = [t for t in terms if not t.op]
        picks = (
            [p for t in plain for p in self._term_picks(t.text, pattern)] if plain else self._term_picks("all", pattern)
        )
        for term in [t for t in terms if t.op == "&"] + [t for t in terms if t.op == "!"]:
            names = self._term_names(term, pattern, [p.name for p in picks])
            picks = [p for p in picks if (p.name in names) == (term.op == "&")]
        unique = {p.name: p for p in picks}.values()
        self._prefetch([p.key for p in unique])
        return [
            self.inventory.hosts[p.key] if p.in_inventory and self.inventory is not None else self._adhoc(p.key)
            for p in unique
        ]

    def _selects_from_inventory(self, target: str) -> bool:
        """A single `~regex` term, or a subscript of an inventory name or wildcard (not a host range)."""
        terms = split_pattern(target)
        if len(terms) != 1 or terms[0].op:
            return False
        text = terms[0].text
        return text.startswith("~") or self._subscripted(text) is not None

    def _refuse_unknown_subscript(self, target: str) -> None:
        """`gpsu[0]`: a one-host subscript of a name the inventory lacks is a typo (a slice stays a range)."""
        terms = split_pattern(target)
        sub = split_subscript(target) if len(terms) == 1 and not terms[0].op else None
        inv = self.inventory
        if sub is None or sub.end is not None or inv is None or self._exact_names(sub.base) is not None:
            return
        if is_wildcard(sub.base) and self._wildcard(sub.base, target, required=False):
            return
        raise InventoryError(
            f"pattern {target!r}: {sub.base!r} is not a group or host in {inv.path}{self._suggest(sub.base, 0.6)}"
            f" (a subscript [{sub.start}] selects from one)"
        )

    def _subscripted(self, text: str) -> list[str] | None:
        """The names `base[...]` selects (base an inventory name or wildcard); None: not a subscript."""
        sub = split_subscript(text)
        if sub is None or self.inventory is None:
            return None
        if self._exact_names(sub.base) is None and not (
            is_wildcard(sub.base) and self._wildcard(sub.base, text, required=False)
        ):
            return None
        return sub.apply(list(dict.fromkeys(p.key for p in self._term_picks(sub.base, text))), text)

    def _regex_names(self, text: str, pattern: str) -> list[str]:
        """`~regex`: the hosts of every group it matches (re.match, as Ansible), then the hosts it matches."""
        inv = self.inventory
        if inv is None:
            raise InventoryError(
                f"pattern {pattern!r}: the regular expression {text!r} needs an inventory: pass -i FILE"
            )
        regex = compile_regex(text, pattern)
        names = [h for g in inv.groups if regex_matches(regex, g) for h in inv.groups[g]]
        names += [h for h in inv.hosts if regex_matches(regex, h)]
        if not names:
            raise InventoryError(f"pattern {text!r} matches no host or group in {inv.path}")
        return list(dict.fromkeys(names))

    def _term_picks(self, text: str, pattern: str) -> list[_Pick]:
        exact = self._exact_names(text)
        if exact is not None:
            return [_Pick(safe_file_name(n), n, True) for n in exact]
        if text.startswith("~"):
            return [_Pick(safe_file_name(n), n, True) for n in self._regex_names(text, pattern)]
        subscripted = self._subscripted(text)
        if subscripted is not None:
            return [_Pick(safe_file_name(n), n, True) for n in subscripted]
        if is_wildcard(text):
            return [p for name in self._wildcard(text, pattern) for p in self._term_picks(name, pattern)]
        if text == "all":
            raise InventoryError(f"pattern {pattern!r}: 'all' needs an inventory: pass -i FILE")
        if text in LOCAL_NAMES:
            return [_Pick("localhost", text, False)]
        if split_target(text) is not None:
            return [_Pick(safe_file_name(text), text, False)]
        if has_range(text):
            return [p for name in expand_range(text) for p in self._term_picks(name, pattern)]
        where = f"target {text!r}:" if text == pattern else f"pattern {pattern!r}: {text!r} is"
        raise InventoryError(
            f"{where} not {self._known_kinds()}a host name or [user@]host[:port]{self._suggest(text, 0.6)}"
        )

    def _term_names(self, term: Term, pattern: str, candidates: list[str]) -> set[str]:
        """The host names a `&`/`!` term (or a --limit term) stands for; candidates: names so far."""
        text = term.text
        exact = self._exact_names(text)
        if exact is not None:
            return {safe_file_name(n) for n in exact}
        if text.startswith("~") or self._subscripted(text) is not None:
            return {p.name for p in self._term_picks(text, pattern)}
        if is_wildcard(text):
            found = {name for name in candidates if fnmatch.fnmatchcase(name, text)}
            if self.inventory is not None:
                found |= {
                    safe_file_name(h)
                    for n in self._wildcard(text, pattern, required=False)
                    for h in self._exact_names(n) or []
                }
            return found
        names = expand_range(text) if has_range(text) else [text]
        return {safe_file_name(n) for n in names}

    def _wildcard(self, text: str, pattern: str, required: bool = True) -> list[str]:
        inv = self.inventory
        if inv is None:
            raise InventoryError(f"pattern {pattern!r}: the wildcard {text!r} needs an inventory: pass -i FILE")
        names = [g for g in inv.groups if fnmatch.fnmatchcase(g, text)]
        names += [h for h in inv.hosts if fnmatch.fnmatchcase(h, text)]
        if not names and required:
            raise InventoryError(f"pattern {text!r} matches no host or group in {inv.path}")
        return names

    def limit_names(self, limit: str, selected: list[Host]) -> set[str]:
        """The host names `--limit` keeps: a pattern evaluated like a target, or `@FILE` (one name a line)."""
        terms = with_files(split_pattern(limit), "--limit")
        plain = [t for t in terms if not t.op]
        candidates = [h.name for h in selected]
        keep = set().union(*(self._term_names(t, limit, candidates) for t in plain)) if plain else set(candidates)
        for term in terms:
            if term.op:
                names = self._term_names(term, limit, candidates)
                keep = keep & names if term.op == "&" else keep - names
        return keep

    def _known_kinds(self) -> str:
        return "an inventory host or group, nor " if self.inventory is not None else ""

    def _suggest(self, target: str, cutoff: float) -> str:
        if self.inventory is None:
            return ""
        return suggest(target, list(self.inventory.hosts) + list(self.inventory.groups), cutoff)
