"""torch_caps on a real CUDA device (marked gpu: skipped without CUDA)."""
import pytest

from probes import torch_caps
from probes.context import ProbeContext

pytestmark = pytest.mark.gpu


def test_every_pair_verified_on_cuda0():
    data = torch_caps.collect(ProbeContext(options={"torch_caps": {"cuda": True}}))
    cuda = data["checks"]["cuda:0"]
    assert cuda["status"] == "ok", cuda
    assert set(cuda["pairs"].values()) == {"ok"}, cuda["pairs"]
    assert cuda["non_contiguous"] == "ok"
    assert cuda["mismatched_shapes"].startswith("raises:")
    assert cuda["mixed_pairs_one_call"] == "ok" or cuda["mixed_pairs_one_call"].startswith("raises:")
