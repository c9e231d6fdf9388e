"""torch_caps on a real CUDA device (marked gpu: skipped without CUDA)."""
import pytest

from probes import torch_caps
from probes.context import ProbeContext
from probes.hostinfo import foreach_checks, foreach_path

pytestmark = pytest.mark.gpu


def test_every_pair_verified_on_cuda0():
    data = torch_caps.collect(ProbeContext(options={"torch_caps": {"cuda": True}}))
    cuda = data["checks"]["cuda:0"]
    assert cuda["status"] == "ok", cuda
    assert set(cuda["pairs"].values()) == {"ok"}, cuda["pairs"]
    assert cuda["non_contiguous"] == "ok"
    assert cuda["mismatched_shapes"].startswith("raises:")
    assert cuda["mixed_pairs_one_call"] == "ok" or cuda["mixed_pairs_one_call"].startswith("raises:")
    assert set(cuda["paths"]) == {"contiguous_same_dtype", "non_contiguous", "mixed_pairs_one_call"}


def test_profiler_tells_the_fused_kernel_from_the_per_tensor_fallback():
    import torch
    paths = foreach_path.cuda_paths(torch, "cuda:0")
    contiguous = paths["contiguous_same_dtype"]
    if contiguous["path"] == "unknown" and contiguous["launches"] == 0:
        pytest.skip("the profiler records no CUDA kernels here: %s" % contiguous["reason"])
    assert contiguous["path"] == "fast", contiguous
    assert any("multi_tensor_apply" in name for name in contiguous["kernels"])
    # Strided sources (sizes/strides differ from their destinations) and mixed source dtypes fall back.
    assert paths["non_contiguous"]["path"] == "per_tensor", paths["non_contiguous"]
    assert paths["mixed_pairs_one_call"]["path"] == "per_tensor", paths["mixed_pairs_one_call"]
    assert paths["non_contiguous"]["launches"] >= 3


def test_non_blocking_copies_between_pinned_host_memory_and_the_device():
    import torch
    directions = foreach_checks.non_blocking_directions(torch, "cuda:0")
    assert directions == {"host_to_device": "ok", "device_to_host": "ok"}
    cuda = foreach_checks.check_device(torch, "cuda:0", True)
    assert cuda["non_blocking"] == "ok" and cuda["non_blocking_directions"] == directions
