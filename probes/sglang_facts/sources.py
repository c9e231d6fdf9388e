"""The installed package as a source tree: every .py file read once as bytes, parsed only on demand.

Speed comes from never parsing what a byte search rules out: finders ask for the files that contain
a needle, then parse only those. A file that does not parse is recorded, never fatal.
"""
import ast
import os
import re

SNIPPET_CHARS = 160
DEF_LINE = re.compile(r"^[ \t]*(async[ \t]+)?def[ \t]")
BLOCK_START = re.compile(r"(async[ \t]+)?def[ \t]|class[ \t]|@")


def read_bytes(path):
    """A whole file through os.read: thousands of small files, so no buffered file objects."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        data = os.read(fd, size + 1)
        if len(data) <= size:
            return data
        chunks = [data]
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


def _indent(text):
    return len(text) - len(text.lstrip())


class SourceTree(object):
    """The .py files of one package under `root` (the directory file paths are relative to)."""

    def __init__(self, root, package="sglang", skip_dirs=("test",)):
        self.root = root
        self.package = package
        self.package_dir = os.path.join(root, package)
        self.skip = set(os.path.join(self.package_dir, d) for d in skip_dirs)
        self._bytes = None
        self._order = []
        self._trees = {}
        self._lines = {}
        self._regions = {}
        self.parse_errors = []
        self.cited = set()

    # -- files -------------------------------------------------------------
    def _load(self):
        if self._bytes is not None:
            return
        self._bytes = {}
        stack = [self.package_dir]
        while stack:
            folder = stack.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                try:
                    if entry.is_dir():
                        if entry.path not in self.skip and not entry.name.startswith((".", "__pycache__")):
                            stack.append(entry.path)
                    elif entry.name.endswith(".py"):
                        rel = os.path.relpath(entry.path, self.root).replace(os.sep, "/")
                        self._bytes[rel] = read_bytes(entry.path)
                        self._order.append(rel)
                except OSError:
                    continue
        self._order.sort()

    @property
    def files(self):
        self._load()
        return list(self._order)

    def read(self, rel):
        self._load()
        return self._bytes.get(rel)

    def containing(self, needle):
        """Files whose bytes contain needle (bytes or str)."""
        self._load()
        if not isinstance(needle, bytes):
            needle = needle.encode("utf-8")
        data = self._bytes
        return [rel for rel in self._order if needle in data[rel]]

    def line_hits(self, needle, files):
        """(rel, line number, line text) for every line holding needle; a find loop, no regex, no parse."""
        if not isinstance(needle, bytes):
            needle = needle.encode("utf-8")
        for rel in files:
            data = self.read(rel) or b""
            start, line, counted = data.find(needle), 1, 0
            while start >= 0:
                line += data.count(b"\n", counted, start)
                counted = start
                begin = data.rfind(b"\n", 0, start) + 1
                end = data.find(b"\n", start)
                yield rel, line, data[begin:end if end >= 0 else len(data)].decode("utf-8", "replace")
                start = data.find(needle, end if end >= 0 else len(data))

    def search(self, pattern, files, flags=re.M):
        """(rel, line, match) for a bytes regex over the given files, without parsing them."""
        regex = re.compile(pattern, flags)
        for rel in files:
            data = self.read(rel) or b""
            for match in regex.finditer(data):
                line = data.count(b"\n", 0, match.start()) + 1
                yield rel, line, match

    # -- modules -----------------------------------------------------------
    def module_of(self, rel):
        parts = rel[:-3].split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        return ".".join(parts)

    def file_of(self, module):
        """The file of a dotted module inside this tree, or None."""
        self._load()
        base = module.replace(".", "/")
        for rel in (base + ".py", base + "/__init__.py"):
            if rel in self._bytes:
                return rel
        return None

    def is_package(self, module):
        return (self.file_of(module) or "").endswith("/__init__.py")

    # -- parsing and evidence -----------------------------------------------
    def tree(self, rel):
        """The AST of a file, or None when it does not parse (recorded in parse_errors)."""
        if rel in self._trees:
            return self._trees[rel]
        data = self.read(rel)
        tree = None
        if data is not None:
            try:
                tree = ast.parse(data, filename=rel)  # bytes: a BOM or coding cookie is honoured
            except (SyntaxError, ValueError) as exc:
                self.parse_errors.append({"file": rel, "line": getattr(exc, "lineno", None),
                                          "error": "%s: %s" % (type(exc).__name__, getattr(exc, "msg", exc))})
        self._trees[rel] = tree
        return tree

    def function_at(self, rel, line):
        """The AST of the function around a line, parsed alone (real line numbers); whole file if that fails."""
        lines = self.lines(rel)
        target = _indent(lines[line - 1]) if 0 < line <= len(lines) else 0
        start = line - 1
        while start >= 0 and not (DEF_LINE.match(lines[start]) and _indent(lines[start]) < target):
            start -= 1
        if start < 0:
            return None  # not inside a function
        depth = _indent(lines[start])
        end = line
        while end < len(lines) and not (lines[end].strip() and _indent(lines[end]) <= depth and
                                         BLOCK_START.match(lines[end].lstrip())):
            end += 1
        if (rel, start) in self._regions:
            return self._regions[(rel, start)]
        region = "\n".join(lines[start:end]) + "\n"
        prefix = "if 1:\n" if depth else ""
        try:
            parsed = ast.parse(prefix + region, filename=rel)
        except (SyntaxError, ValueError):
            return self.tree(rel)
        ast.increment_lineno(parsed, start - (1 if depth else 0))
        if depth:  # drop the `if 1:` wrapper so it never reads as a condition
            parsed = ast.Module(body=parsed.body[0].body, type_ignores=[])
        self._regions[(rel, start)] = parsed
        return parsed

    def statement_at(self, rel, line, max_lines=80):
        """The AST of the one statement starting at a line, parsed alone (real line numbers), or None.

        A parse is tried once the brackets balance (strings holding brackets can fool the count, so
        every length is tried as a last resort).
        """
        lines = self.lines(rel)
        if not 0 < line <= len(lines):
            return None
        depth = _indent(lines[line - 1])
        ends, balance = [], 0
        for end in range(line, min(len(lines), line - 1 + max_lines) + 1):
            text = lines[end - 1]
            if end > line and text.strip() and _indent(text) < depth:
                break
            balance += sum(text.count(c) for c in "([{") - sum(text.count(c) for c in ")]}")
            ends.append((balance > 0, end))
        for _, end in sorted(ends):  # balanced candidates first, in order
            try:
                parsed = ast.parse("\n".join(text[depth:] for text in lines[line - 1:end]) + "\n")
            except (SyntaxError, ValueError):
                continue
            if len(parsed.body) != 1:
                return None
            ast.increment_lineno(parsed, line - 1)
            return parsed.body[0]
        return None

    def lines(self, rel):
        if rel not in self._lines:
            data = self.read(rel) or b""
            self._lines[rel] = data.decode("utf-8-sig", "replace").splitlines()
        return self._lines[rel]

    def snippet(self, rel, line):
        lines = self.lines(rel)
        if not line or line > len(lines):
            return ""
        text = lines[line - 1].strip()
        return text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS - 3] + "..."

    def evidence(self, rel, line, **extra):
        """A cited source fact: file relative to the root, line and the line's text."""
        self.cited.add(rel)
        fact = {"file": rel, "line": line, "snippet": self.snippet(rel, line)}
        fact.update(extra)
        return fact
