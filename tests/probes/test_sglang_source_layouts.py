"""sglang_source through the CLI on install layouts seen on real hosts, built from real PyPI wheels.

Each layout is a trap for a naive reader: algorithms registered by a helper (0.5.5), a leftover
dist-info of an older release beside the installed one, and a git checkout put on the path by a plain
.pth file next to another copy's dist-info.
"""
import shutil
import subprocess
import sys
from pathlib import Path

from tests.probes.test_sglang_source_cli import run_scan
from tests.sglang_wheels import copy_site, link_site, require

SPEC_INFO = "sglang/srt/speculative/spec_info.py"


def test_0_5_5_algorithms_registered_by_helper_calls(tmp_path):
    site = require("0.5.5")
    data = run_scan(tmp_path, "--set", "sglang_source.site_packages=%s" % site)
    assert data["version"] == "0.5.5"
    assert data["speculative_algorithms"] == ["NONE", "EAGLE", "EAGLE3", "STANDALONE", "NGRAM"]
    by_name = {a["name"]: a for a in data["speculative_algorithm_evidence"]}
    assert by_name["NONE"]["via"] == "register"
    eagle = by_name["EAGLE"]
    assert eagle["via"] == "register_speculative_algorithm" and eagle["aliases"] == ["NEXTN"]
    assert eagle["file"] == SPEC_INFO and eagle["snippet"] == "register_speculative_algorithm("
    lines = (site / SPEC_INFO).read_text().splitlines()
    assert lines[eagle["line"] - 1].startswith("register_speculative_algorithm(")
    assert '"EAGLE",' in lines[eagle["line"]]


def test_a_leftover_dist_info_beside_the_installed_release_is_not_read(tmp_path):
    """pip left sglang-0.5.14.dist-info behind when 0.5.23 went in: both RECORDs list sglang/__init__.py."""
    site = link_site("0.5.23", tmp_path / "site")
    shutil.copytree(require("0.5.14") / "sglang-0.5.14.dist-info", site / "sglang-0.5.14.dist-info")
    data = run_scan(tmp_path, "--set", "sglang_source.site_packages=%s" % site)
    assert data["version"] == "0.5.23" and data["metadata_version"] == "0.5.23"
    assert data["version_mismatch"] is False
    assert data["dist_info"] == str(site / "sglang-0.5.23.dist-info")
    integrity = data["integrity"]
    assert integrity["method"] == "record" and integrity["record"] == "sglang-0.5.23.dist-info/RECORD"
    assert integrity["modified"] == [] and integrity["missing"] == [] and integrity["checked"] >= 3
    candidates = {Path(c["path"]).name: c for c in data["dist_info_candidates"]}
    assert set(candidates) == {"sglang-0.5.14.dist-info", "sglang-0.5.23.dist-info"}
    assert all(c["belongs"] == "record" for c in candidates.values())
    new, old = candidates["sglang-0.5.23.dist-info"], candidates["sglang-0.5.14.dist-info"]
    assert new["matched"] == new["checked"] > old["matched"]


def make_venv(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    return python, Path(purelib)


def test_a_checkout_on_a_plain_pth_file_gets_git_status_and_no_borrowed_version(tmp_path):
    """A source checkout without the generated _version.py: version.py would ask importlib.metadata, which
    answers with whichever dist-info comes first. The version is unknown, and git tells what changed."""
    checkout = tmp_path / "sglang-src"
    copy_site("0.5.23", checkout / "python", only=["sglang/__init__.py", "sglang/version.py", SPEC_INFO])
    git = ["git", "-C", str(checkout), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q"], check=True, timeout=60)
    subprocess.run(git + ["add", "."], check=True, timeout=60)
    subprocess.run(git + ["commit", "-qm", "import"], check=True, timeout=60)
    with open(checkout / "python" / SPEC_INFO, "a") as handle:
        handle.write("\n# local experiment\n")
    python, purelib = make_venv(tmp_path)
    (purelib / "sglang-src.pth").write_text(str(checkout / "python") + "\n")
    # Another copy's dist-info in the venv: its RECORD names purelib/sglang, which is not what imports.
    shutil.copytree(require("0.5.23") / "sglang-0.5.23.dist-info", purelib / "sglang-0.5.23.dist-info")
    data = run_scan(tmp_path, "--python", str(python))
    assert data["found"] and data["package_dir"] == str(checkout / "python" / "sglang")
    assert data["version"] is None and data["metadata_version"] is None and data["dist_info"] is None
    assert "no version file (_version.py)" in data["version_reason"]
    assert "sglang-0.5.23.dist-info: another copy's" in data["version_reason"]
    integrity = data["integrity"]
    assert integrity["method"] == "editable" and integrity["editable"]["via"] == "git"
    assert len(integrity["editable"]["commit"]) == 40 and integrity["editable"]["dirty"] is True
    assert integrity["modified"] == ["python/" + SPEC_INFO]
    assert {"EAGLE", "DFLASH"} <= set(data["speculative_algorithms"])
