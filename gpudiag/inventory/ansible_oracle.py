"""Inventory sources gpudiag does not read itself, read the way Ansible reads them.

- An inventory script or an inventory plugin's configuration (`plugin: NAME`) is handed to the real
  `ansible-inventory -i SOURCE --list --yaml` when ansible-core is installed: Ansible runs the script or the
  plugin, and its answer (an `all:` YAML inventory, host variables merged) is read as any YAML inventory.
  Without ansible-core, or when it fails, the caller says why the source is not read.
- A host list (`-i 'h1,h2,'`, `h1:2222,h2`), which Ansible's host_list plugin reads, is read here.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from shutil import which

from gpudiag.inventory.base import InventoryError, YamlFile

TIMEOUT_S = 120.0  # a script that asks a CMDB, a cloud plugin that lists instances
_HOST_PORT = re.compile(r"^(?P<host>[^:\[\]\s]+)(?::(?P<port>\d+))?$")


def is_host_list(text: str) -> bool:
    """`h1,h2,` as Ansible's host_list plugin takes it: a comma, and no file of that name."""
    return "," in text and not os.path.exists(text)


def host_list_doc(text: str) -> YamlFile:
    """The hosts of a comma-separated list, as an `all: hosts:` inventory labelled with the list itself."""
    lines = ["all:", "  hosts:"]
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        match = _HOST_PORT.match(entry)
        if not match:
            raise InventoryError(f"{text}: {entry!r} is not a host or host:port")
        lines.append(
            f"    {match.group('host')!r}:"
            + (f" {{ansible_port: {match.group('port')}}}" if match.group("port") else "")
        )
    if len(lines) == 2:
        raise InventoryError(f"{text}: no host in this list")
    return YamlFile(f"{text} (host list)", text="\n".join(lines) + "\n")


def through_ansible(source: Path) -> tuple[YamlFile | None, str]:
    """(the source as ansible-inventory lists it, "") or (None, why not)."""
    program = which("ansible-inventory")
    if program is None:
        return None, "ansible-inventory is not installed"
    try:
        proc = subprocess.run(
            [program, "-i", str(source), "--list", "--yaml"],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired:
        return None, f"ansible-inventory gave no answer within {TIMEOUT_S:.0f} s"
    except OSError as exc:
        return None, f"ansible-inventory could not run: {exc}"
    # A source it cannot parse is a warning and an empty inventory (exit 0), not a failure.
    failed = [line.strip() for line in proc.stderr.splitlines() if "Unable to parse" in line or "ERROR" in line]
    if proc.returncode != 0 or failed:
        last = (failed or proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return None, f"ansible-inventory failed: {' '.join(last.split())[:300]}"
    # Errors and "defined at" name the source the answer came from.
    return YamlFile(f"{source} (through ansible-inventory)", text=proc.stdout), ""
