"""What `gpudiag scan` derived of each host, kept in a file beside the host's result for `gpudiag report`.

The scan derives every remembered function of a host as it stores it (gpudiag/cli/scan_fold.py): the findings,
the answers, the appendix section. Kept in `hosts/.derived/<file>.pickle`, that slim host is what a later
report reads instead of reading, checking, cleaning and deriving the host file again (cli/report_stream.py):
a conclusion computed once. A kept file is used only when all of these hold, and the host file is read as
before otherwise (and whenever reading the kept file fails in any way):
- it was sealed with this user's key (keyed BLAKE2b over its bytes; the key lives in the user's state
  directory, mode 0600), so a run directory from elsewhere, or a file planted in one, is never unpickled;
- it was derived by this very code (a digest of gpudiag's and the probes' sources and the Python version);
- the host file is byte for byte the text it was derived from, and names the host run.json gives that file;
- it holds every result the report asks for (it is derived with no charts: a report that draws charts reads
  the host files, whose data the charts need).
Only a host derived alone, by its own name, is kept: hosts whose data agree are derived once for a stand-in
(gpudiag/derived.py), which each of them reads by its own name but which is not each one's appendix section.
GPUDIAG_DERIVED_FILES=0: none written or read.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import pickle
import stat
import sys
import threading
from pathlib import Path
from typing import Collection

from gpudiag.models import HostResult

MAGIC = b"gpudiag-derived 1\n"
_MAC_SIZE = 32
_KEY_SIZE = 32
MOST_KEPT_BYTES = 64 << 20  # a kept host is tens of KiB: a larger file is not one gpudiag wrote
KEPT_DIR = ".derived"  # under hosts/: run_loader.host_files skips names that start with a dot


def enabled() -> bool:
    return os.environ.get("GPUDIAG_DERIVED_FILES", "1") != "0"


def state_dir() -> Path:
    """Where this user's key lives: $GPUDIAG_STATE, else $XDG_STATE_HOME/gpudiag, else ~/.local/state/gpudiag."""
    given = os.environ.get("GPUDIAG_STATE")
    if given:
        return Path(given)
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "gpudiag"


def kept_path(host_file: Path) -> Path:
    return host_file.parent / KEPT_DIR / f"{host_file.stem}.pickle"


def keep(host_file: Path, text: str, host: HostResult, keys: Collection[str]) -> None:
    """Keep `host` (slim: gpudiag/derived.py), derived from `text` (what `host_file` holds) under `keys`.
    Nothing is kept where the key or the folder cannot be had: a later report then reads the host file."""
    key = _key(str(state_dir()), create=True) if enabled() else None
    if key is None:
        return
    payload = pickle.dumps(
        (code_digest(), _digest(text.encode("utf-8", "surrogatepass")), sorted(keys), host),
        protocol=pickle.HIGHEST_PROTOCOL,
    )
    target = kept_path(host_file)
    temp = target.parent / f".{target.name}.{os.getpid()}.tmp-{threading.get_ident()}"
    try:
        target.parent.mkdir(exist_ok=True)
        temp.write_bytes(MAGIC + _mac(key, payload) + payload)  # no fsync: a torn file fails its seal, and is unused
        os.replace(temp, target)
    except OSError:
        try:
            temp.unlink()
        except OSError:
            pass


def kept_hosts(files: list[Path], owners: dict[str, str], keys: Collection[str]) -> list[HostResult | None]:
    """The slim host kept for each of `files` (owners: host name by file stem, as run.json gives them), in
    order; None for a file with none that may be used, which is then read as it is."""
    key = _key(str(state_dir()), create=False) if enabled() else None
    if key is None:
        return [None] * len(files)
    wanted = frozenset(keys)
    return [_kept(path, owners.get(path.stem), wanted, key) for path in files]


def _kept(path: Path, owner: str | None, keys: frozenset[str], key: bytes) -> HostResult | None:
    try:
        if path.suffix != ".json":
            return None
        sealed = _regular_file_bytes(kept_path(path), MOST_KEPT_BYTES)
        mac, payload = sealed[len(MAGIC) : len(MAGIC) + _MAC_SIZE], sealed[len(MAGIC) + _MAC_SIZE :]
        if not sealed.startswith(MAGIC) or not hmac.compare_digest(mac, _mac(key, payload)):
            return None
        code, digest, derived_keys, host = pickle.loads(payload)  # sealed by this user: written by gpudiag
        if code != code_digest() or not keys <= set(derived_keys) or not isinstance(host, HostResult):
            return None
        if (owner is not None and host.name != owner) or digest != _digest(_regular_file_bytes(path, None)):
            return None
        return host
    except Exception:  # noqa: BLE001 - anything amiss with a kept file: the host file is read instead
        return None


def _regular_file_bytes(path: Path, most: int | None) -> bytes:
    """A regular file's bytes (not a FIFO, a device, or a link to one: reading it could block or never end);
    OSError for anything else, or for a file over `most` bytes."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or (most is not None and info.st_size > most):
            raise OSError(f"{path}: not a regular file of at most {most} bytes")
        with os.fdopen(os.dup(fd), "rb") as file:
            return file.read()
    finally:
        os.close(fd)


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=32).digest()


def _mac(key: bytes, payload: bytes) -> bytes:
    return hashlib.blake2b(payload, key=key, digest_size=_MAC_SIZE).digest()


@functools.lru_cache(maxsize=None)
def code_digest() -> bytes:
    """A digest of every file of the gpudiag and probes packages and of the Python version: derived results
    kept by other code, or read by another Python's pickle, are never used."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.blake2b(repr(sys.version_info[:3]).encode(), digest_size=32)
    for package in ("gpudiag", "probes"):
        for path in sorted((root / package).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(root)).encode("utf-8", "surrogateescape") + b"\0")
                digest.update(path.read_bytes())
    return digest.digest()


_KEYS: dict[str, bytes] = {}  # by folder: read once per process (a key not found is looked for again)


def _key(folder: str, create: bool) -> bytes | None:
    """This user's sealing key in `folder` (made when `create` and missing), or None where it cannot be had,
    or where anyone else could read or replace it."""
    if folder in _KEYS:
        return _KEYS[folder]
    path = Path(folder) / "derived.key"
    try:
        if create and not path.exists():
            Path(folder).mkdir(mode=0o700, parents=True, exist_ok=True)
            _make_key(path)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        try:
            info = os.fstat(fd)
            key = os.read(fd, _KEY_SIZE + 1)
        finally:
            os.close(fd)
    except OSError:
        return None
    mine = info.st_uid == os.getuid() and not info.st_mode & (stat.S_IRWXG | stat.S_IRWXO)
    if not (mine and stat.S_ISREG(info.st_mode) and len(key) == _KEY_SIZE):
        return None
    _KEYS[folder] = key
    return key


def _make_key(path: Path) -> None:
    """A new random key, written whole under a temp name and linked in: two scans starting at once agree on
    the one that was linked first."""
    temp = path.parent / f".{path.name}.{os.getpid()}.tmp-{threading.get_ident()}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, os.urandom(_KEY_SIZE))
    finally:
        os.close(fd)
    try:
        os.link(temp, path)
    except FileExistsError:
        pass
    finally:
        os.unlink(temp)
