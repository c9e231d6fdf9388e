#!/usr/bin/env python3
"""Write docs/probe-data.md from the probes' declared data shapes (each probe's SHAPE and NOTES, read through probes/probe_info.py).

    python scripts/probe-data-doc.py           # rewrite the file
    python scripts/probe-data-doc.py --check   # exit 1 when the file is not what the declarations give
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from probes import probe_info, schemas  # noqa: E402

DOC = os.path.join(ROOT, "docs", "probe-data.md")
INTRO = (
    "What each probe puts in `probes.<name>.data` of a host result. Findings and the report read these "
    "keys; a probe may add keys, never rename these. Every source fact carries `file` (relative to "
    "site-packages), `line` and `snippet`; every timing carries `method`, `samples`, `median_us`, "
    "`p10_us`, `p90_us`, `cv`."
)


def main(argv):
    text = schemas.markdown(probe_info.SHAPES, probe_info.NOTES, INTRO)
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
