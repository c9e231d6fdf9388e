"""The installed version: dist-info METADATA and the `__version__` literal (whose file moved)."""
import os

LITERAL = rb"^__version__[ \t]*(?::[^=\n]*)?=[ \t]*(?:\w+[ \t]*=[ \t]*)*['\"]([^'\"\n]+)['\"]"


def find_version(tree, dist_info=None):
    """{version, version_source, sources, metadata_version, mismatch}."""
    sources = []
    top = [rel for rel in tree.files if rel.count("/") == 1]
    deeper = [rel for rel in tree.files if rel.count("/") > 1 and "version" in rel.rsplit("/", 1)[-1]]
    for rel, line, match in tree.search(LITERAL, [r for r in top + deeper if b"__version__" in tree.read(r)]):
        sources.append(tree.evidence(rel, line, version=match.group(1).decode("utf-8", "replace"), kind="literal"))
    metadata = metadata_version(dist_info)
    if metadata:
        sources.append(metadata)
    literal = next((s for s in sources if s["kind"] == "literal"), None)
    chosen = literal or metadata
    versions = sorted(set(s["version"] for s in sources))
    return {"version": chosen["version"] if chosen else None,
            "version_source": chosen, "version_sources": sources,
            "metadata_version": metadata["version"] if metadata else None,
            "version_mismatch": len(versions) > 1}


def metadata_version(dist_info):
    """`Version:` from a dist-info METADATA (or egg-info PKG-INFO) as a cited fact."""
    if not dist_info:
        return None
    for name in ("METADATA", "PKG-INFO"):
        path = os.path.join(dist_info, name)
        try:
            with open(path, "rb") as handle:
                head = handle.read(65536).decode("utf-8", "replace")
        except OSError:
            continue
        for number, text in enumerate(head.splitlines(), 1):
            if text.startswith("Version:"):
                rel = os.path.basename(dist_info) + "/" + name
                return {"file": rel, "line": number, "snippet": text.strip(),
                        "version": text.split(":", 1)[1].strip(), "kind": "metadata"}
            if not text.strip():
                break  # headers end at the first blank line
    return None
