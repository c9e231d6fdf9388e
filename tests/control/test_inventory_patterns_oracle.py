"""Every Ansible host pattern form through `gpudiag hosts`: subscripts and slices, `~regex`, wildcards
with subscripts, combinations with `:`, `:&`, `:!` and `,` (and the two mixed, which Ansible splits at `,`
only), `@FILE`; real `ansible -i INV PATTERN --list-hosts` is the oracle for which hosts, in which order."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import cli

INV = Path(__file__).resolve().parents[1] / "fixtures" / "inventory" / "ini" / "patterns.ini"
ANSIBLE = shutil.which("ansible")
PATTERNS = [
    "gpus[0]", "gpus[1:2]", "gpus[-1]", "gpus[1:]", "gpus[2:0]", "fleet[0]", "fleet[2:4]", "deep[1:3]",
    "all[0]", "all[-1]", "all", "deep", "fleet:!gpus[0]", "fleet:&h100[0:1]", "gpus[0],h100[-1]",
    "gpu*[0]", "~gpu-0[12]", "~edge", "edge:gpus:!~gpu-0[13]", "!gpus", "&h100:gpus", "gpu-0*:!h100",
    # `,` as the one separator, with the `:` of slices inside brackets, spaces, empty terms, a trailing `:`
    "gpus,&h100", "!h100,gpus", "gpus, !gpu-01", "edge,,h100", "gpus[1:2],h100[0]", "deep,!edge,&h100[0:1]",
    "gpus:", ":gpus", "fleet[2:4],!~gpu-0[5]",
]
# `,` and `:` mixed: Ansible splits at `,` only and ignores the term left holding `:` with a warning (or, for
# a bare `!`, fails); gpudiag refuses the pattern in one line naming that term and the pattern to write.
MIXED = [
    ("gpus,edge:!gpus[0]", "edge:!gpus[0]", "gpus,edge,!gpus[0]"),
    ("gpus,h100:&edge", "h100:&edge", "gpus,h100,&edge"),
    ("edge:gpus,h100", "edge:gpus", "edge,gpus,h100"),
    ("gpus:!h100,edge", "gpus:!h100", "gpus,!h100,edge"),
    ("deep:!edge,h100", "deep:!edge", "deep,!edge,h100"),
    ("gpus,:edge", ":edge", "gpus,edge"),
    ("gpus[1:2],h100[0]:edge", "h100[0]:edge", "gpus[1:2],h100[0],edge"),
]


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUDIAG_SSH_CONFIG", str(tmp_path / "no_ssh_config"))
    monkeypatch.chdir(tmp_path)


def ansible_list_hosts(pattern: str, *extra: str) -> list[str]:
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(Path.cwd() / ".ansible-tmp"))
    done = subprocess.run([ANSIBLE, "-i", str(INV), pattern, *extra, "--list-hosts"], capture_output=True,
                          text=True, timeout=120, check=False, env=env)
    assert done.returncode == 0, done.stderr
    return [line.strip() for line in done.stdout.splitlines()[1:]]


def hosts(*args: str):
    return CliRunner().invoke(cli, ["hosts", "-i", str(INV), *args, "--json"], catch_exceptions=False)


def names(*args: str) -> list[str]:
    result = hosts(*args)
    assert result.exit_code == 0, result.output
    return [h["name"] for h in json.loads(result.stdout)]


@pytest.mark.skipif(ANSIBLE is None, reason="ansible-core not installed")
@pytest.mark.parametrize("pattern", PATTERNS)
def test_pattern_selects_what_ansible_selects(pattern):
    expected = ansible_list_hosts(pattern)
    assert expected, pattern
    assert names(pattern) == expected


def ansible_run(pattern: str):
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(Path.cwd() / ".ansible-tmp"))
    return subprocess.run([ANSIBLE, "-i", str(INV), pattern, "--list-hosts"], capture_output=True, text=True,
                          timeout=120, check=False, env=env)


@pytest.mark.skipif(ANSIBLE is None, reason="ansible-core not installed")
@pytest.mark.parametrize("pattern, ignored, written", MIXED)
def test_mixed_separators_ansible_ignores_a_term_of_are_refused_in_one_line(pattern, ignored, written):
    done = ansible_run(pattern)
    warned = re.sub(r"\[-?[0-9:]*\]$", "", ignored)            # Ansible names the term less its subscript
    assert done.returncode == 0 and f"Could not match supplied host pattern, ignoring: {warned}\n" in done.stderr
    result = hosts(pattern)
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert (f"pattern {pattern!r} mixes ',' and ':': Ansible splits a pattern holding ',' at ',' only, so "
            f"{ignored!r} is one name there and matches nothing; write {written!r}") in result.stderr
    assert names(written) == ansible_list_hosts(written)      # the pattern it suggests means what it says
    limited = hosts("all", "--limit", pattern)                # --limit reads patterns the same way
    assert limited.exit_code == 2 and f"so {ignored!r} is one name there" in limited.stderr


@pytest.mark.skipif(ANSIBLE is None, reason="ansible-core not installed")
def test_a_bare_operator_after_a_comma_is_an_error_where_ansible_crashes():
    assert ansible_run("gpus,!").returncode != 0             # ansible-core: IndexError, "probably a bug"
    result = hosts("gpus,!")
    assert result.exit_code == 2 and "pattern 'gpus,!': '!' with no name after it" in result.stderr


def test_an_address_with_a_port_in_a_comma_list_is_one_term():
    from gpudiag.inventory.patterns import split_pattern
    assert [t.text for t in split_pattern("gpus,ops@gpu-09:2222,fe80::1,!gpu-01")] == [
        "gpus", "ops@gpu-09:2222", "fe80::1", "gpu-01"]


@pytest.mark.skipif(ANSIBLE is None, reason="ansible-core not installed")
def test_limit_file_of_patterns_as_ansible_reads_it(tmp_path):
    (tmp_path / "limit.txt").write_text("gpus[0]\n~edge-\n\n")
    expected = ansible_list_hosts("all", "--limit", f"@{tmp_path / 'limit.txt'}")
    # the same hosts; gpudiag keeps the order of the targets (`all`), the limit only filters
    assert names("all", "--limit", f"@{tmp_path / 'limit.txt'}") == ["edge-a", "edge-b", "gpu-01"]
    assert sorted(expected) == ["edge-a", "edge-b", "gpu-01"]


def test_a_target_file_of_patterns(tmp_path):
    (tmp_path / "targets.txt").write_text("h100[-1]\nedge[0]\n")
    assert names(f"@{tmp_path / 'targets.txt'}") == ["gpu-06", "edge-a"]


def test_a_range_over_no_group_stays_a_host_range():
    assert names("gpu-0[1:3]") == ["gpu-01", "gpu-02", "gpu-03"]


@pytest.mark.parametrize("pattern, message", [
    ("gpus[9]", "pattern 'gpus[9]': 'gpus' has 4 host(s); [9] selects none"),
    ("~(", "pattern '~(': '~(' is not a regular expression"),
    ("~nothing-like-this", "pattern '~nothing-like-this' matches no host or group"),
    ("fleet:!~(", "pattern 'fleet:!~(': '~(' is not a regular expression"),
    ("gpsu[0]", "pattern 'gpsu[0]': 'gpsu' is not a group or host in"),
    ("gpsu[0]", "(did you mean gpus"),
    ("gpsu[0]", "(a subscript [0] selects from one)"),
])
def test_errors_show_the_pattern_as_typed(pattern, message):
    result = hosts(pattern)
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
