"""One log in, one verdict out: known signature, unclassified crash, or clean; each crash with its family,
its exception line and last frames, and advice in the flags of the release that wrote the log."""
import re

from probes.crashlog import families, releases
from probes.crashlog.crashes import MARKERS, find_crashes
from probes.crashlog.normalize import logical_lines
from probes.crashlog.redact import redact_line
from probes.crashlog.table import SIGNATURES

MAX_CRASHES = 20
MAX_QUOTED = 12
MAX_TEXT = 300
LAST_FRAMES = 3
READY = re.compile(r"The server is fired up and ready to roll|Uvicorn running on|Application startup complete")
CAPTURE_BEGIN = re.compile(r"Capture (?:draft |target \w+ )?(?:cuda|CUDA) graph begin")
CAPTURE_END = re.compile(r"Capture (?:draft |target \w+ )?(?:cuda|CUDA) graph end")
DFLASH = re.compile(r"DFLASH|dflash", re.I)
DFLASH_DISABLED = re.compile(r"Disable DFLASH draft cuda graph because (?P<reason>.*)")
OUTCOMES = ("known_signature", "unclassified_crash", "clean")


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


def classify(text, table=None, installed_release=None):
    lines = logical_lines(text)
    whole = "\n".join(line.text for line in lines)
    release = releases.infer_release(whole, installed_release)
    words = releases.flag_words(release["generation"], release.get("release"))
    compiled = _compile(SIGNATURES if table is None else table)
    ready = next((line for line in lines if READY.search(line.text)), None)
    crashes = find_crashes(lines)
    reports = [_report(crash, lines, whole, compiled, words, ready) for crash in crashes]
    reports = _merge_ranks(reports)
    stalled = _capture_unfinished(lines) if not reports and not ready else None
    if stalled:
        reports.append(_stall_report(lines, stalled))
    notes = _notes(lines, whole, compiled, words)
    signed = [r for r in reports if r["signature"]]
    outcome = "known_signature" if signed else "unclassified_crash" if reports else "clean"
    return {"outcome": outcome, "lines": len(lines),
            "ready_line": ready.number if ready else None,
            "release": release, "advice_assumes": releases.assumed(release),
            "crashes": reports[:MAX_CRASHES], "crashes_total": len(reports),
            "notes": notes, "dflash_draft_graph": _dflash(lines, whole, reports)}


def _capture_unfinished(lines):
    """The first line of a capture that began and never ended (a log that stops mid-capture), or None."""
    open_at = {}
    for line in lines:
        if CAPTURE_BEGIN.search(line.text):
            open_at[line.stream] = line
        elif CAPTURE_END.search(line.text):
            open_at.pop(line.stream, None)
    return min(open_at.values(), key=lambda l: l.number) if open_at else None


def _stall_report(lines, begun):
    last = max((l for l in lines if l.text.strip()), key=lambda l: l.number)
    out = {"line": begun.number, "last_line": last.number, "streams": [begun.stream] if begun.stream else [],
           "family": "capture_hang", "detail": "capture", "when": "during start-up", "exception": None,
           "first_line_text": "CUDA-graph capture began here; the log ends %d lines later (line %d) without its "
                              "end, a crash or the server coming up: hung in capture, killed, or still capturing"
                              % (last.number - begun.number, last.number),
           "last_frames": [], "quoted": [quote(begun), quote(last)], "signature": None}
    out["summary"] = summary(out)
    return out


def _capture_open_before(lines, crash):
    begun = None
    for line in lines:
        if line.number >= crash.first_line:
            break
        if line.stream != crash.stream:
            continue
        if CAPTURE_BEGIN.search(line.text):
            begun = line.number
        elif CAPTURE_END.search(line.text):
            begun = None
    return begun is not None


def _accepts(entry, family):
    """A signature names a crash of its own families only, or one whose family is not known better."""
    wanted = entry.get("families") or ([entry["family"]] if entry.get("family") else [])
    if not wanted:
        return False            # notes (info, warning) never name a crash
    return family in wanted or family in ("unclassified", "native_crash")


def _report(crash, lines, whole, compiled, words, ready):
    family, detail = families.family_of(crash, _capture_open_before(lines, crash))
    signature, matched = None, []
    for entry, match, requires, context in compiled:
        if not _accepts(entry, family) or not all(p.search(whole) for p in requires):
            continue
        matched = [line for line in crash.lines if any(p.search(line.text) for p in match)]
        if matched:
            context_lines = [next((l for l in lines if p.search(l.text)), None) for p in context]
            matched = [l for l in context_lines if l is not None] + matched
            signature = entry
            break
    exception = crash.exception_or_earlier
    frames = [{"file": _short(path), "line": number, "function": func}
              for path, number, func in crash.frames[-LAST_FRAMES:]]
    chosen = {line.number: line for line in matched}
    if exception is not None:
        chosen.setdefault(exception.number, exception)
    for line in crash.lines:       # how the process ended: signals, watchdogs, "Killed", the parent's sigquit
        if len(chosen) < MAX_QUOTED - LAST_FRAMES and MARKERS.search(line.text):
            chosen.setdefault(line.number, line)
    for line in crash.lines:
        if len(chosen) >= MAX_QUOTED:
            break
        if line.text.lstrip().startswith("File ") and any(f["line"] == n for f in frames for n in (line.number,)):
            chosen.setdefault(line.number, line)
    first = crash.lines[0]
    where = "after the server was ready" if ready and first.number > ready.number else "during start-up"
    out = {"line": crash.first_line, "last_line": crash.last_line, "streams": [crash.stream] if crash.stream else [],
           "family": family, "detail": detail, "when": where,
           "exception": quote(exception) if exception is not None else None,
           "first_line_text": quote(first)["text"],
           "key": redact_line((exception or first).text.strip())[:MAX_TEXT],
           "last_frames": frames,
           "quoted": [quote(chosen[n]) for n in sorted(chosen)][:MAX_QUOTED],
           "signature": None}
    if signature is not None:
        out["signature"] = {"name": signature.get("name"), "kind": signature.get("kind"),
                            "severity": signature.get("severity") or "error", "meaning": signature.get("meaning"),
                            "recommendation": render_advice(str(signature.get("recommendation") or ""), words),
                            "reference": signature.get("reference")}
    out["summary"] = summary(out)
    return out


def _short(path):
    """A traceback path from sglang/ or torch/ on (site-packages prefixes say nothing and may hold user names)."""
    for anchor in ("/sglang/", "/torch/", "/sgl_kernel/", "/flashinfer/", "/vllm/"):
        index = path.rfind(anchor)
        if index >= 0:
            return path[index + 1:]
    return path.rsplit("/", 2)[-1] if path.count("/") > 2 else path


def summary(report):
    what = report["exception"]["text"] if report["exception"] else report["first_line_text"]
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


def _notes(lines, whole, compiled, words):
    """Signatures that are not crashes (DFlash draft graph skipped, acceptance stuck at 1.00)."""
    notes = []
    for entry, match, requires, _ in compiled:
        if entry.get("family") or not all(p.search(whole) for p in requires):
            continue
        hit = next((line for line in lines if any(p.search(line.text) for p in match)), None)
        if hit is not None:
            notes.append({"name": entry.get("name"), "severity": entry.get("severity") or "info",
                          "meaning": entry.get("meaning"), "reference": entry.get("reference"),
                          "recommendation": render_advice(str(entry.get("recommendation") or ""), words),
                          "quoted": [quote(hit)]})
    return notes


def _dflash(lines, whole, reports):
    """What the log says about DFlash's draft CUDA graph; None when the log never mentions DFlash."""
    if not DFLASH.search(whole):
        return None
    for line in lines:
        found = DFLASH_DISABLED.search(line.text)
        if found:
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
