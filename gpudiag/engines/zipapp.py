"""Builds the probe bundle as one self-contained, reproducible Python zipapp (standard library only).

Entries are sorted, timestamps and permissions fixed, and nothing is compressed (deflate output
depends on the zlib build), so the same gpudiag version and probe set always give the same bytes.
"""

from __future__ import annotations

import hashlib
import io
import zipfile

from gpudiag import __version__
from gpudiag.bundle import probe_modules

SHEBANG = b"#!/usr/bin/env python3\n"
FIXED_DATE = (1980, 1, 1, 0, 0, 0)  # the earliest date a zip entry can hold
FILE_MODE = 0o100644 << 16  # regular file, rw-r--r--

MAIN_TEMPLATE = """# gpudiag {version} probe bundle. Run with the host's own Python 3.9+:
#   python3 gpudiag-probes.pyz [--probes a,b] [--host NAME]
# It prints one framed JSON document; read it back with `gpudiag ingest`.
import sys
from probes.__main__ import main
sys.exit(main(sys.argv[1:], defaults={defaults}))
"""


def module_path(dotted: str, is_package: bool) -> str:
    """`probes.sub` (package) → `probes/sub/__init__.py`; `probes.env` → `probes/env.py`."""
    base = dotted.replace(".", "/")
    return f"{base}/__init__.py" if is_package else f"{base}.py"


def bundle_entries(probes: list[str] | None) -> list[tuple[str, bytes]]:
    """(path inside the archive, bytes) for every entry, sorted by path."""
    # A Python literal (not JSON: None, not null), keys in a fixed order for reproducible bytes.
    defaults = {"probes": list(probes) if probes else None, "version": __version__}
    entries = {module_path(name, is_pkg): source.encode("utf-8") for name, (is_pkg, source) in probe_modules().items()}
    if "probes/__main__.py" not in entries:
        raise ValueError("probes/__main__.py is missing from the probes package; the bundle needs it")
    main = MAIN_TEMPLATE.format(version=__version__, defaults=repr(defaults))
    entries["__main__.py"] = main.encode("utf-8")
    return sorted(entries.items())


def build_zipapp(probes: list[str] | None = None) -> bytes:
    """The whole bundle: a shebang line followed by a zip archive."""
    buffer = io.BytesIO()
    buffer.write(SHEBANG)
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for path, data in bundle_entries(probes):
            info = zipfile.ZipInfo(path, date_time=FIXED_DATE)
            info.create_system = 3  # unix, whatever machine builds it
            info.external_attr = FILE_MODE
            info.compress_type = zipfile.ZIP_STORED
            archive.writestr(info, data)
        archive.comment = f"gpudiag {__version__} probe bundle".encode("utf-8")
    return buffer.getvalue()


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
