"""Host ranges and patterns, with pdsh and Ansible as the oracles: pdsh's own hostlist expansion
(`pdsh -R exec -w RANGE echo %h` runs `echo` locally per host, nothing connects) and
`ansible -i INV PATTERN --list-hosts`."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpudiag.inventory import InventoryError, load_inventory, resolve_targets
from gpudiag.inventory.patterns import PatternError, expand_range, split_pattern

INI = Path(__file__).resolve().parents[1] / "fixtures" / "inventory" / "ini"
PDSH = shutil.which("pdsh")
ANSIBLE = shutil.which("ansible")


@pytest.fixture(autouse=True)
def no_user_ssh_config(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUDIAG_SSH_CONFIG", str(tmp_path / "no_ssh_config"))


RANGES = ["gpu-[01-03,07]", "gpu[1-3]-ib", "r[1-2]n[8-10]", "a[1,3-4]b[7-8]", "gpu-[001-3]", "node[8-11]",
          "gpu-[09-11]", "x[0]", "rack[1-2]-gpu[01-02]"]


def pdsh_hosts(hostlist: str) -> list[str]:
    done = subprocess.run([PDSH, "-R", "exec", "-N", "-f", "4", "-w", hostlist, "echo", "%h"],
                          capture_output=True, text=True, timeout=60, check=False,
                          env=dict(os.environ, PDSH_RCMD_TYPE="exec"))
    assert done.returncode == 0, done.stderr
    return sorted(done.stdout.split())


@pytest.mark.skipif(PDSH is None, reason="pdsh not installed")
@pytest.mark.parametrize("hostlist", RANGES)
def test_pdsh_ranges_expand_as_pdsh_expands_them(hostlist):
    assert sorted(expand_range(hostlist)) == pdsh_hosts(hostlist)


@pytest.mark.skipif(PDSH is None, reason="pdsh not installed")
@pytest.mark.parametrize("hostlist", ["gpu-[3-1]", "gpu-[01-xx]"])
def test_ranges_pdsh_refuses_are_refused(hostlist):
    done = subprocess.run([PDSH, "-R", "exec", "-N", "-w", hostlist, "echo", "%h"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode != 0 or not done.stdout.strip()
    with pytest.raises(PatternError):
        expand_range(hostlist)


@pytest.mark.parametrize("text,expected", [
    ("gpu-[01:04]", ["gpu-01", "gpu-02", "gpu-03", "gpu-04"]),
    ("cpu[1:6:2]", ["cpu1", "cpu3", "cpu5"]),
    ("gpu-[a:c]-x", ["gpu-a-x", "gpu-b-x", "gpu-c-x"]),
    ("plain", ["plain"]),
])
def test_ansible_ranges(text, expected):
    assert expand_range(text) == expected


@pytest.mark.parametrize("text", ["gpu-[01:xx]", "gpu-[1-2", "gpu-[]", "gpu-]1[", "gpu-[1:3]]", "gpu-[[1-2]]",
                                  "gpu-[1:a]"])
def test_unexpandable_brackets_are_errors(text):
    with pytest.raises(PatternError, match="host range"):
        expand_range(text)


def test_pattern_terms_keep_ranges_whole():
    for pattern in ("gpu-[01:04]:!gpu-02:&h200", "gpu-[01:04],!gpu-02,&h200", "gpu-[01-03,04],!gpu-02,&h200"):
        terms = split_pattern(pattern)
        assert [(t.op, t.text) for t in terms][1:] == [("!", "gpu-02"), ("&", "h200")]
        assert terms[0].text.startswith("gpu-[01")
    with pytest.raises(PatternError, match="mixes ',' and ':'"):   # Ansible would ignore 'gpu-[01:04]:!gpu-02'
        split_pattern("gpu-[01:04]:!gpu-02,&h200")
    with pytest.raises(PatternError):
        split_pattern("gpus:!")


def test_range_on_the_command_line_is_that_many_hosts():
    hosts = resolve_targets(["gpu-[01-03]"], None)
    assert [h.name for h in hosts] == ["gpu-01", "gpu-02", "gpu-03"]
    hosts = resolve_targets(["ops@gpu-[1:2]:2222"], None)
    assert [(h.user, h.address, h.port) for h in hosts] == [("ops", "gpu-1", 2222), ("ops", "gpu-2", 2222)]


def test_comma_list_without_inventory_is_several_adhoc_hosts():
    assert [h.name for h in resolve_targets(["gpu-a,gpu-[1-2]"], None)] == ["gpu-a", "gpu-1", "gpu-2"]


def test_bad_bracket_on_the_command_line_is_an_error_not_a_host():
    with pytest.raises(InventoryError, match=r"host range 'gpu-\[01:xx\]'"):
        resolve_targets(["gpu-[01:xx]"], None)


PATTERNS = ["gpus:!gpu-02", "gpus:&h200", "lab:!h200", "gpu-0*", "gpus,cpu", "!cpu", "h200:&lab",
            "*-x:cpu1", "gpu-0?:!gpu-04", "lab:&gpus:!spare", "all:!lab"]


def ansible_hosts(inventory: Path, pattern: str) -> set[str]:
    done = subprocess.run([ANSIBLE, "-i", str(inventory), pattern, "--list-hosts"], capture_output=True,
                          text=True, timeout=120, check=False, env=dict(os.environ, ANSIBLE_NOCOLOR="1"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].strip().startswith("hosts (")
    return {line.strip() for line in lines[1:] if line.strip()}


@pytest.mark.skipif(ANSIBLE is None, reason="ansible-core not installed")
def test_patterns_select_what_ansible_selects():
    inventory = INI / "cluster.ini"
    inv = load_inventory(inventory)
    for pattern in PATTERNS:
        mine = {h.name for h in resolve_targets([pattern], inv)}
        assert mine == ansible_hosts(inventory, pattern), pattern


@pytest.mark.skipif(ANSIBLE is None, reason="ansible-core not installed")
def test_limit_selects_what_ansible_limit_selects():
    inventory = INI / "cluster.ini"
    inv = load_inventory(inventory)
    done = subprocess.run([ANSIBLE, "-i", str(inventory), "lab", "--limit", "gpu-0*:!gpu-03", "--list-hosts"],
                          capture_output=True, text=True, timeout=120, check=False)
    expected = {line.strip() for line in done.stdout.splitlines()[1:] if line.strip()}
    assert {h.name for h in resolve_targets(["lab"], inv, limit="gpu-0*:!gpu-03")} == expected


def test_limit_from_a_file_of_names(tmp_path):
    inv = load_inventory(INI / "cluster.ini")
    names = tmp_path / "retry"
    names.write_text("gpu-02\ncpu3\n")
    assert [h.name for h in resolve_targets(["lab"], inv, limit=f"@{names}")] == ["gpu-02", "cpu3"]
    with pytest.raises(InventoryError, match="leaves none"):
        resolve_targets(["h200"], inv, limit="cpu*")


def test_pattern_term_that_matches_nothing_is_an_error():
    inv = load_inventory(INI / "cluster.ini")
    with pytest.raises(InventoryError, match="matches no host or group"):
        resolve_targets(["gpus:tpu-*"], inv)
    with pytest.raises(InventoryError, match="needs an inventory"):
        resolve_targets(["gpu-*"], None)
