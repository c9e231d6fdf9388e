"""The GPU tests' own time limits, in one place: the tests wait no longer than these, and
tests/probes/test_cuda_graph_gpu_check.py checks scripts/gpu-check.sh's step limits against them."""

CHILD_CALL_S = 25.0   # one worker call in the fast tests: a fresh child, torch, a CUDA context, a small kernel
FAST_CHILD_CALLS = 5  # worker calls across the fast tests (poisoned child 3, memory cap 1, device info 1)
SGLANG_IMPORT_S = 25.0  # importing sglang.launch_server once, before the launches (cached for them)
SGLANG_LAUNCH_S = 65.0  # one sglang server's work time: import check, start, dummy weights, capture, requests
SGLANG_STOP_S = 10.0  # the server group's TERM-to-KILL grace after each launch (launcher.ServerProcess.stop)
SGLANG_LAUNCHES = 3  # one per algorithm: EAGLE, EAGLE3, DFLASH
GPU_CHECK_LAUNCHES = 1  # scripts/gpu-check.sh launches EAGLE alone: one call holds no more
