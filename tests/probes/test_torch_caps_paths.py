"""Telling the fused `_foreach_copy_` kernel from the per-tensor fallback, from profiler events (fakes here;
tests/gpu/test_torch_caps_cuda.py profiles a real device)."""
import types

from probes.hostinfo import foreach_path


class DeviceType(object):
    """Stands for torch.autograd.DeviceType members, which print as `DeviceType.CUDA`."""

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "DeviceType." + self.name


CPU, CUDA = DeviceType("CPU"), DeviceType("CUDA")


def event(name, device=CUDA, kernels=()):
    return types.SimpleNamespace(name=name, device_type=device, kernels=list(kernels))


FUSED = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)" \
        "::TensorListMetadata<2>, at::native::(anonymous namespace)::CopyFunctor<float, float, float, 2, 1, 1>>"
ELEMENTWISE = "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::" \
              "direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}>>"
MEMCPY = "Memcpy DtoD (Device -> Device)"


def test_a_multi_tensor_kernel_is_the_fast_path():
    names = foreach_path.device_kernel_names([event("aten::_foreach_copy_", CPU), event(FUSED),
                                              event("cudaLaunchKernel", CPU)])
    assert names == [FUSED]
    found = foreach_path.classify(names, 3)
    assert found["path"] == "fast" and found["launches"] == 1 and found["reason"] is None


def test_one_copy_per_tensor_is_the_fallback():
    names = foreach_path.device_kernel_names([event("aten::copy_", CPU), event(MEMCPY), event(ELEMENTWISE),
                                              event(ELEMENTWISE)])
    found = foreach_path.classify(names, 3)
    assert found["path"] == "per_tensor" and found["launches"] == 3
    assert found["kernels"] == sorted({MEMCPY[:120], ELEMENTWISE[:120]})


def test_too_few_copies_or_no_kernels_are_unknown():
    assert foreach_path.classify([MEMCPY], 3)["path"] == "unknown"
    nothing = foreach_path.classify(foreach_path.device_kernel_names([event("aten::copy_", CPU)]), 3)
    assert nothing["path"] == "unknown" and "no device kernels" in nothing["reason"]


def test_kernels_hung_under_cpu_ops_by_older_profilers():
    legacy = [event("aten::_foreach_copy_", CPU, kernels=[types.SimpleNamespace(name=FUSED, device=0)])]
    assert foreach_path.classify(foreach_path.device_kernel_names(legacy), 3)["path"] == "fast"


def test_a_profiler_that_fails_gives_unknown_with_the_reason():
    class NoProfiler(object):
        def _foreach_copy_(self, dst, src):
            for d, s in zip(dst, src):
                d.copy_(s)

        class cuda(object):
            @staticmethod
            def synchronize():
                pass

        class profiler(object):
            class ProfilerActivity(object):
                CPU, CUDA = "cpu", "cuda"

            @staticmethod
            def profile(activities):
                raise RuntimeError("CUPTI_ERROR_INSUFFICIENT_PRIVILEGES")

    import torch
    found = foreach_path.profile_path(NoProfiler(), [torch.zeros(2)], [torch.ones(2)])
    assert found["path"] == "unknown" and "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES" in found["reason"]


def test_the_lists_have_the_layouts_they_are_named_for():
    import torch
    lists = foreach_path.path_lists(torch, "cpu")
    dst, src = lists["contiguous_same_dtype"]
    assert all(t.is_contiguous() and t.dtype == torch.float32 for t in src + dst)
    dst, src = lists["non_contiguous"]
    assert not any(t.is_contiguous() for t in src) and len({t.dtype for t in src}) == 1
    assert [tuple(d.shape) for d in dst] == [tuple(s.shape) for s in src]
    dst, src = lists["mixed_pairs_one_call"]
    assert len({t.dtype for t in src}) == 3
