#!/usr/bin/env python3
"""Write docs/probe-data.md from the probes' declared data shapes (probes/data_shapes.py).

    python scripts/probe-data-doc.py           # rewrite the file
    python scripts/probe-data-doc.py --check   # exit 1 when the file is not what the declarations give
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from probes import data_notes, data_shapes, schemas  # noqa: E402

DOC = os.path.join(ROOT, "docs", "probe-data.md")


def main(argv):
    text = schemas.markdown(data_shapes.SHAPES, data_notes.NOTES, data_notes.INTRO)
    current = open(DOC, encoding="utf-8").read() if os.path.exists(DOC) else None
    if "--check" in argv:
        if current != text:
            print("docs/probe-data.md is not current: run python scripts/probe-data-doc.py", file=sys.stderr)
            return 1
        return 0
    with open(DOC, "w", encoding="utf-8") as fh:
        fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
