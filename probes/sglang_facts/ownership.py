"""Which dist-info belongs to the sglang copy that imports, and which of several is the installed one.

A dist-info belongs when its RECORD lists this copy's `__init__.py`, when its top_level.txt names the
package and it sits beside it, or when its direct_url.json points at the checkout holding it. Several
may belong (a leftover `sglang-0.5.14.dist-info` beside 0.5.20): the one whose RECORD hashes match the
files on disk is the one that was installed.
"""
import json
import os

from probes.sglang_facts.integrity import file_digest, read_record

PACKAGE = "sglang"
SAMPLE_PER_RECORD = 16
VERSION_FILES = ("sglang/__init__.py", "sglang/version.py", "sglang/_version.py")
GIT_LEVELS = 8


def belongs(dist_info, package_dir):
    """'record', 'top_level' or 'direct_url' when this dist-info describes the copy at package_dir, else None."""
    package = os.path.realpath(package_dir)
    parent = os.path.dirname(dist_info)
    url = _editable_dir(dist_info)
    if url and (package + os.sep).startswith(os.path.realpath(url) + os.sep):
        return "direct_url"
    record = read_record(dist_info)
    init = PACKAGE + "/__init__.py"
    if record and init in record and \
            os.path.realpath(os.path.join(parent, init)) == os.path.join(package, "__init__.py"):
        return "record"
    if os.path.realpath(parent) == os.path.dirname(package) and PACKAGE in _top_level(dist_info):
        return "top_level"
    return None


def best_owner(owners, site):
    """The owner whose RECORD matches the most sampled files on disk; each owner gets matched/checked."""
    if len(owners) == 1:
        return owners[0]
    records = dict((o["path"], read_record(o["path"]) or {}) for o in owners)
    sample = set(VERSION_FILES)
    for record in records.values():
        names = sorted(n for n in record if n.startswith(PACKAGE + "/") and n.endswith(".py"))
        step = max(1, len(names) // SAMPLE_PER_RECORD)
        sample.update(names[::step][:SAMPLE_PER_RECORD])
    digests = {}
    for rel in sorted(sample):
        try:
            digests[rel] = file_digest(os.path.join(site, rel))
        except OSError:
            digests[rel] = None
    for owner in owners:
        record = records[owner["path"]]
        listed = [rel for rel in sorted(sample) if rel in record]
        owner["checked"] = len(listed)
        owner["matched"] = sum(1 for rel in listed if digests.get(rel) == record[rel])
    return max(owners, key=lambda o: (o["matched"] / float(o["checked"] or 1), o["matched"]))


def git_work_tree(package_dir):
    """The nearest folder above package_dir holding `.git` (a directory, or a file for worktrees), or None."""
    folder = os.path.realpath(package_dir)
    for _ in range(GIT_LEVELS):
        if os.path.exists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return None


def _top_level(dist_info):
    try:
        with open(os.path.join(dist_info, "top_level.txt"), "rb") as handle:
            return handle.read(65536).decode("utf-8", "replace").split()
    except OSError:
        return []


def _editable_dir(dist_info):
    try:
        with open(os.path.join(dist_info, "direct_url.json"), "rb") as handle:
            doc = json.loads(handle.read(1 << 20).decode("utf-8"))
    except (OSError, ValueError):
        return None
    url = doc.get("url") if isinstance(doc, dict) else None
    if not isinstance(url, str) or not url.startswith("file://") or \
            not (doc.get("dir_info") or {}).get("editable"):
        return None
    return url[len("file://"):]
