"""Bad inventories: every error is one line naming file:line and what is wrong."""
import pytest

from gpudiag.inventory import InventoryError, load_inventory


@pytest.fixture(autouse=True)
def no_user_ssh_config(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUDIAG_SSH_CONFIG", str(tmp_path / "no_ssh_config"))


CASES = [
    # (name, inventory text, line, words the message must contain)
    ("yaml syntax", "hosts:\n  a:\n    port: [1, 2\n", 3, "YAML syntax error"),
    ("yaml tab", "hosts:\n\ta: 1\n", 2, "YAML syntax error"),
    ("hosts not mapping", "hosts:\n  - a\n  - b\n", 2, "hosts must be a mapping, not a list"),
    ("unknown top key", "hosts:\n  a:\nhost:\n  b:\n", 3, "unknown top-level key 'host' (did you mean hosts?)"),
    ("unknown default", "defaults:\n  usr: x\nhosts:\n  a:\n", 2, "defaults: unknown key 'usr' (did you mean user?)"),
    ("group unknown host", "hosts:\n  gpu-01:\ngroups:\n  g: [gpu-1]\n", 4,
     "group 'g' names unknown host or group 'gpu-1' (did you mean gpu-01?)"),
    ("host group unknown", "hosts:\n  a:\n    groups: [x]\ngroups:\n  x: [b]\n", 5, "unknown host or group 'b'"),
    ("group cycle", "hosts:\n  a:\ngroups:\n  x: [y]\n  y: [a, z]\n  z: [x]\n", 6,
     "groups form a cycle: x → y → z → x"),
    ("group self", "hosts:\n  a:\ngroups:\n  x: [x]\n", 4, "cycle: x → x"),
    ("duplicate key", "hosts:\n  a:\n  b:\n  a:\n", 4, "duplicate key 'a' (first at line 2)"),
    ("reserved all", "hosts:\n  a:\ngroups:\n  all: [a]\n", 4, "'all' is reserved"),
    ("host and group", "hosts:\n  a:\ngroups:\n  a: []\n", 4, "'a' is both a host and a group"),
    ("empty file", "", 1, "the inventory is empty"),
    ("scalar", "just text\n", 1, "host 'just': expected key=value, not 'text'"),   # as Ansible reads INI
    ("ini section kind", "[gpus]\na\n[gpus:foo]\nb\n", 3, "section [gpus:foo]: expected [gpus]"),
    ("ini host var", "[gpus]\na ansible_port=22 oops\n", 2, "host 'a': expected key=value, not 'oops'"),
    ("ini quotes", "[gpus]\na ansible_user='x\n", 2, "cannot read host line"),
    ("ini group vars", "[gpus:vars]\nnot a pair\n", 2, "[gpus:vars]: expected key=value"),
    ("ini range", "[gpus]\ngpu-[01:xx]\n", 2, "host range 'gpu-[01:xx]'"),
    ("yaml scalar", "--- just text\n", 1, "must be a mapping, not a string"),
    ("no hosts", "defaults:\n  user: x\n", 1, "no `hosts:` section"),
    ("bad range", "hosts:\n  gpu[1:a]:\n", 2, "host range 'gpu[1:a]'"),
    ("huge range", "hosts:\n  gpu[1:100000]:\n", 2, "at most"),
    ("group as mapping", "hosts:\n  a:\ngroups:\n  g: {a: 1}\n", 4, "must be a list of names, not a mapping"),
    ("file name clash", "hosts:\n  'a b':\n  'a_b':\n", 3, "would share the file name 'a_b'"),
    ("range twice", "hosts:\n  g[1:2]:\n  g2:\n", 3, "'g2' is defined twice"),
    ("ansible bad key", "all:\n  host:\n    a:\n", 2, "group 'all': unknown key 'host' (did you mean hosts?)"),
    ("ansible cycle", "all:\n  children:\n    a:\n      children:\n        b:\n          children:\n            a:\n",
     3, "groups form a cycle: a → b → a"),
    ("ansible hosts list", "all:\n  hosts:\n    - a\n", 3, "hosts must be a mapping, not a list"),
    ("ansible vars list", "all:\n  vars: [1]\n", 2, "vars must be a mapping"),
]


# gpudiag's own form: an entry that cannot be read is its host's problem alone. That host is skipped with
# file:line and the reason; the other hosts (here `good`) load and run.
HOST_CASES = [
    ("port not int", "hosts:\n  a:\n    port: abc\n", 3, "port must be an integer, not a string 'abc'"),
    ("port boolean", "hosts:\n  a:\n    port: yes\n", 3, "port must be an integer, not a boolean"),
    ("port range", "hosts:\n  a:\n    port: 70000\n", 3, "port 70000 is out of range"),
    ("host not mapping", "hosts:\n  a: [1]\n", 2, "host 'a' must be a mapping"),
    ("unknown host key", "hosts:\n  a:\n    adress: x\n", 3, "unknown key 'adress' (did you mean address?)"),
    ("user not string", "hosts:\n  a:\n    user: 1000\n", 3, "user must be a string, not an integer"),
    ("empty string", "hosts:\n  a:\n    python: ''\n", 3, "python is empty"),
    ("bad engine", "hosts:\n  a:\n    container: lxc:foo\n", 3, "engine must be one of docker, podman, kubectl"),
    ("bare container", "hosts:\n  a:\n    container: foo\n", 3, "must be docker:NAME"),
    ("jump cycle", "hosts:\n  a:\n    jump: b\n  b:\n    jump: a\n", 4, "jump hosts form a cycle"),
    ("jump local", "hosts:\n  localhost:\n  a:\n    jump: localhost\n", 3, "reached locally"),
    ("bad jump", "hosts:\n  a:\n    jump: 'no such:host'\n", 2, "expected [user@]host[:port]"),
]


@pytest.mark.parametrize("name, text, line, words", HOST_CASES, ids=[c[0] for c in HOST_CASES])
def test_unreadable_host_entry_skips_that_host_alone(tmp_path, name, text, line, words):
    path = tmp_path / "inv.yaml"
    path.write_text(text + "  good:\n    address: 10.9.9.9\n")
    inv = load_inventory(path)
    assert inv.hosts["good"].skip_reason is None and inv.hosts["good"].address == "10.9.9.9"
    reasons = [h.skip_reason for n, h in inv.hosts.items() if n != "good" and h.skip_reason]
    assert any(r.startswith(f"{path}:{line}: ") and words in r and "\n" not in r for r in reasons), reasons


# An Ansible inventory is read as it is: a host whose settings gpudiag cannot honour is skipped with the
# reason (file:line), and never stops the other hosts from loading.
SKIPPED = [
    ("ansible port", "      ansible_port: twenty\n", "ansible_port must be an integer"),
    ("ansible connection", "      ansible_connection: winrm\n", "ansible_connection 'winrm' is not supported"),
    ("ansible jinja", "      ansible_host: '{{ x }}'\n", "Jinja template ('{{ x }}')"),
    ("ansible container", "      gpudiag_container: 'lxc:x'\n", "engine must be"),
    ("ssh args quotes", "      ansible_ssh_common_args: '-o \"ProxyJump=x'\n", "No closing quotation"),
    ("jump template", "      ansible_ssh_common_args: '-J {{ hop }}'\n", "is a Jinja template"),
]


@pytest.mark.parametrize("name, setting, words", SKIPPED, ids=[c[0] for c in SKIPPED])
def test_ansible_host_that_cannot_be_honoured_is_skipped_with_file_line(tmp_path, name, setting, words):
    path = tmp_path / "inv.yaml"
    path.write_text("all:\n  hosts:\n    good:\n    a:\n" + setting)
    inv = load_inventory(path)
    assert inv.hosts["good"].skip_reason is None
    reason = inv.hosts["a"].skip_reason
    assert reason.startswith(f"{path}:5: ") and words in reason and "\n" not in reason


@pytest.mark.parametrize("name, text, line, words", CASES, ids=[c[0] for c in CASES])
def test_error_names_file_line_and_problem(tmp_path, name, text, line, words):
    path = tmp_path / "inv.yaml"
    path.write_text(text)
    with pytest.raises(InventoryError) as err:
        load_inventory(path)
    message = str(err.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert words in message
    assert "\n" not in message


def test_missing_file(tmp_path):
    with pytest.raises(InventoryError, match=r"missing\.yaml: inventory file not found$"):
        load_inventory(tmp_path / "missing.yaml")


def test_unreadable_encoding(tmp_path):
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"hosts:\n  \xff\xfe:\n")
    with pytest.raises(InventoryError, match="cannot read inventory"):
        load_inventory(path)


def test_unreadable_ssh_config_is_a_one_line_error(tmp_path, monkeypatch):
    (tmp_path / "ssh_config").write_text("Host a\n  Port\n")      # a keyword with no value
    monkeypatch.setenv("GPUDIAG_SSH_CONFIG", str(tmp_path / "ssh_config"))
    path = tmp_path / "inv.yaml"
    path.write_text("hosts:\n  a:\n")
    with pytest.raises(InventoryError, match="cannot read ssh config"):
        load_inventory(path)


def test_empty_host_name(tmp_path):
    path = tmp_path / "inv.yaml"
    path.write_text("hosts:\n  '':\n    address: x\n")
    with pytest.raises(InventoryError, match=rf"^{path}:2: hosts: empty name$"):
        load_inventory(path)
