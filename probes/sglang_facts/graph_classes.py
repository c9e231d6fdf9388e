"""CUDA-graph runner classes and breakable-graph helpers, found by a line regex over pre-filtered files."""
import re

RUNNER_CLASS = rb"^[ \t]*class[ \t]+(\w*(?:Graph|graph)\w*Runner\w*)[ \t]*(\(([^)\n]*)\))?"
BREAKABLE_DEF = rb"^(class|def)[ \t]+(\w*[Bb]reakable\w*|eager_on_graph)\b"


def find_graph_runners(tree):
    runners = []
    for rel, line, match in tree.search(RUNNER_CLASS, tree.containing(b"GraphRunner")):
        bases = match.group(3).decode("utf-8", "replace").strip() if match.group(3) else ""
        runners.append(tree.evidence(rel, line, module=tree.module_of(rel), bases=bases,
                                     **{"class": match.group(1).decode()}))
    return runners


def find_breakable(tree):
    """Top-level breakable-graph classes and functions (eager islands inside a captured graph)."""
    helpers = []
    for rel, line, match in tree.search(BREAKABLE_DEF, tree.containing(b"reakable")):
        if match.group(2).lower().startswith(b"test"):
            continue  # a test inside some package's tests folder is not a helper
        helpers.append(tree.evidence(rel, line, module=tree.module_of(rel), name=match.group(2).decode(),
                                     kind="class" if match.group(1) == b"class" else "function"))
    return helpers
