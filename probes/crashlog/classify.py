"""One log in, one verdict out: known signature, unclassified crash, or clean; each crash with its family,
its exception line and last frames, and advice in the flags of the release that wrote the log."""
import re

from probes.crashlog import families, fit, phases, releases
from probes.crashlog.logflags import flags_in_log
from probes.crashlog.timeline import BUILDING, Timeline
from probes.crashlog.crashes import CANDIDATE_WORDS, MARKER_TOKENS, find_crashes, is_marker
from probes.crashlog.logindex import LogIndex
from probes.crashlog.normalize import logical_lines, not_text
from probes.crashlog.redact import redact_line
from probes.crashlog.table import SIGNATURES
from probes.server_ready import READY

MAX_CRASHES = 20
MAX_ANALYSED = 200      # crashes looked at in detail; a log with more is counted, not read further
MAX_QUOTED = 12
MAX_TEXT = 300
LAST_FRAMES = 3
DFLASH = re.compile(r"DFLASH|dflash", re.I)
DFLASH_DISABLED = re.compile(r"Disable DFLASH draft cuda graph because (?P<reason>.*)")
PARENT_REPORT = re.compile(r"Received sigquit from a child proces|Child process unexpectedly failed")
OUTCOMES = ("known_signature", "unclassified_crash", "clean", "unreadable")


def _compile(table):
    out = []
    for entry in table:
        if not isinstance(entry, dict):
            continue
        try:
            out.append((entry, [re.compile(p, re.I) for p in entry.get("match") or []],
                        [re.compile(p, re.I) for p in entry.get("requires") or []],
                        [re.compile(p, re.I) for p in entry.get("context") or []]))
        except re.error:
            continue    # a bad pattern sent by an older control side never breaks classification
    return out


def quote(line):
    return {"line": line.number, "text": redact_line(line.shown.strip())[:MAX_TEXT]}


def render_advice(template, words):
    try:
        return template.format(**words)
    except (KeyError, IndexError, ValueError):
        return template


class Entry(object):
    """A signature with its patterns compiled; what it needs from the whole log is looked up once, on demand
    (a log without crashes never pays for it)."""

    def __init__(self, index, entry, match, requires, context, known=""):
        self.index, self.entry, self.match = index, entry, match
        self._requires, self._context, self._known = requires, context, known
        self._required = self._lines = None

    def required(self):
        if self._required is None:
            self._required = all(p.search(self.index.whole) or p.search(self._known) for p in self._requires)
        return self._required

    def context_lines(self):
        if self._lines is None:
            self._lines = [ln for ln in (self.index.first(p) for p in self._context) if ln is not None]
        return list(self._lines)


def classify(text, table=None, installed_release=None, known=""):
    """`known`: what the caller knows of the machine (e.g. "compute capability sm_103"); it satisfies a
    signature's `requires` like a line of the log would, and is never quoted."""
    problem = not_text(text)
    if problem:
        return {"outcome": "unreadable", "reason": problem, "lines": 0, "ready_line": None, "last_ready_line": None,
                "release": releases.infer_release("", installed_release), "advice_assumes": None, "crashes": [],
                "crashes_total": 0, "notes": [], "dflash_draft_graph": None}
    index = LogIndex(logical_lines(text))
    lines, whole = index.lines, index.whole
    release = releases.infer_release(whole, installed_release, text)
    words = releases.flag_words(release["generation"], release.get("release"), release.get("before"))
    compiled = [Entry(index, *parts, known=known) for parts in _compile(SIGNATURES if table is None else table)]
    ready_found = index.every(READY)
    ready_lines = [ln.number for ln in ready_found]
    ready = lines[ready_lines[0] - 1] if ready_lines else None
    captures = phases.capture_events(index.matches(phases.CAPTURE_EVENT), ready_found)
    crashes = find_crashes(lines, index.numbers_with(CANDIDATE_WORDS), index.numbers_with(MARKER_TOKENS, lower=True))
    analysed = crashes[:MAX_ANALYSED]
    in_capture = phases.capture_open_at(captures, analysed)
    timeline = Timeline(ready_lines, index)
    ran_with = flags_in_log(whole) if analysed else []
    reports = [_report(crash, open_, compiled, words, timeline, ran_with)
               for crash, open_ in zip(analysed, in_capture)]
    reports = _merge_ranks(reports)
    stalled = phases.capture_unfinished(lines, captures) if not reports and not ready else None
    if stalled:
        reports.append(_stall_report(lines, stalled))
    notes = _notes(index, compiled, words)
    signed = [r for r in reports if r["signature"]]
    outcome = "known_signature" if signed else "unclassified_crash" if reports else "clean"
    return {"outcome": outcome, "lines": len(lines),
            "ready_line": ready.number if ready else None,
            "last_ready_line": ready_lines[-1] if ready_lines else None,
            "release": release, "advice_assumes": releases.assumed(release),
            "crashes": reports[:MAX_CRASHES], "crashes_total": len(reports) + max(0, len(crashes) - MAX_ANALYSED),
            "notes": notes, "dflash_draft_graph": _dflash(index, reports),
            "log_flags": ran_with}


def _stall_report(lines, begun):
    last = max((ln for ln in lines if ln.text.strip()), key=lambda ln: ln.number)
    out = {"line": begun.number, "last_line": last.number, "streams": [begun.stream] if begun.stream else [],
           "family": "capture_hang", "detail": "capture", "when": "during start-up", "exception": None,
           "first_line_text": "CUDA-graph capture began here; the log ends %d lines later (line %d) without its "
                              "end, a crash or the server coming up: hung in capture, killed, or still capturing"
                              % (last.number - begun.number, last.number),
           "last_frames": [], "quoted": [quote(begun), quote(last)], "signature": None}
    out["summary"] = summary(out)
    return out


def _accepts(entry, family, detail):
    """A signature names a crash of its own families only, or one whose family is not known better; one that
    names a phase (capture, replay) only a crash the log shows in that phase."""
    wanted = entry.get("families") or ([entry["family"]] if entry.get("family") else [])
    if not wanted:
        return False            # notes (info, warning) never name a crash
    if entry.get("phases") and detail not in entry["phases"]:
        return False
    return family in wanted or family in ("unclassified", "native_crash")


def _report(crash, capture_open, compiled, words, timeline, ran_with=()):
    """One crash's record; its advice never proposes a flag the log shows its server ran with (`ran_with`)."""
    serving = timeline.serving_at(crash.first_line)
    family, detail = families.family_of(crash, capture_open, serving)
    signature, matched = None, []
    for candidate in compiled:
        entry = candidate.entry
        if not _accepts(entry, family, detail) or not candidate.required():
            continue
        matched = [line for line in crash.lines if any(p.search(line.text) for p in candidate.match)]
        if matched:
            matched = candidate.context_lines() + matched
            signature = entry
            break
    exception = crash.exception_or_earlier
    frames = [{"file": _short(path), "line": number, "function": func}
              for path, number, func in crash.frames[-LAST_FRAMES:]]
    chosen = {line.number: line for line in matched}
    if exception is not None:
        chosen.setdefault(exception.number, exception)
    for line in crash.lines:       # how the process ended: signals, watchdogs, "Killed", the parent's sigquit
        if len(chosen) < MAX_QUOTED - LAST_FRAMES and is_marker(line.text):
            chosen.setdefault(line.number, line)
    for line in crash.lines:
        if len(chosen) >= MAX_QUOTED:
            break
        if line.text.lstrip().startswith("File ") and any(f["line"] == n for f in frames for n in (line.number,)):
            chosen.setdefault(line.number, line)
    first = crash.lines[0]
    building = detail == "capture" or any(BUILDING.match(func.split(".")[-1]) and "sglang" in path
                                          for path, _, func in crash.frames)
    where = timeline.when(first.number, families.in_serving_loop(crash), building)
    out = {"line": crash.first_line, "last_line": crash.last_line, "streams": [crash.stream] if crash.stream else [],
           "family": family, "detail": detail, "when": where,
           "exception": quote(exception) if exception is not None else None,
           "first_line_text": quote(first)["text"],
           "key": redact_line((exception or first).text.strip())[:MAX_TEXT],
           # What the summary says, without the collectors' prefixes that the quoted lines keep.
           "headline": redact_line((exception or _headline_line(crash)).text.strip())[:MAX_TEXT],
           "last_frames": frames,
           "quoted": [quote(chosen[n]) for n in sorted(chosen)][:MAX_QUOTED],
           "signature": None}
    if signature is not None:
        out["signature"] = {"name": signature.get("name"), "kind": signature.get("kind"),
                            "severity": signature.get("severity") or "error", "meaning": signature.get("meaning"),
                            "recommendation": fit.without_flags(
                                render_advice(str(signature.get("recommendation") or ""), words), ran_with,
                                "the log's server ran with"),
                            "reference": signature.get("reference")}
    out["summary"] = summary(out)
    return out


def _headline_line(crash):
    """The line that says what broke when the crash has no exception line: its first line, unless that is the
    parent reporting the child (`Received sigquit …`) printed before the child's own lines."""
    for line in crash.lines:
        if not PARENT_REPORT.search(line.text) and line.text.strip():
            return line
    return crash.lines[0]


def _short(path):
    """A traceback path from sglang/ or torch/ on (site-packages prefixes say nothing and may hold user names)."""
    for anchor in ("/sglang/", "/torch/", "/sgl_kernel/", "/flashinfer/", "/vllm/"):
        index = path.rfind(anchor)
        if index >= 0:
            return path[index + 1:]
    return path.rsplit("/", 2)[-1] if path.count("/") > 2 else path


def summary(report):
    what = report.get("headline") or (report["exception"]["text"] if report["exception"] else
                                      report["first_line_text"])
    ranks = (" [%s]" % ", ".join(report["streams"])) if report["streams"] else ""
    if report["signature"]:
        return "%s at line %d%s: %s" % (report["signature"]["name"], report["line"], ranks, what)
    return "unclassified crash at line %d%s (%s): %s" % (report["line"], ranks, report["family"], what)


def _merge_ranks(reports):
    """The same crash on several ranks (one traceback per TP rank) is one report listing the ranks."""
    merged, seen = [], {}
    for report in reports:
        key = (report["family"], report.pop("key", None) or report["first_line_text"],
               (report["signature"] or {}).get("name"))
        if key in seen and report["line"] - seen[key]["last_line"] < 400:
            seen[key]["streams"] = sorted(set(seen[key]["streams"]) | set(report["streams"]), key=_rank_order)
            seen[key]["last_line"] = report["last_line"]
            seen[key]["summary"] = summary(seen[key])
            continue
        seen[key] = report
        merged.append(report)
    return merged


def _rank_order(stream):
    digits = re.sub(r"\D", "", stream)
    return (re.sub(r"\d", "", stream), int(digits) if digits else -1)


def _notes(index, compiled, words):
    """Signatures that are not crashes (DFlash draft graph skipped, acceptance stuck at 1.00)."""
    notes = []
    for candidate in compiled:
        entry = candidate.entry
        if entry.get("family") or not candidate.required():
            continue
        hits = [line for line in (index.first(p) for p in candidate.match) if line is not None]
        hit = min(hits, key=lambda ln: ln.number) if hits else None
        if hit is not None:
            notes.append({"name": entry.get("name"), "severity": entry.get("severity") or "info",
                          "meaning": entry.get("meaning"), "reference": entry.get("reference"),
                          "recommendation": render_advice(str(entry.get("recommendation") or ""), words),
                          "quoted": [quote(hit)]})
    return notes


def _dflash(index, reports):
    """What the log says about DFlash's draft CUDA graph; None when the log never mentions DFlash."""
    whole = index.whole
    if "dflash" not in index.low:
        return None
    line = index.first(DFLASH_DISABLED) if "Disable DFLASH" in whole else None
    if line is not None:
        found = DFLASH_DISABLED.search(line.text)
        return {"state": "disabled", "line": line.number, "text": quote(line)["text"],
                "reason": redact_line(found.group("reason").strip())[:MAX_TEXT]}
    served = re.search(r"speculative_algorithm='?DFLASH|--speculative-algorithm[ =]DFLASH", whole, re.I)
    for report in reports:
        crash_text = " ".join(q["text"] for q in report["quoted"]) + " ".join(f["file"] for f in report["last_frames"])
        if report["detail"] == "capture" and (served or DFLASH.search(crash_text)):
            return {"state": "capture_failed", "line": report["line"], "text": report["summary"][:MAX_TEXT],
                    "reason": report["family"]}
    return {"state": "not_logged", "line": None, "text": None,
            "reason": "the log mentions DFlash but no draft-graph decision"}
