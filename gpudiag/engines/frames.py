"""Finds every framed document in text collected by an engine (pdsh, clush, srun, plain files).

Lines may carry a `host: ` prefix (pdsh, clush) or a task label `0: ` (srun --label); they are split
into one stream per prefix first, so interleaved hosts come apart. The engines' own lines about a host
(pdsh's `pdsh@control: node3: ...`, srun's `srun: error: node3: task 2: Killed`) name hosts that printed
no frame; with labelled srun output such a task becomes a host named after its node. clush's gathered
(`-b`) form is turned into the prefixed form first (clush.py). Any nonce is accepted; a frame that
never ends is returned as truncated, never dropped, and never takes its neighbours with it. Progress event
lines (probes/events.py) that an engine merged into the text are dropped: only frames carry results.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from gpudiag.engines import clush
from gpudiag.jsonfile import DocumentError, decode_document
from gpudiag.valid_text import may_hold_surrogates, valid_unicode

_BEGIN = re.compile(r"^(?P<prefix>.*?)GPUDIAG-BEGIN (?P<nonce>\S+)\s*$")
_END = re.compile(r"^GPUDIAG-END (?P<nonce>\S+)\s*$")
_EVENT = re.compile(r"^GPUDIAG-(?:CHILD-)?EVENT ")
_PREFIX = re.compile(r"^\s*(?P<key>[^\s:]+): $")
# pdsh reports its own view of a host on stderr: "pdsh@control: node3: ssh exited with exit code 255".
_PDSH_NOTE = re.compile(r"^pdsh@[^:\s]+: (?P<host>[^:\s]+): (?P<message>.*)$")
# srun reports tasks that ended badly on stderr: "srun: error: node3: tasks 0-2,5: Killed".
_SRUN_NOTE = re.compile(r"^srun: error: (?P<node>[^:\s]+): tasks? (?P<tasks>[\d,-]+): (?P<message>.*)$")
# clush's own lines about hosts: "clush: gpu-[03-04] (2): exited with exit code 255", "...: command timeout".
_CLUSH_NOTE = re.compile(
    r"^clush: (?P<hosts>\S+(?: \(\d+\))?): (?P<message>exited with exit code \d+|command timeout)$"
)
_EVENT_ANY = re.compile(r"^(?P<prefix>.*?)GPUDIAG-(?:CHILD-)?EVENT ")
_EVENT_BODY = re.compile(r"^GPUDIAG-EVENT \S+ (?P<json>\{.*\})\s*$")
MAX_TASKS = 100_000  # a task range in srun's note beyond this is not srun's
MAX_NOTED_HOSTS = 100_000
MAX_EVENT_CHARS = 4096
_HOST_IN_PARTIAL = re.compile(r'"host": "((?:[^"\\]|\\.)*)"')
TAIL_CHARS = 2000


@dataclass(frozen=True)
class Frame:
    """One framed document (or what is left of it) and the engine's label for where it came from."""

    label: str | None  # pdsh/clush host, srun task number, or None
    label_kind: str  # "host" | "task" | ""
    nonce: str
    document: dict[str, Any] | None  # None when the frame could not be read
    error: str | None = None  # why it could not be read
    text: str = ""  # the frame's own lines, for the output tail

    def host_hint(self) -> str | None:
        """The host name the document gives, or one salvaged from a truncated frame."""
        if self.document is not None:
            value = self.document.get("host") or self.document.get("hostname")
            return str(value) if value else None
        match = _HOST_IN_PARTIAL.search(self.text)
        if match is None:
            return None
        try:
            return str(json.loads(f'"{match.group(1)}"'))
        except ValueError:  # a broken escape in a cut-off frame: keep the text as it stands
            return match.group(1)


@dataclass
class ParsedText:
    frames: list[Frame] = field(default_factory=list)
    # Hosts the engine named without a frame: label → their lines (engine notes and own output).
    frameless: dict[str, list[str]] = field(default_factory=dict)
    noise: list[str] = field(default_factory=list)  # unprefixed lines outside any frame
    labelled: str = ""  # "host" | "task" | "" (how lines were prefixed)
    nodes: dict[str, str] = field(default_factory=dict)  # srun task label → the node srun named for it
    last_steps: dict[str, str] = field(default_factory=dict)  # frameless label → its last progress event
    engine: str = ""  # "clush" when its own lines or its gathered form show it; else told by `labelled`


def label_kind(key: str) -> str:
    return "task" if key.isdigit() else "host"


def parse_text(text: str) -> ParsedText:
    """Every frame in `text`, split by line prefix first."""
    lines = [line.rstrip("\r") for line in text.splitlines()]
    gathered = clush.is_gathered(lines)
    if gathered:
        lines = clush.ungather(lines)  # GatheredFormError: the caller names the source
    prefixes, notes, srun_notes = engine_lines(lines)
    for host in notes:
        prefixes.setdefault(f"{host}: ", host)
    streams = split_streams(lines, prefixes)
    for host in notes:
        streams.setdefault(host, [])
    parsed = ParsedText(nodes={task: node for task, node in srun_notes.items() if task in notes})
    if gathered or any(_CLUSH_NOTE.match(line) for line in lines):
        parsed.engine = "clush"
    kinds = {label_kind(k) for k in streams if k}
    parsed.labelled = kinds.pop() if len(kinds) == 1 else ("host" if kinds else "")
    for key, stream_lines in streams.items():
        frames, outside = frames_in_stream(stream_lines, key or None)
        parsed.frames.extend(frames)
        if key and not frames:
            parsed.frameless[key] = outside + notes.get(key, [])
            step = last_step(stream_lines)
            if step:
                parsed.last_steps[key] = step
        elif not key:
            parsed.noise = outside
    return parsed


def engine_lines(lines: list[str]) -> tuple[dict[str, str], dict[str, list[str]], dict[str, str]]:
    """The line prefixes in use (prefix text → key), the engines' notes per host or task, and the node
    srun named for each task it reported."""
    prefixes: dict[str, str] = {}
    notes: dict[str, list[str]] = {}
    srun_nodes: dict[str, str] = {}
    srun_lines: dict[str, str] = {}
    unlabelled_begin = False
    for line in lines:
        marker = _BEGIN.match(line) or _EVENT_ANY.match(line)
        prefix = _PREFIX.match(marker.group("prefix")) if marker else None
        if prefix:
            prefixes[prefix.group(0)] = prefix.group("key")
        elif marker and not marker.group("prefix").strip() and _BEGIN.match(line):
            unlabelled_begin = True
        note = _PDSH_NOTE.match(line)
        if note:
            notes.setdefault(note.group("host"), []).append(note.group("message"))
        # Hosts named only by engine lines are capped in all: a hostile file must not fill memory.
        for host, message in clush_note(line) if len(notes) < MAX_NOTED_HOSTS else []:
            notes.setdefault(host, []).append(f"clush: {message}")
        srun = _SRUN_NOTE.match(line)
        if srun and len(srun_nodes) < MAX_NOTED_HOSTS:
            for task in task_numbers(srun.group("tasks")):
                srun_nodes[task], srun_lines[task] = srun.group("node"), line
    # Unlabelled output's frames cannot be told apart by task: there srun's notes name no host.
    if srun_lines and (any(key.isdigit() for key in prefixes.values()) or not unlabelled_begin):
        for task, line in srun_lines.items():
            notes.setdefault(task, []).append(line)
    return prefixes, notes, srun_nodes


def clush_note(line: str) -> list[tuple[str, str]]:
    """(host, message) for every host of a `clush: NODESET: exited with exit code N` line."""
    match = _CLUSH_NOTE.match(line)
    if match is None:
        return []
    try:
        hosts = clush.expand_nodeset(match.group("hosts"))
    except clush.GatheredFormError:
        return []
    return [(host, match.group("message")) for host in hosts]


def task_numbers(spec: str) -> list[str]:
    """srun's task list `0-2,5` → ["0", "1", "2", "5"]; an implausible list gives none."""
    tasks: list[str] = []
    for part in spec.split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            return []
        first, last = int(low), int(high or low)
        if last < first or last - first + len(tasks) > MAX_TASKS:
            return []
        tasks.extend(str(n) for n in range(first, last + 1))
    return tasks


def last_step(lines: list[str]) -> str | None:
    """What the host's last progress event said (`probe 2/4 env started`): where a killed run stopped."""
    for line in reversed(lines):
        match = _EVENT_BODY.match(line[:MAX_EVENT_CHARS])
        if not match:
            continue
        try:
            event = json.loads(match.group("json"))
        except ValueError:
            continue
        if isinstance(event, dict):
            parts = [event.get("step"), f"{event.get('i')}/{event.get('n')}", event.get("probe"), event.get("state")]
            return " ".join(str(p)[:60] for p in parts if p not in (None, ""))
    return None


def split_streams(lines: list[str], prefixes: dict[str, str]) -> dict[str, list[str]]:
    """Lines grouped by their prefix's key ("" for unprefixed), the prefix removed."""
    streams: dict[str, list[str]] = {"": []}
    ordered = sorted(prefixes, key=len, reverse=True)  # longest first: "10: " before "0: "
    for line in lines:
        if _PDSH_NOTE.match(line) or _SRUN_NOTE.match(line) or _CLUSH_NOTE.match(line):
            continue
        for prefix in ordered:
            if line.startswith(prefix):
                streams.setdefault(prefixes[prefix], []).append(line[len(prefix) :])
                break
        else:
            streams[""].append(line)
    return streams


def frames_in_stream(lines: list[str], label: str | None) -> tuple[list[Frame], list[str]]:
    """Frames of one stream in order of their BEGIN lines, and the lines outside every frame."""
    kind = label_kind(label) if label else ""
    opened: dict[str, list[str]] = {}
    order: list[tuple[str, list[str], bool]] = []  # (nonce, body lines, ended)
    outside: list[str] = []
    for line in lines:
        if _EVENT.match(line):
            continue
        begin = _BEGIN.match(line)
        if begin and not begin.group("prefix").strip():
            nonce = begin.group("nonce")
            body: list[str] = []
            if nonce in opened:  # same nonce again: the earlier one was cut off
                _close(order, opened.pop(nonce), ended=False)
            opened[nonce] = body
            order.append((nonce, body, False))
            continue
        end = _END.match(line)
        if end and end.group("nonce") in opened:
            _close(order, opened.pop(end.group("nonce")), ended=True)
            continue
        if opened:
            for body in opened.values():
                body.append(line)
        else:
            outside.append(line)
    frames = [_frame(nonce, body, ended, label, kind) for nonce, body, ended in order]
    return frames, outside


def _close(order: list[tuple[str, list[str], bool]], body: list[str], ended: bool) -> None:
    for i, (nonce, lines, _) in enumerate(order):
        if lines is body:
            order[i] = (nonce, lines, ended)
            return


def _frame(nonce: str, body: list[str], ended: bool, label: str | None, kind: str) -> Frame:
    text = "\n".join(body)
    if not ended:
        return Frame(
            label,
            kind,
            nonce,
            None,
            "the output starts a frame but never ends it (truncated output)",
            text[-TAIL_CHARS:],
        )
    document, refused = _decode(body)
    if document is None:
        why = f"the frame is not readable: {refused}" if refused else "the frame holds no readable JSON object"
        return Frame(label, kind, nonce, None, why, text[-TAIL_CHARS:])
    return Frame(label, kind, nonce, document, None, text[-TAIL_CHARS:])


def _decode(body: list[str]) -> tuple[dict[str, Any] | None, str | None]:
    """(the frame's JSON object, None): the body's lines joined (the bundle wraps long JSON), else the one
    line of it that is a document (other hosts' lines land inside a frame when unlabelled output
    interleaves). (None, why) when the whole body is valid JSON refused by a limit (values, their cost,
    depth), else (None, None)."""
    candidates = ["".join(body), "\n".join(body)] + [line for line in body if line.lstrip().startswith("{")]
    refused = None
    for candidate in candidates:
        try:
            doc = decode_document(candidate)
        except DocumentError as exc:
            if refused is None and not str(exc).startswith("not valid JSON"):
                refused = str(exc)
            continue
        if isinstance(doc, dict):
            return (valid_unicode(doc) if may_hold_surrogates(candidate) else doc), None
    return None, refused
