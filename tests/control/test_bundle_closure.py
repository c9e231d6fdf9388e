"""A probe's payload holds every probe module it imports: each module of each selection imports through the
real bootstrap's in-memory importer, with nothing of the checkout on the path."""
import subprocess
import sys

import pytest

from gpudiag.bundle import probe_modules
from probes.boot import child_argv, child_payload
from probes.catalog import ALL_PROBES

IMPORT_ALL = '''
import importlib, json, sys
def main(payload):
    failed = {}
    for name in payload["modules"]:
        if name.startswith("probes"):
            try:
                importlib.import_module(name)
            except ImportError as exc:
                failed[name] = str(exc)
    sys.stdout.write(json.dumps(failed) + "\\n")
    return 0
'''


@pytest.mark.parametrize("probe", ALL_PROBES)
def test_every_module_of_a_probes_payload_imports_from_the_payload_alone(probe, tmp_path):
    modules = {name: list(value) for name, value in probe_modules([probe]).items()}
    modules["gpudiag_import_all"] = [False, IMPORT_ALL]
    proc = subprocess.run(child_argv(sys.executable), input=child_payload("gpudiag_import_all:main", modules),
                          capture_output=True, timeout=120, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert proc.stdout.decode().strip().splitlines()[-1] == "{}"
