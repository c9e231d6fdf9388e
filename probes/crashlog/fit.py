"""Advice fitted to what a server already runs with: the clauses of a piece of advice that propose a flag in use
are dropped and a note says so. Used on the host for the flags a log shows its server ran with, and on the
control side for a live server's own flags (gpudiag/findings/crash_context.py). Pure text, standard library."""
import re

FLAG = re.compile(r"--[a-z][a-z0-9-]+")
# Where advice can be cut without cutting a clause: "; ", ", or ", ", and ", and a sentence's end (a period
# before a capital: "e.g. 32" stays whole).
CLAUSE_BREAK = re.compile(r"(;\s+|,\s+(?:or|and)\s+|(?<=\.)\s+(?=[A-Z(]))")


def without_flags(text, used, note, rename=None):
    """`text` less the clauses naming a flag in `used`, ending with "(`note` FLAGS)."; unchanged when it names
    none. `rename` maps a dropped flag to the spelling the note should quote (the switch the server used)."""
    used = set(used)
    if not text or not used or not set(FLAG.findall(text)) & used:
        return text
    parts = CLAUSE_BREAK.split(text)
    kept, dropped = [], set()     # kept: (clause, the separator after it)
    for at in range(0, len(parts), 2):
        piece, sep = parts[at], parts[at + 1] if at + 1 < len(parts) else ""
        named = set(FLAG.findall(piece)) & used
        if not named:
            kept.append((piece, sep))
            continue
        dropped |= named
        if kept:                  # the clause before takes the dropped one's place in the sentence
            before = kept[-1][0].rstrip()
            kept[-1] = (before + "." if piece.rstrip().endswith(".") and not before.endswith(".") else before, sep)
    said = "".join(piece + sep for piece, sep in kept).strip().rstrip(";,. ")
    if said[:1].islower():
        said = said[0].upper() + said[1:]
    shown = sorted(set((rename or {}).get(flag, flag) for flag in dropped))
    said_note = "%s %s" % (note, ", ".join(shown))
    return "%s (%s)." % (said, said_note) if said else "Nothing to add: %s." % said_note
