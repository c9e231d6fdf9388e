"""What the cuda_graph probe's device query (a torch child under the host's chosen interpreter) said, as the
probe records it: the environment block, and why no cell can run when the child found no usable CUDA device.
"""


def environment(ctx, info):
    env = ctx.results.get("env") or {}
    gpu_block = env.get("gpus") or {}
    block = {"torch": info.get("torch"), "cuda": info.get("cuda"), "has_foreach_copy": info.get("has_foreach_copy"),
             "driver": gpu_block.get("driver_version"), "sglang": (ctx.results.get("sglang_source") or {}).get("version"),
             "devices": info.get("devices") or []}
    # Declared a bool when known: without torch the child could not ask CUDA, so the key is left out, not null.
    if isinstance(info.get("cuda_available"), bool):
        block["cuda_available"] = info["cuda_available"]
    return block


def no_cuda_reason(info, python):
    if info.get("status") != "ok":
        return "querying torch and CUDA in a child under %s failed: %s" % (
            python, info.get("detail") or info.get("status"))
    if not info.get("torch"):
        return "under %s: %s" % (python, info.get("reason") or "torch is not installed")
    if not info.get("cuda_available") or not info.get("devices"):
        extra = "; " + info["reason"] if info.get("reason") else ""
        return "no CUDA device visible to torch %s under %s%s" % (info["torch"], python, extra)
    return None
