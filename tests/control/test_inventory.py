"""gpudiag's own inventory form, ad-hoc targets and target resolution."""
import json
import os

import pytest

from gpudiag.inventory import InventoryError, load_inventory, parse_adhoc, resolve_targets
from gpudiag.models import safe_file_name

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "inventory")
NATIVE = os.path.join(FIXTURES, "gpudiag.yaml")


@pytest.fixture(autouse=True)
def no_user_ssh_config(tmp_path, monkeypatch):
    """Keep the user's ~/.ssh/config out of these tests."""
    monkeypatch.setenv("GPUDIAG_SSH_CONFIG", str(tmp_path / "no_ssh_config"))


def write(tmp_path, text, name="inv.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_localhost_without_address_is_local():
    inv = load_inventory(NATIVE)
    local = inv.hosts["localhost"]
    assert local.transport == "local"
    assert local.user is None and local.port is None      # ssh defaults do not apply to the local host
    assert local.source == f"{NATIVE}:6"


def test_host_values_and_defaults():
    inv = load_inventory(NATIVE)
    gpu2 = inv.hosts["gpu-02"]
    assert (gpu2.transport, gpu2.address, gpu2.port, gpu2.user) == ("ssh", "10.0.0.12", 2222, "ops")
    assert gpu2.identity_file == "/keys/fleet_ed25519"
    assert gpu2.python == "/opt/sglang/.venv/bin/python" and gpu2.python_explicit
    assert gpu2.container == "docker:sglang"
    assert gpu2.source == f"{NATIVE}:15"
    bastion = inv.hosts["bastion"]
    assert (bastion.user, bastion.port) == ("jumper", 2200)   # host values beat defaults


def test_jump_naming_an_inventory_host_becomes_its_endpoint():
    inv = load_inventory(NATIVE)
    assert inv.hosts["gpu-01"].jump == "jumper@bastion.example.com:2200"
    assert inv.hosts["bastion"].jump is None
    assert inv.hosts["gpu-02"].describe_route() == \
        "ssh ops@10.0.0.12:2222 via jumper@bastion.example.com:2200 → docker exec sglang"


def test_default_python_is_not_explicit():
    inv = load_inventory(NATIVE)
    assert inv.hosts["gpu-01"].python == "python3"
    assert inv.hosts["gpu-01"].python_explicit is False


def test_host_range_and_nested_groups():
    inv = load_inventory(NATIVE)
    assert inv.hosts["gpu-03"].user == "root" and inv.hosts["gpu-04"].address == "gpu-04"
    assert inv.groups["gpus"] == ["gpu-02", "gpu-01", "gpu-03", "gpu-04"]
    assert inv.groups["everything"] == ["gpu-02", "gpu-01", "gpu-03", "gpu-04", "pod-a", "localhost"]
    assert inv.hosts["gpu-01"].groups == ("everything", "gpus", "h100")   # its own `groups:` key counts
    assert inv.groups["all"] == ["localhost", "bastion", "gpu-01", "gpu-02", "pod-a", "gpu-03", "gpu-04"]


def test_kubectl_container_with_namespace():
    host = load_inventory(NATIVE).hosts["pod-a"]
    assert host.container == "kubectl:inference/sglang-0"
    assert host.describe_route().endswith("→ kubectl exec inference/sglang-0")


def test_values_with_spaces_quotes_and_semicolons_survive_verbatim(tmp_path):
    odd = {"address": "odd host;rm -rf /", "user": "o'neil \"x\"",
           "python": "/opt/my env/bin/python3 -X 'dev'; echo pwned",
           "container": "docker:name with space;x", "identity_file": "/keys/my key's file",
           "jump": "j'mp;x@bastion"}
    lines = "".join(f"    {key}: {json.dumps(value)}\n" for key, value in odd.items())
    host = load_inventory(write(tmp_path, "hosts:\n  odd:\n" + lines)).hosts["odd"]
    assert {key: getattr(host, key) for key in odd if key != "jump"} == {k: v for k, v in odd.items() if k != "jump"}
    assert host.jump == "j'mp;x@bastion"


def test_yaml_anchors_and_merge_keys(tmp_path):
    path = write(tmp_path, """
hosts:
  a: &common {user: shared, port: 2022}
  b:
    <<: *common
    port: 2023
""")
    inv = load_inventory(path)
    assert (inv.hosts["b"].user, inv.hosts["b"].port) == ("shared", 2023)


def test_unsafe_host_names_become_safe_file_names(tmp_path):
    path = write(tmp_path, "hosts:\n  'gpu/01 x':\n    address: 10.0.0.1\n")
    host = load_inventory(path).hosts["gpu/01 x"]
    assert host.name == safe_file_name("gpu/01 x") == "gpu_01_x"
    assert "/" not in host.name


# --- ad-hoc targets ---------------------------------------------------------------------------------

@pytest.mark.parametrize("target, expected", [
    ("localhost", ("local", "localhost", None, None)),
    ("local", ("local", "localhost", None, None)),
    ("gpu-01", ("ssh", "gpu-01", None, None)),
    ("alice@gpu-01", ("ssh", "gpu-01", "alice", None)),
    ("alice@gpu-01.example.com:2222", ("ssh", "gpu-01.example.com", "alice", 2222)),
    ("[::1]:22", ("ssh", "::1", None, 22)),
    ("root@[fe80::1]:2200", ("ssh", "fe80::1", "root", 2200)),
    ("::1", ("ssh", "::1", None, None)),
    ("10.0.0.5:2022", ("ssh", "10.0.0.5", None, 2022)),
])
def test_adhoc_targets(target, expected):
    host = parse_adhoc(target)
    assert (host.transport, host.address, host.user, host.port) == expected
    assert host.source == "command line"
    assert host.name == safe_file_name(host.name)


@pytest.mark.parametrize("target", ["gpu 01", "a@b@", "host:port", "-rf", "gpu/01", "[nothex]:22", "@host"])
def test_implausible_adhoc_targets_are_refused(target):
    with pytest.raises(InventoryError, match="not a host name"):
        parse_adhoc(target)


def test_adhoc_port_out_of_range():
    with pytest.raises(InventoryError, match="out of range"):
        parse_adhoc("gpu-01:70000")


# --- resolution -------------------------------------------------------------------------------------

def test_resolve_groups_hosts_and_adhoc_in_order_without_duplicates():
    inv = load_inventory(NATIVE)
    hosts = resolve_targets(["h100", "gpu-02", "localhost", "alice@other-box:2200"], inv)
    assert [h.name for h in hosts] == ["gpu-02", "gpu-01", "localhost", "alice@other-box_2200"]
    assert hosts[2].source == f"{NATIVE}:6"          # inventory's localhost, not the ad-hoc one


def test_all_selects_every_host():
    inv = load_inventory(NATIVE)
    assert [h.name for h in resolve_targets(["all"], inv)] == list(inv.hosts)


def test_all_without_inventory_is_an_error():
    with pytest.raises(InventoryError, match="needs an inventory"):
        resolve_targets(["all"], None)


def test_python_override_applies_to_every_host():
    hosts = resolve_targets(["all", "gpu-xyz.example.com"], load_inventory(NATIVE), python="/usr/bin/python3.12")
    assert {h.python for h in hosts} == {"/usr/bin/python3.12"}
    assert all(h.python_explicit for h in hosts)


def test_typo_of_an_inventory_name_is_an_error_with_suggestion():
    with pytest.raises(InventoryError) as err:
        resolve_targets(["gpu-0l"], load_inventory(NATIVE))
    message = str(err.value)
    assert "did you mean gpu-01" in message and "\n" not in message


def test_bare_word_far_from_inventory_names_is_an_adhoc_host():
    hosts = resolve_targets(["inference-node.example.org"], load_inventory(NATIVE))
    assert (hosts[0].transport, hosts[0].address) == ("ssh", "inference-node.example.org")


def test_ip_address_close_to_an_inventory_name_is_still_an_adhoc_host(tmp_path):
    inv = load_inventory(write(tmp_path, "hosts:\n  10.0.0.11:\n"))
    assert resolve_targets(["10.0.0.12"], inv)[0].address == "10.0.0.12"


def test_explicit_port_bypasses_the_typo_check():
    assert resolve_targets(["gpu-0l:22"], load_inventory(NATIVE))[0].address == "gpu-0l"


def test_implausible_target_with_inventory_suggests_close_names():
    with pytest.raises(InventoryError, match=r"not an inventory host or group.*did you mean gpus"):
        resolve_targets(["gpus!"], load_inventory(NATIVE))


def test_wildcard_pattern_selects_matching_hosts():
    inv = load_inventory(NATIVE)
    assert [h.name for h in resolve_targets(["gpu-0[3-4]"], inv)] == ["gpu-03", "gpu-04"]   # a pdsh range
    assert [h.name for h in resolve_targets(["gpu-0?"], inv)] == [h for h in inv.hosts if h.startswith("gpu-0")]
    with pytest.raises(InventoryError, match="matches no host"):
        resolve_targets(["tpu-*"], inv)
    assert resolve_targets(["root@[::1]:2200"], inv)[0].address == "::1"   # brackets of an IPv6 target


def test_distinct_hosts_sharing_a_name_are_kept_apart():
    hosts = resolve_targets(["a@b:22", "a@b_22"], None)
    assert [h.name for h in hosts] == ["a@b_22", "a@b_22-2"]
    assert hosts[0].port == 22 and hosts[1].port is None


def test_empty_group_selects_nothing_and_says_so(tmp_path):
    path = write(tmp_path, "hosts:\n  a:\ngroups:\n  empty: []\n")
    with pytest.raises(InventoryError, match="selects no hosts"):
        resolve_targets(["empty"], load_inventory(path))


def test_pdsh_ranges_in_gpudiag_inventories(tmp_path):
    path = tmp_path / "inv.yaml"
    path.write_text("hosts:\n  'gpu-[01-03,07]':\n    user: ops\ngroups:\n  gpus: [gpu-01, gpu-07]\n")
    inv = load_inventory(path)
    assert list(inv.hosts) == ["gpu-01", "gpu-02", "gpu-03", "gpu-07"]
    assert [h.user for h in resolve_targets(["gpus"], inv)] == ["ops", "ops"]
    path.write_text("hosts:\n  'gpu-[01-xx]':\n")
    with pytest.raises(InventoryError, match=rf"^{path}:2: host range 'gpu-\[01-xx\]'"):
        load_inventory(path)
