"""The answers block every report opens with: one line per question when the hosts agree, a per-host table when
they differ, and the coverage line ("N of M questions answered on K hosts"). Hosts share a line when their
sentences agree; in JSON they share an entry only when their structured values agree too."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Mapping, Sequence

from gpudiag.findings import QUESTIONS, Answer, coverage_line, for_each_host, host_answers, with_run_options
from gpudiag.derived import is_slim
from gpudiag.models import HostResult
from gpudiag.run_records import LoadedRun
from gpudiag.render.safe_text import md

MAX_NAMED_HOSTS = 10


@dataclass(frozen=True)
class AnswerGroup:
    answer: Answer
    hosts: tuple[str, ...]
    argv: tuple[str, ...] = ()  # the run's command line: its -i, --python and --limit ride on the command

    def command(self) -> str:
        if not self.answer.command:
            return ""
        return with_run_options(self.answer.command.replace("HOST", " ".join(self.hosts[:MAX_NAMED_HOSTS])), self.argv)


@dataclass(frozen=True)
class AnswerSet:
    per_host: Mapping[str, list[Answer]]  # hosts that gave data
    questions: tuple[tuple[str, str, tuple[AnswerGroup, ...]], ...]
    unreached: tuple[tuple[str, str], ...] = ()  # (host, why): every question unchecked there
    # The same reasons with each host's own address and name said generically: hosts that fail alike share a line.
    general: dict[str, str] = field(default_factory=dict)
    statuses: dict[str, list[Answer]] = field(default_factory=dict)  # per host, its answers' statuses alone

    @property
    def coverage(self) -> str:
        text = coverage_line(self.statuses)
        return text + (
            f"; {len(self.unreached)} host{'s' if len(self.unreached) != 1 else ''} not reached"
            if self.unreached
            else ""
        )

    @property
    def unchecked(self) -> bool:
        return bool(self.unreached) or any(
            a.status != "answered" for answers in self.statuses.values() for a in answers
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "coverage": self.coverage,
            "unreached_hosts": [{"name": name, "reason": why} for name, why in self.unreached],
            "questions": [
                {
                    "id": qid,
                    "question": question,
                    "answers": [
                        dict(g.answer.to_dict(), hosts=list(g.hosts), command=g.command())
                        for group in groups
                        for g in self._by_value(index, group)
                    ],
                }
                for index, (qid, question, groups) in enumerate(self.questions)
            ],
        }

    def _by_value(self, index: int, group: AnswerGroup) -> list[AnswerGroup]:
        """A group's hosts split where their structured values differ (a value may hold facts its sentence leaves
        out, such as a port): each JSON entry's value is every listed host's own."""
        split: dict[str, list[str]] = {}
        first: dict[str, Answer] = {}
        for name in group.hosts:
            answer = self.per_host[name][index]
            key = json.dumps(answer.value, sort_keys=True, default=str)
            split.setdefault(key, []).append(name)
            first.setdefault(key, answer)
        return [AnswerGroup(first[k], tuple(names), group.argv) for k, names in split.items()]


def answer_set(run: LoadedRun) -> AnswerSet:
    reached = [h for h in run.hosts if h.probes]
    unreached = tuple(
        (
            h.name,
            f"not checked — the host was not reached ({h.status}: {h.reason or '-'})"
            if h.status != "ok"
            else "not checked — the host returned no probe data",
        )
        for h in run.hosts
        if not h.probes
    )
    general = {
        name: _own_names_out(why, h) for (name, why), h in zip(unreached, (h for h in run.hosts if not h.probes))
    }
    # Hosts that agree in everything but their name are answered once (for_each_host); slim hosts keep their
    # answers packed (gpudiag/derived.py), read again where asked, so the fleet's answers are never held at once.
    per_host: Mapping[str, list[Answer]]
    if any(is_slim(h) for h in reached):
        per_host = _ReadWhenAsked({h.name: h for h in reached})
    else:
        per_host = dict(zip((h.name for h in reached), for_each_host(host_answers, reached)))
    groups: list[dict[tuple[str, str], list[str]]] = [{} for _ in QUESTIONS]
    first: list[dict[tuple[str, str], Answer]] = [{} for _ in QUESTIONS]
    statuses: dict[str, list[Answer]] = {}
    for name, answers in per_host.items():  # one pass: each host's answers read once
        statuses[name] = [_status_only(a) for a in answers]
        for index, answer in enumerate(answers[: len(QUESTIONS)]):
            key = (answer.status, answer.text)
            groups[index].setdefault(key, []).append(name)
            if key not in first[index]:
                first[index][key] = replace(answer, value=None)  # JSON reads each host's own value
    argv = tuple(run.manifest.argv)
    questions = []
    for index, declared in enumerate(QUESTIONS):
        ordered = sorted(groups[index].items(), key=lambda kv: (-len(kv[1]), kv[1]))
        found = tuple(AnswerGroup(first[index][k], tuple(v), argv) for k, v in ordered)
        questions.append((declared.qid, declared.text, found))
    return AnswerSet(per_host, tuple(questions), unreached, general, statuses)


class _ReadWhenAsked(Mapping[str, list[Answer]]):
    """Each slim host's answers, unpacked when asked."""

    def __init__(self, hosts: dict[str, HostResult]):
        self._hosts = hosts

    def __getitem__(self, name: str) -> list[Answer]:
        return host_answers(self._hosts[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self._hosts)

    def __len__(self) -> int:
        return len(self._hosts)


_STATUS_ONLY: dict[tuple[str, str], Answer] = {}


def _status_only(answer: Answer) -> Answer:
    """The answer's question and status alone, one object per pair: what coverage counts."""
    key = (answer.qid, answer.status)
    found = _STATUS_ONLY.get(key)
    if found is None:
        found = _STATUS_ONLY[key] = Answer(answer.qid, answer.status, "")
    return found


def host_list(names: Sequence[str]) -> str:
    """'3 hosts: a, b, c'; past ten names, the first ten and how many more."""
    shown = ", ".join(names[:MAX_NAMED_HOSTS])
    more = f" and {len(names) - MAX_NAMED_HOSTS} more" if len(names) > MAX_NAMED_HOSTS else ""
    return f"{len(names)} host{'s' if len(names) != 1 else ''}: {shown}{more}"


def hosts_label(names: Sequence[str]) -> str:
    """One host by its name, several as host_list says them."""
    return names[0] if len(names) == 1 else host_list(names)


def markdown_block(answers: AnswerSet) -> list[str]:
    lines = ["## Answers", "", f"{md(answers.coverage)}.", ""]
    # Hosts not reached for the same reason share one line: a report's length follows what differs.
    lines += [f"- {md(hosts_label(names))}: every question {md(why)}" for why, names in _by_reason(answers)]
    if not answers.per_host:
        return lines + [""]
    differing: list[str] = []
    for qid, question, groups in answers.questions:
        if len(groups) == 1:
            g = groups[0]
            lines.append(f"- **{qid}** {md(question)} — {md(g.answer.text, 1200)} ({md(host_list(g.hosts))})")
            continue
        for i, g in enumerate(groups):
            differing.append(
                f"| {qid + ' ' + md(question) if i == 0 else ' '} | {md(host_list(g.hosts))} | "
                f"{md(g.answer.text, 1200)} |"
            )
    if differing:
        lines += ["", "Where the hosts differ:", "", "| question | hosts | answer |", "|---|---|---|"] + differing
    return lines + [""]


def console_rows(answers: AnswerSet) -> list[tuple[str, str, str]]:
    """(question, hosts, answer) rows for the console table; text is plain (the caller makes it rich Text)."""
    rows = [("all", hosts_label(names), f"every question {why}") for why, names in _by_reason(answers)]
    for qid, _question, groups in answers.questions:
        for g in groups:
            rows.append((qid, host_list(g.hosts), g.answer.text))
    return rows


def _by_reason(answers: AnswerSet) -> list[tuple[str, list[str]]]:
    """(reason, names) of the unreached hosts, in first-seen order: hosts whose reasons differ only in their own
    name or address share one line; a host alone keeps its own words."""
    grouped: dict[str, list[tuple[str, str]]] = {}
    for name, why in answers.unreached:
        grouped.setdefault(answers.general.get(name, why), []).append((name, why))
    return [(general if len(pairs) > 1 else pairs[0][1], [n for n, _ in pairs]) for general, pairs in grouped.items()]


def _own_names_out(reason: str, host: Any) -> str:
    """The reason with the host's own address and name said generically, so hosts that fail alike share a line."""
    for own, said in ((host.address, "its address"), (host.name, "the host")):
        if own and len(own) > 2:
            reason = reason.replace(own, said)
    return reason
