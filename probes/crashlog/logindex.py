"""A log's lines and their joined text, so that a pattern or a word is searched once over the whole text
(in C) and its hits mapped back to lines, instead of once per line."""
import bisect


class LogIndex(object):
    """The lines (normalize.logical_lines) with their joined text and where each line starts in it."""

    def __init__(self, lines):
        self.lines = lines
        self.whole = "\n".join(line.text for line in lines)
        self._low = None
        self.starts, offset = [], 0
        for line in lines:
            self.starts.append(offset)
            offset += len(line.text) + 1

    @property
    def low(self):
        if self._low is None:
            self._low = self.whole.lower()
        return self._low

    def line_at(self, offset):
        return self.lines[bisect.bisect_right(self.starts, offset) - 1]

    def first(self, pattern):
        found = pattern.search(self.whole)
        return self.line_at(found.start()) if found else None

    def every(self, pattern):
        return [self.line_at(m.start()) for m in pattern.finditer(self.whole)]

    def matches(self, pattern):
        """(line, match) for every match of the pattern in the whole text."""
        return [(self.line_at(m.start()), m) for m in pattern.finditer(self.whole)]

    def numbers_with(self, words, lower=False):
        """Numbers of the lines holding any of the words (plain substrings, found at memchr speed); with
        `lower`, lower-case words in the lower-cased text (None when lower-casing moved the offsets)."""
        whole = self.low if lower else self.whole
        if len(whole) != len(self.whole):
            return None
        found = set()
        for word in words:
            at = whole.find(word)
            while at >= 0:
                line = self.line_at(at)
                found.add(line.number)
                at = whole.find(word, self.starts[line.number - 1] + len(line.text) + 1)
        return found
