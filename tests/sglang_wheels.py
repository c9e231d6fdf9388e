"""Real sglang wheels for tests: downloaded once into a cache outside the repo, unpacked once, reused.

CACHE is $GPUDIAG_WHEEL_CACHE or ~/.cache/gpudiag-wheels. A wheel missing from it is fetched with
`python -m pip download --no-deps sglang==X`; without a network the caller gets a skip reason.
Each wheel is unpacked into CACHE/unpacked/sglang-X/ (a site-packages), marked complete by a stamp
file so an interrupted unpack is redone. Nothing of sglang is ever imported or committed.

    from tests.sglang_wheels import site_packages_for, SkipWheel
    site = site_packages_for("0.5.23")      # Path of a directory holding sglang/ and its dist-info
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from pathlib import Path

# 0.4.6: the oldest release read (enum algorithms, version.py literal); 0.5.5: algorithms registered by
# register_speculative_algorithm(...) (0.5.5-0.5.7). Both are pure-python wheels of 1-3 MB.
VERSIONS = ("0.4.6", "0.4.10", "0.5.5", "0.5.11", "0.5.14", "0.5.23")
STAMP = ".gpudiag-unpacked"
DOWNLOAD_TIMEOUT = 600
_lock = threading.Lock()


class SkipWheel(Exception):
    """The wheel is not in the cache and could not be downloaded; the message says why."""


def cache_dir() -> Path:
    return Path(os.environ.get("GPUDIAG_WHEEL_CACHE") or Path.home() / ".cache" / "gpudiag-wheels")


def wheel_path(version: str) -> Path:
    """The cached wheel file for a version, downloading it first when missing."""
    cache = cache_dir()
    found = sorted(glob.glob(str(cache / f"sglang-{version}-*.whl")))
    if found:
        return Path(found[0])
    cache.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q",
            f"sglang=={version}", "-d", str(cache)]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SkipWheel(f"sglang {version}: download failed ({exc})") from None
    found = sorted(glob.glob(str(cache / f"sglang-{version}-*.whl")))
    if proc.returncode != 0 or not found:
        tail = (proc.stderr.strip().splitlines() or ["no wheel"])[-1]
        raise SkipWheel(f"sglang {version}: pip download failed (no network?): {tail[:200]}")
    return Path(found[0])


def site_packages_for(version: str) -> Path:
    """A site-packages directory holding the unpacked wheel of `version` (unpacked once, then reused)."""
    target = cache_dir() / "unpacked" / f"sglang-{version}"
    with _lock:
        if (target / STAMP).is_file():
            return target
        wheel = wheel_path(version)
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".sglang-{version}-", dir=target.parent))
        try:
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(scratch)
            (scratch / STAMP).write_text(wheel.name + "\n")
            if (target / STAMP).is_file():  # another test process finished first: keep its copy
                shutil.rmtree(scratch, ignore_errors=True)
                return target
            if target.exists():
                shutil.rmtree(target)  # an interrupted unpack
            os.replace(scratch, target)
        except OSError:
            shutil.rmtree(scratch, ignore_errors=True)
            if not (target / STAMP).is_file():
                raise
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
    return target


def copy_site(version: str, dest: Path, only: list[str] | None = None) -> Path:
    """A private, writable copy of an unpacked wheel (or of some of its files) for tests that edit it."""
    source = site_packages_for(version)
    if only is None:
        shutil.copytree(source, dest, ignore=shutil.ignore_patterns("*.so", STAMP))
        return dest
    for rel in only:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / rel, dest / rel)
    return dest


def link_site(version: str, dest: Path) -> Path:
    """A copy of an unpacked wheel made of hard links (a plain copy across file systems): cheap even for
    0.5.23's 130 MB. The files are shared with the cache, so callers must only add or remove files,
    never write into one."""
    source = site_packages_for(version)

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, dest, copy_function=link, ignore=shutil.ignore_patterns(STAMP))
    return dest


def require(version: str):
    """site_packages_for, turning a missing wheel into a pytest skip with the reason."""
    import pytest
    try:
        return site_packages_for(version)
    except SkipWheel as exc:
        pytest.skip(str(exc))
