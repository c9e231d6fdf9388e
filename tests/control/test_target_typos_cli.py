"""Targets that would otherwise go to DNS: `host:word` where the word is no port, and a short name that is not
in the inventory beside it; both refused in one line through `gpudiag hosts` and `gpudiag scan`."""
import json

import pytest
from click.testing import CliRunner

from gpudiag.cli import cli


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPUDIAG_SSH_CONFIG", str(tmp_path / "ssh_config"))
    (tmp_path / "ssh_config").write_text("Host bastion\n  HostName bastion.example\nHost lab-*\n  User ops\n")
    return tmp_path


def invoke(*args):
    return CliRunner().invoke(cli, list(args))


def one_line_error(result):
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


@pytest.mark.parametrize("command", [("hosts",), ("scan", "--probes", "env")])
def test_a_word_after_the_colon_that_is_no_port_is_refused(here, command):
    line = one_line_error(invoke(*command, "gpu-01:abc"))
    assert line == "gpudiag: error: target 'gpu-01:abc': 'abc' is not a port (write gpu-01:PORT), nor an inventory name"


def test_with_an_inventory_the_message_names_it(here):
    (here / "inventory.yaml").write_text("hosts:\n  gpu-01:\n    address: 10.0.0.1\n")
    line = one_line_error(invoke("hosts", "gpu-01:abc"))
    assert "nor a host or group in inventory.yaml" in line


def test_ports_names_ssh_config_knows_and_inventory_unions_still_resolve(here):
    (here / "inventory.yaml").write_text("hosts:\n  gpu-01:\n    address: 10.0.0.1\n  gpu-02:\n    address: 10.0.0.2\n")
    for target, names in (("gpu-01:2222", ["gpu-01_2222"]), ("gpu-01:gpu-02", ["gpu-01", "gpu-02"]),
                          ("gpu-01:bastion", ["gpu-01", "bastion"]), ("gpu-01:lab-3", ["gpu-01", "lab-3"])):
        result = invoke("hosts", target, "--json")
        assert result.exit_code == 0, (target, result.output)
        assert [h["name"] for h in json.loads(result.stdout)] == names, target


def test_a_short_name_not_in_the_inventory_says_so(here):
    (here / "inventory.yaml").write_text("hosts:\n  gpu-01:\n    address: 10.0.0.1\n")
    line = one_line_error(invoke("scan", "gpu-99", "--probes", "env"))
    assert line == ("gpudiag: error: target 'gpu-99' is not in inventory.yaml; write gpu-99:22 to reach it as a "
                    "plain ssh host")
    assert invoke("hosts", "gpu-99:22").exit_code == 0
    assert invoke("hosts", "lab-7").exit_code == 0                 # ssh config's `Host lab-*` is set up for it
    assert invoke("hosts", "node.example.org").exit_code == 0      # a dotted address far from every name
