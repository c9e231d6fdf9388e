"""Install only the ansible.posix collection (its json stdout callback) from the `ansible` wheel.

The full `ansible` package unpacks tens of thousands of files (minutes); the engine tests need one
collection of it beside ansible-core. Idempotent; the wheel is cached in ~/.cache/gpudiag-ansible.
"""
import importlib.util
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

SPEC = "ansible==12.*"
PREFIX = "ansible_collections/ansible/posix/"


def installed() -> bool:
    try:
        return importlib.util.find_spec("ansible_collections.ansible.posix") is not None
    except ModuleNotFoundError:   # no ansible_collections at all
        return False


def main() -> int:
    if installed():
        return 0
    cache = Path(os.environ.get("GPUDIAG_ANSIBLE_CACHE", Path.home() / ".cache" / "gpudiag-ansible"))
    wheels = sorted(cache.glob("ansible-*.whl"))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
                        SPEC, "-d", str(cache)], check=True)
        wheels = sorted(cache.glob("ansible-*.whl"))
    target = Path(sysconfig.get_paths()["purelib"])
    with zipfile.ZipFile(wheels[-1]) as wheel:
        members = [m for m in wheel.namelist() if m.startswith(PREFIX)]
        wheel.extractall(target, members)
    print(f"ansible.posix from {wheels[-1].name} into {target} ({len(members)} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
