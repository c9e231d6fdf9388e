"""Ansible's YAML inventory form: detection, vars inheritance, children, ungrouped, connection vars."""
import os
import re

import pytest

from gpudiag.inventory import load_inventory, resolve_targets

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "inventory")
ANSIBLE = os.path.join(FIXTURES, "ansible.yaml")


@pytest.fixture(autouse=True)
def no_user_ssh_config(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUDIAG_SSH_CONFIG", str(tmp_path / "no_ssh_config"))


@pytest.fixture
def inv():
    return load_inventory(ANSIBLE)


def test_top_level_all_is_detected_as_ansible(inv):
    assert inv.form == "ansible"
    assert list(inv.hosts) == ["standalone", "localhost", "node1", "node2", "node3", "node5", "node6"]


def test_connection_variables_map_to_host_fields(inv):
    node1 = inv.hosts["node1"]
    assert (node1.address, node1.port, node1.user) == ("10.1.0.1", 2222, "gpuops")
    assert node1.identity_file == "/keys/gpu"
    assert node1.source == f"{ANSIBLE}:17"
    assert ("gpu_model", "H100") in node1.vars       # other vars are kept


def test_ansible_connection_local(inv):
    assert inv.hosts["localhost"].transport == "local"


def test_child_group_vars_override_parent_and_host_vars_override_groups(inv):
    assert inv.hosts["node2"].user == "h200ops"        # in gpus and its child h200: the child wins
    assert inv.hosts["node3"].user == "override"       # host var beats every group var
    assert inv.hosts["standalone"].user == "admin"     # only `all` vars apply


def test_python_interpreter_auto_keeps_the_default(inv):
    assert (inv.hosts["standalone"].python, inv.hosts["standalone"].python_explicit) == ("python3", False)
    assert (inv.hosts["node2"].python, inv.hosts["node2"].python_explicit) == ("/opt/venv/bin/python3", True)


def test_groups_children_and_ungrouped(inv):
    assert inv.groups["gpus"] == ["node1", "node2", "node3"]
    assert inv.groups["h200"] == ["node3", "node2"]
    assert inv.groups["ungrouped"] == ["standalone", "localhost"]
    assert inv.hosts["node2"].groups == ("gpus", "h200")
    assert [h.name for h in resolve_targets(["ungrouped"], inv)] == ["standalone", "localhost"]


def test_all_selects_every_host_in_ansibles_order(inv):
    # `ansible -i ansible.yaml all --list-hosts`: a group's own hosts, then its descendants' level by level
    assert [h.name for h in resolve_targets(["all"], inv)] == [
        "standalone", "localhost", "node1", "node2", "node5", "node6", "node3"]
    assert set(inv.hosts) == set(inv.groups["all"])


def test_host_ranges_and_proxy_jump_from_ssh_args(inv):
    assert inv.hosts["node5"].jump == "jump@bastion.example.com:2022"
    assert inv.hosts["node6"].describe_route() == "ssh admin@node6 via jump@bastion.example.com:2022"


def write(tmp_path, text):
    path = tmp_path / "hosts.yml"
    path.write_text(text)
    return path


def test_sibling_groups_at_same_depth_merge_in_name_order(tmp_path):
    inv = load_inventory(write(tmp_path, """
all:
  children:
    zeta:
      vars: {ansible_user: from_zeta}
      hosts: {h:}
    alpha:
      vars: {ansible_user: from_alpha}
      hosts: {h:}
"""))
    assert inv.hosts["h"].user == "from_zeta"          # Ansible: same depth → later name wins


def test_group_defined_in_two_places_is_merged(tmp_path):
    inv = load_inventory(write(tmp_path, """
all:
  children:
    a:
      children:
        shared:
          hosts: {h1:}
    b:
      children:
        shared:
          vars: {ansible_port: "2200"}
          hosts: {h2:}
"""))
    assert inv.groups["shared"] == ["h1", "h2"]
    assert inv.groups["a"] == ["h1", "h2"] and inv.groups["b"] == ["h1", "h2"]
    assert inv.hosts["h1"].port == 2200                # a digit string is accepted, as Ansible does


def test_other_top_level_groups_are_children_of_all(tmp_path):
    inv = load_inventory(write(tmp_path, """
all:
  hosts: {a:}
gpus:
  hosts: {b:}
"""))
    assert inv.groups["gpus"] == ["b"] and inv.groups["all"] == ["a", "b"]


def test_host_key_with_port_and_old_style_vars(tmp_path):
    inv = load_inventory(write(tmp_path, """
all:
  hosts:
    gpu-9:2022:
      ansible_ssh_host: 10.2.0.9
      ansible_ssh_user: old
      ansible_ssh_extra_args: -J hop.example.com
"""))
    host = inv.hosts["gpu-9"]
    assert (host.address, host.port, host.user, host.jump) == ("10.2.0.9", 2022, "old", "hop.example.com")


def test_group_and_host_with_the_same_name_select_both(tmp_path):
    inv = load_inventory(write(tmp_path, """
all:
  hosts: {dgx:}
  children:
    dgx:
      hosts: {dgx-1:}
"""))
    assert [h.name for h in resolve_targets(["dgx"], inv)] == ["dgx-1", "dgx"]


def test_ssh_connection_forces_ssh_for_localhost(tmp_path):
    inv = load_inventory(write(tmp_path, "all:\n  hosts:\n    localhost:\n      ansible_connection: ssh\n"))
    assert inv.hosts["localhost"].transport == "ssh"


def test_ansible_guide_example_without_all_is_detected():
    inv = load_inventory(os.path.join(FIXTURES, "ansible_no_all.yaml"))
    assert inv.form == "ansible"
    assert inv.groups["prod"] == ["foo.example.com", "one.example.com", "two.example.com"]
    assert inv.groups["ungrouped"] == ["mail.example.com"]
    assert len(inv.groups["all"]) == 6
    assert inv.hosts["bar.example.com"].groups == ("test", "webservers", "west")


def test_ssh_args_without_proxyjump_are_ignored(tmp_path):
    inv = load_inventory(write(tmp_path, """
all:
  vars:
    ansible_ssh_common_args: '-o StrictHostKeyChecking=no -o ProxyCommand="ssh -W %h:%p {{ bastion }}"'
  hosts: {h:}
"""))
    assert inv.hosts["h"].jump is None


def test_unbalanced_quotes_in_ssh_args_name_the_line(tmp_path):
    path = write(tmp_path, "all:\n  hosts:\n    h:\n      ansible_ssh_common_args: '-o \"ProxyJump=x'\n")
    reason = load_inventory(path).hosts["h"].skip_reason
    assert re.match(rf"^{path}:4: ssh arguments .*No closing quotation", reason)


def test_templated_interpreter_skips_the_host_unless_python_is_given(tmp_path):
    path = write(tmp_path, "all:\n  hosts:\n    h:\n      ansible_python_interpreter: '{{ venv }}/bin/python'\n")
    inv = load_inventory(path)
    assert "ansible_python_interpreter is a Jinja template" in resolve_targets(["h"], inv)[0].skip_reason
    host = resolve_targets(["h"], inv, python="/srv/venv/bin/python")[0]
    assert host.skip_reason is None and host.python == "/srv/venv/bin/python"


def test_docker_and_templated_hosts_do_not_block_other_targets(tmp_path):
    path = write(tmp_path, "all:\n  children:\n    gpus:\n      hosts:\n        g1:\n          ansible_host: 10.0.0.1\n"
                           "    odd:\n      hosts:\n        c1:\n          ansible_connection: docker\n"
                           "        t1:\n          ansible_host: '{{ x }}'\n")
    inv = load_inventory(path)
    assert [h.address for h in resolve_targets(["gpus"], inv)] == ["10.0.0.1"]
    assert (inv.hosts["c1"].transport, inv.hosts["c1"].container) == ("local", "docker:c1")
    assert inv.hosts["t1"].skip_reason.startswith(f"{path}:12: ")
