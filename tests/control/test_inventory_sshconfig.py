"""~/.ssh/config (here: the file GPUDIAG_SSH_CONFIG names) applied to inventory and ad-hoc ssh hosts."""
import os

import pytest

from gpudiag.inventory import InventoryError, load_inventory, parse_adhoc, resolve_targets
from gpudiag.inventory.sshconfig import SshConfig, config_path

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "inventory")
SSH_CONFIG = os.path.join(FIXTURES, "ssh_config")


@pytest.fixture(autouse=True)
def fixture_ssh_config(monkeypatch):
    monkeypatch.setenv("GPUDIAG_SSH_CONFIG", SSH_CONFIG)


def write(tmp_path, text):
    path = tmp_path / "inv.yaml"
    path.write_text(text)
    return path


def test_env_var_names_the_config(monkeypatch):
    assert str(config_path()) == SSH_CONFIG
    monkeypatch.delenv("GPUDIAG_SSH_CONFIG")
    assert config_path() == config_path().home() / ".ssh" / "config"


def test_adhoc_alias_takes_every_setting_from_ssh_config():
    host = parse_adhoc("gpu-alias")
    assert (host.address, host.user, host.port) == ("10.9.9.9", "aliasuser", 2022)
    assert host.identity_file == "/keys/alias_key"
    assert host.jump == "hopuser@hop.example.com"      # the hop alias is resolved too
    assert host.name == "gpu-alias"


def test_adhoc_explicit_user_and_port_win_over_ssh_config():
    host = parse_adhoc("me@gpu-alias:2200")
    assert (host.address, host.user, host.port) == ("10.9.9.9", "me", 2200)


def test_wildcard_host_block_applies():
    assert parse_adhoc("db.internal").user == "wildcard"


def test_unknown_host_is_left_alone():
    host = parse_adhoc("plain.example.com")
    assert (host.address, host.user, host.port, host.jump) == ("plain.example.com", None, None, None)


def test_ssh_alias_close_to_an_inventory_name_is_not_taken_for_a_typo(tmp_path):
    inv = load_inventory(write(tmp_path, "hosts:\n  gpu-alias2:\n    address: 10.0.0.2\n"))
    assert resolve_targets(["gpu-alias"], inv)[0].address == "10.9.9.9"
    with pytest.raises(InventoryError, match="did you mean gpu-alias2"):
        resolve_targets(["gpu-alia2"], inv)


def test_inventory_values_win_and_ssh_config_fills_the_rest(tmp_path):
    inv = load_inventory(write(tmp_path, """
defaults:
  user: ops
hosts:
  gpu-01:
    address: 10.0.0.11
  gpu-alias:
    port: 22
    identity_file: /keys/inventory_key
  via-alias:
    address: 10.0.0.20
    jump: gpu-alias
"""))
    gpu1 = inv.hosts["gpu-01"]
    assert (gpu1.user, gpu1.port) == ("ops", 2201)      # user from defaults beats config; port from config
    alias = inv.hosts["gpu-alias"]
    assert (alias.address, alias.port, alias.identity_file) == ("10.9.9.9", 22, "/keys/inventory_key")
    assert alias.user == "ops"
    assert alias.jump == "hopuser@hop.example.com"      # ProxyJump from config when the inventory has none
    # an inventory host as jump: its own jump chain comes first
    assert inv.hosts["via-alias"].jump == "hopuser@hop.example.com,ops@10.9.9.9:22"


def test_jump_written_as_ssh_alias_is_resolved(tmp_path):
    inv = load_inventory(write(tmp_path, "hosts:\n  a:\n    jump: hop-alias\n  b:\n    jump: x@hop-alias:2022\n"))
    assert inv.hosts["a"].jump == "hopuser@hop.example.com"
    assert inv.hosts["b"].jump == "x@hop.example.com:2022"


def test_proxyjump_none_means_no_jump():
    config = SshConfig.from_text("Host direct\n  ProxyJump none\nHost *\n  ProxyJump bastion\n")
    assert config.lookup("direct").proxy_jump is None
    assert config.lookup("other").proxy_jump == "bastion"
    assert config.aliases() == {"direct"}


def test_missing_config_file_is_empty(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUDIAG_SSH_CONFIG", str(tmp_path / "absent"))
    assert parse_adhoc("gpu-alias").address == "gpu-alias"


def test_catch_all_proxyjump_does_not_make_the_bastion_jump_through_itself(tmp_path, monkeypatch):
    config = tmp_path / "ssh_config"
    config.write_text("Host bastion\n  HostName bastion.example.com\n  User b\nHost *\n  ProxyJump bastion\n")
    monkeypatch.setenv("GPUDIAG_SSH_CONFIG", str(config))
    assert parse_adhoc("gpu-5").jump == "b@bastion.example.com"
    bastion = parse_adhoc("bastion")
    assert (bastion.address, bastion.jump) == ("bastion.example.com", None)


def test_proxyjump_chain_and_ssh_uri_hops(tmp_path, monkeypatch):
    config = tmp_path / "ssh_config"
    config.write_text("Host inner\n  HostName 10.5.0.1\n  ProxyJump ssh://o@outer.example.com:2200\n"
                      "Host target\n  ProxyJump inner,last\n")
    monkeypatch.setenv("GPUDIAG_SSH_CONFIG", str(config))
    assert parse_adhoc("target").jump == "o@outer.example.com:2200,10.5.0.1,last"
