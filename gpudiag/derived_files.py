"""What `gpudiag scan` derived of each host, kept in a file beside the host's result for `gpudiag report`.

The scan derives every remembered function of a host as it stores it (gpudiag/cli/scan_fold.py): the findings,
the answers, the appendix section. Kept in `hosts/.derived/<file>.pickle`, that slim host is what a later
report reads instead of reading, checking, cleaning and deriving the host file again (cli/report_stream.py):
a conclusion computed once. A kept file is used only when all of these hold, and the host file is read as
before otherwise (and whenever reading the kept file fails in any way):
- it was sealed with this user's key (keyed BLAKE2b over its bytes; gpudiag/user_key.py), so a run directory
  from elsewhere, or a file planted in one, is never unpickled;
- it was derived by this very code (a digest of gpudiag's and the probes' sources and the Python version, taken
  when this module is imported, before anything is derived) and with the same arguments (the checks the run was
  asked for; no charts: a report that draws charts reads the host files, whose data the charts need);
- the host file is byte for byte the text it was derived from, and names the host run.json gives that file;
- it holds every result the report asks for.
The digests are a header under the seal, checked before anything is unpickled.
Only a host derived alone, by its own name, is kept: hosts whose data agree are derived once for a stand-in
(gpudiag/derived.py), which each of them reads by its own name but which is not each one's appendix section.
GPUDIAG_DERIVED_FILES=0: none written or read.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any, Collection

from gpudiag.models import HostResult
from gpudiag.user_key import user_key

MAGIC = b"gpudiag-derived 2\n"
_DIGEST = 32  # bytes of each digest and of the seal
MOST_KEPT_BYTES = 64 << 20  # a kept host is tens of KiB: a larger file is not one gpudiag wrote
KEPT_DIR = ".derived"  # under hosts/: run_loader.host_files skips names that start with a dot


def enabled() -> bool:
    return os.environ.get("GPUDIAG_DERIVED_FILES", "1") != "0" and CODE is not None


def kept_path(host_file: Path) -> Path:
    return host_file.parent / KEPT_DIR / f"{host_file.stem}.pickle"


def keep(host_file: Path, text: str, host: HostResult, keys: Collection[str], args: dict[str, Any]) -> None:
    """Keep `host` (slim: gpudiag/derived.py), derived from `text` (what `host_file` holds) under `keys`, with
    `args` (the remembered functions' other arguments, by key). Nothing is kept where anything fails (no key, a
    folder that cannot be written, a result that cannot be pickled): a later report then reads the host file."""
    try:
        key = user_key(create=True) if enabled() else None
        if key is None or CODE is None:
            return
        header = CODE + _args_digest(args) + _digest(text.encode("utf-8", "surrogatepass"))
        body = header + pickle.dumps((sorted(keys), host), protocol=pickle.HIGHEST_PROTOCOL)
        target = kept_path(host_file)
        target.parent.mkdir(exist_ok=True)
        _write_new(target, MAGIC + _mac(key, body) + body)
    except Exception:  # noqa: BLE001 - keeping is a saving for later reports, never a reason for the scan to fail
        return


def kept_hosts(
    files: list[Path], owners: dict[str, str], keys: Collection[str], args: dict[str, Any]
) -> list[HostResult | None]:
    """The slim host kept for each of `files` (owners: host name by file stem, as run.json gives them), derived
    with `args`, in order; None for a file with none that may be used, which is then read as it is."""
    key = user_key(create=False) if enabled() else None
    if key is None:
        return [None] * len(files)
    wanted, given = frozenset(keys), _args_digest(args)
    return [_kept(path, owners.get(path.stem), wanted, given, key) for path in files]


def _kept(path: Path, owner: str | None, keys: frozenset[str], args: bytes, key: bytes) -> HostResult | None:
    try:
        if path.suffix != ".json":
            return None
        sealed = _regular_file_bytes(kept_path(path), MOST_KEPT_BYTES)
        mac, body = sealed[len(MAGIC) : len(MAGIC) + _DIGEST], sealed[len(MAGIC) + _DIGEST :]
        if not sealed.startswith(MAGIC) or not hmac.compare_digest(mac, _mac(key, body)):
            return None
        code, derived_with, digest = body[:_DIGEST], body[_DIGEST : 2 * _DIGEST], body[2 * _DIGEST : 3 * _DIGEST]
        if code != CODE or derived_with != args or digest != _digest(_regular_file_bytes(path, None)):
            return None
        derived_keys, host = pickle.loads(body[3 * _DIGEST :])  # sealed with this user's key: gpudiag wrote it
        if not keys <= set(derived_keys) or not isinstance(host, HostResult):
            return None
        return host if owner is None or host.name == owner else None
    except Exception:  # noqa: BLE001 - anything amiss with a kept file: the host file is read instead
        return None


def _regular_file_bytes(path: Path, most: int | None) -> bytes:
    """A regular file's bytes, at most `most` (not a FIFO, a device, or a link to one: reading it could block or
    never end); OSError for anything else, or for a longer file."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: not a regular file")
        with os.fdopen(os.dup(fd), "rb") as file:
            data = file.read() if most is None else file.read(most + 1)
    finally:
        os.close(fd)
    if most is not None and len(data) > most:
        raise OSError(f"{path}: over {most} bytes")
    return data


def _write_new(target: Path, data: bytes) -> None:
    """`data` as `target`, through a temp file of its own (random name, never a link) renamed over it; no fsync:
    a torn file fails its seal and is not used."""
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.tmp-", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.replace(temp, target)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=_DIGEST).digest()


def _mac(key: bytes, body: bytes) -> bytes:
    return hashlib.blake2b(body, key=key, digest_size=_DIGEST).digest()


def _args_digest(args: dict[str, Any]) -> bytes:
    """The remembered functions' other arguments (plain values: names of checks, charts by name), as a digest."""
    return _digest(repr(sorted(args.items())).encode("utf-8", "surrogatepass"))


def _code_digest() -> bytes | None:
    """A digest of every file of the gpudiag and probes packages and of the Python version, or None where they
    cannot all be read (nothing is then kept or read): results kept by other code are never used."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.blake2b(repr(sys.version_info[:3]).encode(), digest_size=_DIGEST)
    try:
        for package in ("gpudiag", "probes"):
            for path in sorted((root / package).rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    digest.update(str(path.relative_to(root)).encode("utf-8", "surrogateescape") + b"\0")
                    digest.update(path.read_bytes())
    except OSError:
        return None
    return digest.digest()


CODE = _code_digest()  # taken on import, before anything is derived: the code that runs, not what is on disk later
