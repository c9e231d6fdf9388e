"""The logging prefix of a stats line -> its date, time stamp, seconds and rank tags, each prefix, date or tag
string parsed once and cached: lines of one second and rank share it. Used by both line readers (lines.py,
strict.py) so that a line reads the same whichever of them took it.

sglang's own "[%(asctime)s{.ms}{ DPn}{ PPn}{ TPn}{ EPn}] " is sliced by position; anything else (a custom
format such as "[DP3 TP3 EP3 scheduler_metrics_mixin.py:222] ", a line that lost its "[", a compose, Ray,
journald or `> ` quoting prefix) is searched for its stamp and the rank tags of its last bracket.
"""
import re

STAMP = re.compile(r"(?:(\d{4}-\d\d-\d\d)[ T])?(\d\d):(\d\d):(\d\d)")
RANK = re.compile(r"(?<![\w.])([A-Z][A-Z_]{0,10}[A-Z])(\d{1,4})(?![\w.:])")
MAX_PREFIXES = 4096


def stamp(record, line, begins, prefixes):
    """Sets record's date, ts, t (seconds), ranks {tag: n} and rank ("DP0 TP0") from line[:begins], the text
    before the line's head; returns the record."""
    record["date"], record["ts"], record["t"], record["ranks"], record["rank"], _ = when(line, begins, prefixes)
    return record


def when(line, begins, prefixes):
    """(date, ts, t (seconds), ranks {tag: n}, rank "DP0 TP0", stamp: "date ts", ts or None) of line[:begins], the
    text before the line's head; remembered per prefix (keyed by the bare string, the other kinds by tuples)."""
    prefix = line[:begins]
    found = prefixes.get(prefix)
    if found is None:
        found = _read(prefix, prefixes)
        if len(prefixes) > MAX_PREFIXES:
            prefixes.clear()
        prefixes[prefix] = found
    return found


def _read(prefix, prefixes):
    begins = len(prefix)
    if begins > 21 and prefix[0] == "[" and prefix[5] == "-" and prefix[11] == " " and prefix[14] == ":" and \
            prefix[17] == ":" and prefix[13].isdigit():
        # sglang's own "[YYYY-MM-DD HH:MM:SS<.ms><tags>] ": the stamp sliced, the date and the tags cached.
        ranks, rank = cached(prefixes, "tags", prefix[20:], rank_tags)
        seconds = sglang_seconds(prefix[1:20], lambda date: cached(prefixes, "day", date, day))
        return prefix[1:11], prefix[12:20], seconds, ranks, rank, prefix[1:20]
    return _prefix(prefix)


def cached(cache, kind, text, parse):
    """parse(text), remembered per kind: a prefix, a date or a tag string recurs on every line of its second,
    day or rank."""
    found = cache.get((kind, text))
    if found is None:
        found = parse(text)
        if len(cache) > MAX_PREFIXES:
            cache.clear()
        cache[(kind, text)] = found
    return found


def sglang_seconds(stamp, day_of=None):
    """Seconds of sglang's own "YYYY-MM-DD HH:MM:SS" (`day_of`: how the date is read, e.g. cached), None when
    it is no such stamp."""
    try:
        return (day_of or day)(stamp[:10]) + int(stamp[11:13]) * 3600 + int(stamp[14:16]) * 60 + int(stamp[17:19])
    except (TypeError, ValueError):
        return None


def day(date):
    """Seconds at the start of a YYYY-MM-DD date, monotone in the date (enough to order and to tell a gap)."""
    try:
        y, mo, d = (int(x) for x in date.split("-"))
    except ValueError:
        return None
    return (y * 372 + mo * 31 + d) * 86400


def rank_tags(tail):
    """(ranks, rank) of what follows the stamp in sglang's bracket: ".123 DP0 TP0] " -> ({DP: 0, TP: 0}, "DP0 TP0")."""
    close = tail.find("]")
    pairs = RANK.findall(tail[:close] if close >= 0 else tail)
    return dict((k, int(v)) for k, v in pairs), " ".join(k + v for k, v in pairs)


def _prefix(prefix):
    """(date, ts, t (seconds), ranks {tag: n}, rank "DP0 TP0", stamp) of a logging prefix; the rank tags stand in the last bracket
    (or before a "]" whose "[" was lost), after its time stamp."""
    close = prefix.rfind("]")
    tagged = prefix[prefix.rfind("[", 0, close) + 1:close] if close >= 0 else prefix
    found = STAMP.search(tagged) or STAMP.search(prefix)
    date = seconds = ts = None
    if found:
        date, ts = found.group(1), "%s:%s:%s" % found.group(2, 3, 4)
        seconds = int(found.group(2)) * 3600 + int(found.group(3)) * 60 + int(found.group(4))
        if date:
            seconds += day(date) or 0
        if found.re is STAMP and found.string is tagged:
            tagged = tagged[found.end():]
    pairs = RANK.findall(tagged)
    ranks, rank = dict((k, int(v)) for k, v in pairs), " ".join(k + v for k, v in pairs)
    return date, ts, seconds, ranks, rank, ("%s %s" % (date, ts)) if date else ts
