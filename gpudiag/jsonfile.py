"""Reading one JSON document from a file, with errors that name the file (and line) in one sentence."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_json(path: Path, error: type[Exception] = ValueError) -> Any:
    """The parsed document; `error` carries "PATH: cannot read: …" or "PATH:LINE: not valid JSON: …"."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise error(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
