"""Ansible inventory variables → the values gpudiag uses. A value gpudiag cannot use (a Jinja template,
a vault-encrypted string, an unsupported connection) becomes an Unhonoured record kept with the host:
warned about, or the host skipped, only when a command targets it."""

from __future__ import annotations

import re
import shlex
from typing import Any

import yaml

from gpudiag.inventory.base import InventoryError, Unhonoured, YamlFile, line_of
from gpudiag.transports.container import parse_container

LOCAL_CONNECTIONS = ("local", "ansible.builtin.local")
SSH_CONNECTIONS = ("ssh", "smart", "paramiko", "paramiko_ssh", "ansible.builtin.ssh", "ansible.builtin.paramiko_ssh")
# ansible_connection plugins that exec into a container from this machine → gpudiag's container engine
CONTAINER_CONNECTIONS = {
    "docker": "docker",
    "community.docker.docker": "docker",
    "podman": "podman",
    "containers.podman.podman": "podman",
    "kubectl": "kubectl",
    "kubernetes.core.kubectl": "kubectl",
    "community.kubernetes.kubectl": "kubectl",
}
# set but not honoured: gpudiag runs as the login user and authenticates with keys and the agent
_NO_BECOME = "gpudiag does not escalate privileges; the probes run as the login user"
_NO_PASSWORD = "gpudiag does not log in with passwords; it uses keys and the ssh agent"
WARN_ONLY = {
    "ansible_become": _NO_BECOME,
    "ansible_ssh_pass": _NO_PASSWORD,
    "ansible_password": _NO_PASSWORD,
    "ansible_ssh_password": _NO_PASSWORD,
}
SECRET_KEYS = ("pass", "password", "secret", "token")
# inventory variable → HostSpec field
FIELDS = {
    "ansible_host": "address",
    "ansible_ssh_host": "address",
    "ansible_port": "port",
    "ansible_ssh_port": "port",
    "ansible_user": "user",
    "ansible_ssh_user": "user",
    "ansible_ssh_private_key_file": "identity_file",
    "ansible_private_key_file": "identity_file",
    "ansible_python_interpreter": "python",
    "ansible_connection": "connection",
    "ansible_ssh_common_args": "jump",
    "ansible_ssh_extra_args": "jump",
    "gpudiag_container": "container",
    "gpudiag_jump": "jump",
    "gpudiag_server_log": "server_log",
}
VAULT_TAG = "!vault"
_PROXY_JUMP = re.compile(r"^(?:-J(?P<short>.*)|-oProxyJump=(?P<long>.*))$", re.IGNORECASE)


def read_vars(doc: YamlFile, node: yaml.Node | None, what: str) -> dict[str, Any]:
    return {key: read_var(doc, key, value, what) for key, _, value in doc.mapping(node, what)}


def read_var(doc: YamlFile, key: str, node: yaml.Node, what: str) -> Any:
    """The value as gpudiag uses it, or an Unhonoured record (kept with the host, warned about or
    skipped only if the host is targeted)."""
    try:
        return _checked_var(doc, key, node, what)
    except InventoryError as exc:
        return Unhonoured(key, str(exc), blocking=True, field=FIELDS.get(key, ""))


def _checked_var(doc: YamlFile, key: str, node: yaml.Node, what: str) -> Any:
    target = FIELDS.get(key)
    where = f"{doc.path}:{line_of(node)}"
    if node.tag == VAULT_TAG:  # an inline `!vault |` string: gpudiag holds no vault password
        if key in WARN_ONLY:
            return Unhonoured(key, f"{where}: {key} is set but not honoured: {WARN_ONLY[key]}", blocking=False)
        if target is None:
            return None  # a vaulted value gpudiag has no use for
        reason = f"{where}: {key} is vault-encrypted, which gpudiag does not decrypt"
        return Unhonoured(key, reason, blocking=True, field=target)
    if key in WARN_ONLY:
        value = doc.value(node)
        if value in (None, False, "", "no", "false", "False"):
            return None
        return Unhonoured(key, f"{where}: {key} is set but not honoured: {WARN_ONLY[key]}", blocking=False)
    if target is None:
        if any(word in key.lower() for word in SECRET_KEYS):
            return None  # a secret gpudiag has no use for is never kept
        try:
            return doc.value(node)
        except InventoryError:
            return None  # a value of a tag YAML cannot build, which gpudiag has no use for
    if target == "port":
        return doc.port(node, f"{what}: {key}", allow_digit_string=True)
    value = doc.string(node, f"{what}: {key}")
    if value is None:
        return None
    if key in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        return _proxy_jump_from_args(doc, node, value)  # other ssh options do not concern gpudiag
    if "{{" in value or "{%" in value:
        return Unhonoured(
            key,
            f"{where}: {key} is a Jinja template ({_short(value)}), which gpudiag does not evaluate",
            blocking=True,
            field=target,
        )
    if key == "ansible_connection":
        if value in LOCAL_CONNECTIONS + SSH_CONNECTIONS or value in CONTAINER_CONNECTIONS:
            return value
        return Unhonoured(
            key,
            f"{where}: ansible_connection {value!r} is not supported (local, ssh, docker, podman or kubectl)",
            blocking=True,
            field="connection",
        )
    if key == "ansible_python_interpreter" and value.startswith("auto"):
        return None  # Ansible's interpreter discovery; gpudiag's default applies
    if target == "container":
        try:
            parse_container(value)
        except ValueError as exc:
            raise doc.error(node, f"{what}: {exc}") from None
    return value


def _short(value: str) -> str:
    return repr(value if len(value) <= 60 else value[:57] + "...")


def _proxy_jump_from_args(doc: YamlFile, node: yaml.Node, args: str) -> str | None:
    """The ProxyJump inside ansible_ssh_common_args (`-J hop` or `-o ProxyJump=hop`), if any."""
    try:
        words = shlex.split(args)
    except ValueError as exc:
        raise doc.error(node, f"ssh arguments {args!r}: {exc}") from None
    for i, word in enumerate(words):
        joined = word + words[i + 1] if word in ("-J", "-o") and i + 1 < len(words) else word
        match = _PROXY_JUMP.match(joined.replace(" ", ""))
        if match:
            jump = (match.group("short") or match.group("long") or "").strip()
            if "{{" in jump:
                raise doc.error(node, f"ProxyJump {jump!r} is a Jinja template, which gpudiag does not evaluate")
            return jump or None
    return None
