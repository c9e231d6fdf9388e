"""What the fleet benchmarks share: the integration tests' sshd fleet, used as a plain module."""
from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@functools.lru_cache(maxsize=1)
def load_fleet_module():
    """tests/integration/conftest.py imported as a plain module (no pytest session): SSHDFleet, descendants."""
    spec = importlib.util.spec_from_file_location("gpudiag_sshd_fleet", ROOT / "tests" / "integration" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module
