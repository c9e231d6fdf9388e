"""Shared test setup: the repo root on sys.path, gpudiag's state in a session folder, and the `gpu` marker's skip
when CUDA is absent."""
import os
import socket
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def _cuda_available():
    try:
        import torch
    except Exception:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config, items):
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run scripts/gpu-check.sh on a GPU host)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def own_state_dir(tmp_path_factory):
    """gpudiag's per-user state (the key sealing derived files) in a folder of the session's own, never the
    user's home; the CLI's subprocesses inherit it."""
    before = os.environ.get("GPUDIAG_STATE")
    os.environ["GPUDIAG_STATE"] = str(tmp_path_factory.mktemp("gpudiag-state"))
    yield
    if before is None:
        os.environ.pop("GPUDIAG_STATE", None)
    else:
        os.environ["GPUDIAG_STATE"] = before


@pytest.fixture
def silent_port():
    """A TCP listener that accepts and never speaks: an ssh server that sends no banner."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    yield server.getsockname()[1]
    server.close()
