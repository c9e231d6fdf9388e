"""Targets that would otherwise go to DNS unnoticed: `host:word` where the word is no port is refused in one
line, a name close to an inventory name too, and any other name not in the inventory beside it is reached as an
ssh host with a warning that says it is not in that inventory (`gpudiag hosts`, `gpudiag scan`)."""
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


def test_a_name_not_in_the_inventory_says_so(here):
    (here / "inventory.yaml").write_text("hosts:\n  gpu-01:\n    address: 10.0.0.1\n")
    result = invoke("hosts", "node-7", "--json")
    assert result.exit_code == 0, result.output
    assert result.stderr.strip() == ("gpudiag: warning: node-7: not in inventory.yaml: reached as an ssh host "
                                     "(node-7:22 says so)")
    assert json.loads(result.stdout)[0]["address"] == "node-7"
    line = one_line_error(invoke("scan", "gpu-1O", "--probes", "env"))   # a typo of gpu-01: refused
    assert line.startswith("gpudiag: error: target 'gpu-1O' is not in inventory.yaml (did you mean gpu-01?)")
    for quiet in ("gpu-99:22", "lab-7"):                             # a port says so; ssh config's `Host lab-*`
        assert invoke("hosts", quiet).stderr == "", quiet
