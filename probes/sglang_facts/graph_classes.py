"""CUDA-graph runner classes and breakable-graph helpers, found line by line in pre-filtered files."""
import re

RUNNER_CLASS = re.compile(r"^[ \t]*class[ \t]+(\w*[Gg]raph\w*Runner\w*)[ \t]*(\(([^)]*)\))?")
BREAKABLE_DEF = re.compile(r"^(class|def)[ \t]+(\w*[Bb]reakable\w*|eager_on_graph)\b")


def find_graph_runners(tree):
    runners = []
    for rel, line, text in tree.line_hits(b"GraphRunner", tree.containing(b"GraphRunner")):
        match = RUNNER_CLASS.match(text)
        if match:
            runners.append(tree.evidence(rel, line, module=tree.module_of(rel), bases=(match.group(3) or "").strip(),
                                         **{"class": match.group(1)}))
    return runners


def find_breakable(tree):
    """Top-level breakable-graph classes and functions (eager islands inside a captured graph).

    Only modules about graphs are read (their path names a graph): helpers live in modules named for them.
    """
    graph_files = [rel for rel in tree.files if "graph" in rel.lower()]
    helpers = []
    candidates = [rel for rel in graph_files if b"reakable" in tree.read(rel)]
    for needle in (b"reakable", b"eager_on_graph"):
        for rel, line, text in tree.line_hits(needle, candidates):
            match = BREAKABLE_DEF.match(text)
            if match and not match.group(2).lower().startswith("test"):
                helpers.append(tree.evidence(rel, line, module=tree.module_of(rel), name=match.group(2),
                                             kind=match.group(1) if match.group(1) == "class" else "function"))
    return sorted(helpers, key=lambda h: (h["file"], h["line"]))
