"""Where Ansible finds an inventory and the variables kept beside it, found as ansible-core finds them.

- `-i DIR`: every entry of DIR in sorted name order, subdirectories walked the same way, skipping
  hidden names, `group_vars`, `host_vars`, `vars_plugins` and the ignored extensions
  (INVENTORY_IGNORE_EXTS: REJECT_EXTS + .orig .cfg .retry).
- `group_vars/NAME` and `host_vars/NAME` beside each source given (the directory itself for `-i DIR`,
  the file's directory for `-i FILE`; not beside files inside a directory): the first of NAME,
  NAME.yml, NAME.yaml, NAME.json that exists; a directory is read whole, files in sorted order, hidden
  names, backups (`~`) and other extensions skipped (DataLoader.find_vars_files).
- With no `-i`: ANSIBLE_INVENTORY, else `inventory` in `[defaults]` of the first ansible.cfg found
  (ANSIBLE_CONFIG, ./ansible.cfg, ~/.ansible.cfg, /etc/ansible/ansible.cfg), relative paths under
  the file's directory. Ansible's own fallback /etc/ansible/hosts is not read: gpudiag uses an
  inventory only when one is named.
- The login Ansible uses where a host sets no ansible_user: ANSIBLE_REMOTE_USER, else `remote_user` in
  `[defaults]` of that same ansible.cfg (Ansible passes it to ssh, so it wins over ssh config's User).
"""

from __future__ import annotations

import configparser
import os
from pathlib import Path

VARS_EXTENSIONS = (".yml", ".yaml", ".json")
_IGNORED_NAMES = ("group_vars", "host_vars", "vars_plugins")
_IGNORED_EXTS = (".pyc", ".pyo", ".swp", ".bak", "~", ".rpm", ".md", ".txt", ".rst", ".orig", ".cfg", ".retry")
MAX_SOURCES = 256  # files one inventory directory may hold; more is not an inventory


def inventory_files(source: Path) -> list[Path]:
    """The files a source stands for, in the order Ansible parses them."""
    if not source.is_dir():
        return [source]
    found: list[Path] = []
    for name in sorted(os.listdir(source)):
        if name.startswith(".") or name in _IGNORED_NAMES or name.endswith(_IGNORED_EXTS):
            continue
        found += inventory_files(source / name)
        if len(found) > MAX_SOURCES:
            break
    return found[: MAX_SOURCES + 1]


def unread_source(path: Path) -> str | None:
    """Why a source is not an inventory file gpudiag reads, or None: Ansible would run a script and load an
    inventory plugin's configuration (`plugin: NAME`); gpudiag does neither."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return None  # the reader words the problem
    export = "ansible-inventory -i SOURCE --list --yaml > inventory.yml gives a file gpudiag reads"
    if head.startswith(b"#!") and os.access(path, os.X_OK):
        return f"an inventory script, not run (gpudiag reads inventory files; {export})"
    first = next((line.strip() for line in head.splitlines() if line.strip() and not line.startswith(b"#")), b"")
    if first.startswith(b"plugin:"):
        name = first.split(b":", 1)[1].strip().decode("utf-8", "replace")[:80]
        return f"an inventory plugin configuration (plugin: {name}), not run ({export})"
    return None


def vars_basedir(source: Path) -> Path:
    return source if source.is_dir() else source.parent


def vars_files(basedir: Path, subdir: str, name: str) -> list[Path]:
    """group_vars/NAME or host_vars/NAME files, in the order Ansible merges them (later wins)."""
    if not name or name.startswith(os.sep):
        return []
    base = basedir / subdir
    if not base.is_dir():
        return []
    for ext in ("",) + VARS_EXTENSIONS:
        path = base / f"{name}{ext}"
        if path.is_dir():
            return _dir_files(path)
        if path.exists():
            return [path]
    return []


def _dir_files(path: Path, depth: int = 0) -> list[Path]:
    found: list[Path] = []
    if depth > 8:
        return found
    for name in sorted(os.listdir(path)):
        if name.startswith(".") or name.endswith("~"):
            continue
        full, ext = path / name, os.path.splitext(name)[1]
        if full.is_dir() and not ext:
            found += _dir_files(full, depth + 1)
        elif full.is_file() and (not ext or ext in VARS_EXTENSIONS):
            found.append(full)
    return found


def default_sources() -> tuple[list[str], str] | None:
    """The inventory Ansible uses with no `-i` when one is named: (sources, where it was named)."""
    env = os.environ.get("ANSIBLE_INVENTORY", "").strip()
    if env:
        return _split(env, Path.cwd()), "ANSIBLE_INVENTORY"
    found = _config_default("inventory")
    return (_split(found[0], found[1].parent), str(found[1])) if found else None


def remote_user() -> str | None:
    """The user Ansible logs in as where the inventory names none, or None (ssh's own choice)."""
    env = os.environ.get("ANSIBLE_REMOTE_USER", "").strip()
    if env:
        return env
    found = _config_default("remote_user")
    return found[0] if found else None


def _config_default(key: str) -> tuple[str, Path] | None:
    """(value, file) of `key` in `[defaults]` of the ansible.cfg Ansible reads; None when unset or unreadable."""
    cfg = _config_file()
    if cfg is None:
        return None
    parser = configparser.ConfigParser(interpolation=None, inline_comment_prefixes=(";",))
    try:
        parser.read(cfg, encoding="utf-8")
        value = parser.get("defaults", key, fallback="").strip()
    except (configparser.Error, OSError, UnicodeDecodeError):
        return None
    return (value, cfg) if value else None


def _split(value: str, base: Path) -> list[str]:
    paths = [os.path.expanduser(part.strip()) for part in value.split(",") if part.strip()]
    return [p if os.path.isabs(p) else str(base / p) for p in paths]


def _config_file() -> Path | None:
    env = os.environ.get("ANSIBLE_CONFIG", "").strip()
    candidates = [Path(os.path.expanduser(env))] if env else []
    if candidates and candidates[0].is_dir():
        candidates = [candidates[0] / "ansible.cfg"]
    cwd = Path.cwd()
    if not cwd.stat().st_mode & 0o002:  # Ansible ignores ./ansible.cfg in a world-writable directory
        candidates.append(cwd / "ansible.cfg")
    candidates += [Path.home() / ".ansible.cfg", Path("/etc/ansible/ansible.cfg")]
    return next((c for c in candidates if c.is_file()), None)
