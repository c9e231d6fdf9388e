#!/usr/bin/env python3
"""Write the docs generated from the probes' declarations (each probe's OPTIONS, SHAPE and NOTES):
docs/probe-options.md (as `gpudiag probes --markdown` prints it) and docs/probe-data.md.

    python scripts/generated-docs.py           # rewrite them
    python scripts/generated-docs.py --check   # exit 1 naming each file that is not what the declarations give

tests/control/test_generated_docs.py checks them, and rewrites them under GPUDIAG_UPDATE_DOCS=1.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from gpudiag.cli.probes import probe_markdown  # noqa: E402
from probes import probe_info, schemas  # noqa: E402

DATA_INTRO = (
    "What each probe puts in `probes.<name>.data` of a host result. Findings and the report read these "
    "keys; a probe may add keys, never rename these. Every source fact carries `file` (relative to "
    "site-packages), `line` and `snippet`; every timing carries `method`, `samples`, `median_us`, "
    "`p10_us`, `p90_us`, `cv`."
)


def generated():
    """{path relative to the root: the text the declarations give}."""
    return {os.path.join("docs", "probe-options.md"): probe_markdown(),
            os.path.join("docs", "probe-data.md"): schemas.markdown(probe_info.SHAPES, probe_info.NOTES, DATA_INTRO)}


def stale(docs):
    """The generated files whose text on disk differs from what the declarations give."""
    out = []
    for relative, text in docs.items():
        path = os.path.join(ROOT, relative)
        current = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if current != text:
            out.append(relative)
    return out


def main(argv):
    docs = generated()
    if "--check" in argv:
        for relative in stale(docs):
            print("%s is not current: run python scripts/generated-docs.py" % relative, file=sys.stderr)
        return 1 if stale(docs) else 0
    for relative, text in docs.items():
        with open(os.path.join(ROOT, relative), "w", encoding="utf-8") as fh:
            fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
