"""sglang installed as an egg, from a real release's files: a directory egg (`sglang-X.egg/` with EGG-INFO,
as easy_install and `setup.py install` left it) is read like any copy; a zipped egg on the import path is
located, its version read from the archive, and said unreadable with why (never "not found")."""
from __future__ import annotations

import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from probes.hostinfo import serving
from probes.sglang_facts import locate
from probes.sglang_source import facts_from_location
from tests.sglang_wheels import require, site_packages_for

VERSION = "0.4.6"


@pytest.fixture
def egg_dir(tmp_path) -> Path:
    require(VERSION)
    site = site_packages_for(VERSION)
    egg = tmp_path / "site-packages" / f"sglang-{VERSION}-py3.11.egg"
    shutil.copytree(site / "sglang", egg / "sglang", ignore=shutil.ignore_patterns("*.so"))
    metadata = (site / f"sglang-{VERSION}.dist-info" / "METADATA").read_text(encoding="utf-8")
    (egg / "EGG-INFO").mkdir()
    (egg / "EGG-INFO" / "PKG-INFO").write_text(metadata.split("\n\n", 1)[0] + "\n\n", encoding="utf-8")
    (egg / "EGG-INFO" / "top_level.txt").write_text("sglang\n")
    return egg


def test_a_directory_egg_is_read_like_any_copy(egg_dir):
    location = locate.find_package([str(egg_dir)])
    assert location["package_dir"] == str(egg_dir / "sglang")
    assert location["dist_info"] == str(egg_dir / "EGG-INFO")
    facts = facts_from_location(location)
    assert facts["found"] is True and facts["version"] == VERSION
    assert "EAGLE" in facts["speculative_algorithms"]
    found = serving.sglang_of(sys.executable, str(egg_dir), timeout=30)
    assert found["found"] is True and found["version"] == VERSION


def test_a_zipped_egg_is_located_and_said_unreadable_with_why(egg_dir, tmp_path):
    archive = tmp_path / f"sglang-{VERSION}-py3.11.egg.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        for path in sorted(egg_dir.rglob("*")):
            if path.is_file():
                handle.write(path, path.relative_to(egg_dir).as_posix())
    paths, error = locate.search_paths(sys.executable, str(archive), timeout=30)
    assert error is None and paths[0] == str(archive)   # a zip on the path is an import path entry
    location = locate.find_package(paths)
    assert location["zipped"] == str(archive) and location["version"] == VERSION
    found = serving.sglang_of(sys.executable, str(archive), timeout=30)
    assert found["found"] is None and found["version"] == VERSION
    assert found["reason"].startswith(f"sglang is imported from the zip archive {archive} (a zipped egg)")
    assert "not read" in found["reason"] and "not found" not in found["reason"]
