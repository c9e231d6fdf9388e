"""Files written whole or not at all (temp file, fsync, rename), and the temp files of killed writers removed."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

# Temp files name their writer's pid, so the next run can tell a killed writer's leftovers from a live one's.
_TEMP = re.compile(r"^\..+\.(?P<pid>\d+)\.tmp-[^/]*$")


def write_text_atomic(path: Path, text: str) -> None:
    """Write a temp file beside `path`, fsync it, rename it over: readers see the old or the new file,
    a crash leaves no half-written one and no temp file behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temp_files(root: Path) -> list[Path]:
    """Remove the temp files of writers that are gone (a run killed mid-write); a live writer's stay."""
    folders = [root]
    runs = root / "runs"
    try:
        for run_dir in runs.iterdir():
            folders += [run_dir, run_dir / "hosts", run_dir / "hosts" / ".derived"]
    except OSError:
        pass
    removed = []
    for folder in folders:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            match = _TEMP.match(name)
            if match and not _pid_alive(int(match.group("pid"))):
                try:
                    os.unlink(folder / name)
                    removed.append(folder / name)
                except OSError:
                    pass
    return removed
