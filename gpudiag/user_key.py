"""This user's secret key, for sealing what gpudiag keeps on disk and must trust when it reads it back
(gpudiag/derived_files.py). 32 random bytes in `derived.key`, made once, in the user's state directory:
$GPUDIAG_STATE, else $XDG_STATE_HOME/gpudiag, else ~/.local/state/gpudiag. The key is used only where no one else
could read or replace it: the directory and the file owned by this user, neither open to group or others, the
file a regular one; anything else (and any error) leaves the caller without a key, never with an error.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

KEY_SIZE = 32
KEY_NAME = "derived.key"
_KEYS: dict[str, bytes] = {}  # by directory: read once per process (a key not found is looked for again)


def state_dir() -> Path:
    given = os.environ.get("GPUDIAG_STATE")
    if given:
        return Path(given)
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "gpudiag"


def user_key(create: bool) -> bytes | None:
    """The key (made first when `create` and none is there, or the one there is not a whole key), or None."""
    folder = str(state_dir())
    if folder in _KEYS:
        return _KEYS[folder]
    try:
        if create:
            Path(folder).mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _private(os.stat(folder), stat.S_IWGRP | stat.S_IWOTH):
            return None  # others could swap the key file for one of theirs
        key = _read_key(Path(folder) / KEY_NAME)
        if key is None and create:
            _make_key(Path(folder))
            key = _read_key(Path(folder) / KEY_NAME)
    except OSError:
        return None
    if key is not None:
        _KEYS[folder] = key
    return key


def _private(info: os.stat_result, closed: int) -> bool:
    return info.st_uid == os.getuid() and not info.st_mode & closed


def _read_key(path: Path) -> bytes | None:
    """The key in `path`: a regular file of this user's, no one else's to read or write, of KEY_SIZE bytes; None
    when there is none (or a broken one). Opened without following a link or blocking on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    try:
        info = os.fstat(fd)
        if not (stat.S_ISREG(info.st_mode) and _private(info, stat.S_IRWXG | stat.S_IRWXO)):
            raise OSError(f"{path}: not a file of this user's alone")
        key = os.read(fd, KEY_SIZE + 1)
    finally:
        os.close(fd)
    return key if len(key) == KEY_SIZE else None


def _make_key(folder: Path) -> None:
    """A new key, written whole and synced under a temp name of its own, then put in place: linked where there is
    no key (two processes starting at once agree on the one linked first), or over a broken one (a crash left it
    short)."""
    fd, temp = tempfile.mkstemp(prefix=f".{KEY_NAME}.{os.getpid()}.tmp-", dir=folder)  # 0600, never a link
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(os.urandom(KEY_SIZE))
            file.flush()
            os.fsync(file.fileno())
        try:
            os.link(temp, folder / KEY_NAME)
        except FileExistsError:
            if _read_key(folder / KEY_NAME) is None:
                os.replace(temp, folder / KEY_NAME)
    finally:
        try:
            os.unlink(temp)
        except FileNotFoundError:
            pass
