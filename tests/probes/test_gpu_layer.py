"""The one GPU layer: env's list or one nvidia-smi query with env's timeout, one policy, one mapping."""
import os
import time

from probes import gpu_layer
from probes.context import ProbeContext

UUID0, UUID1 = "GPU-0a1b2c3d-1111-2222-3333-444455556666", "GPU-9f8e7d6c-aaaa-bbbb-cccc-ddddeeeeffff"


def stand_in_smi(tmp_path, monkeypatch, body):
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    monkeypatch.setenv("PATH", "%s%s/usr/bin:/bin" % (tmp_path, os.pathsep))


def test_envs_list_is_used_as_is_and_a_hung_nvidia_smi_is_cut_at_envs_timeout(tmp_path, monkeypatch):
    devices = [{"index": 0, "uuid": UUID0, "memory_used_mib": 1, "processes": []}]
    env = {"env": {"gpus": {"status": "ok", "source": "nvidia-smi", "devices": devices}}}
    assert gpu_layer.snapshot(ProbeContext(results=env)) == {"devices": devices, "source": "env", "why": None}
    stand_in_smi(tmp_path, monkeypatch, "exec sleep 30\n")
    started = time.monotonic()
    seen = gpu_layer.snapshot(ProbeContext(options={"env": {"command_timeout": 1}}))
    assert time.monotonic() - started < 10
    assert seen["devices"] is None and "no answer within 1 s" in seen["why"]
    assert seen["why"].startswith("the env probe gave no nvidia-smi GPU list")


def test_policy_idle_busy_unlistable_server_and_force():
    devices = [{"index": 0, "uuid": UUID0, "memory_used_mib": 3, "processes": []},
               {"index": 1, "uuid": UUID1, "memory_used_mib": 3, "processes": None},
               {"index": 2, "uuid": "GPU-2", "memory_used_mib": 5000, "processes": []},
               {"index": 3, "uuid": "GPU-3", "memory_used_mib": 3, "processes": []}]
    servers = [{"pid": 8, "cuda_visible_devices": "GPU-3", "args": {"port": 30000}}]
    plain = gpu_layer.verdicts(devices, servers)
    assert [plain[gpu_layer.normalize_uuid(d["uuid"])]["kind"] for d in devices] == ["idle", "busy", "busy", "server"]
    assert [v["use"] for v in plain.values()] == [True, False, False, False]
    forced = gpu_layer.verdicts(devices, servers, force=True)
    assert [v["use"] for v in forced.values()] == [True, True, True, False]
    assert gpu_layer.refusal(forced["3"]) == "serving sglang (pid 8, port 30000): " + gpu_layer.NEVER
    assert gpu_layer.refusal(plain[gpu_layer.normalize_uuid(UUID1)]) == (
        "busy: its compute processes cannot be listed: counted as busy; " + gpu_layer.FORCE_HINT)
    # A server whose CUDA_VISIBLE_DEVICES cannot be mapped holds every GPU.
    mig = [{"pid": 9, "cuda_visible_devices": "MIG-1"}]
    assert {v["kind"] for v in gpu_layer.verdicts(devices, mig, force=True).values()} == {"server"}


def test_one_mapping_for_indices_uuids_and_prefixes():
    uuids = {UUID0: 0, UUID1: 1}
    assert gpu_layer.visible_index("1", uuids) == 1
    assert gpu_layer.visible_index("gpu-9f8e", uuids) == 1          # a unique prefix, any case
    assert gpu_layer.visible_index("GPU-", uuids) is None             # ambiguous
    assert gpu_layer.server_gpus({"args": {"tp_size": 2, "dp_size": 2, "base_gpu_id": 4}}) == [4, 5, 6, 7]
    assert gpu_layer.verdict_for({}, "GPU-x")["kind"] == "busy"       # unknown to nvidia-smi: busy


def test_without_nvidia_smi_torch_reads_the_gpus_in_a_child_of_the_chosen_python(tmp_path, monkeypatch):
    import sys

    from probes.hostinfo import gpus
    monkeypatch.setenv("PATH", str(tmp_path))          # no nvidia-smi
    no_torch = tmp_path / "python"
    no_torch.write_text('#!/bin/sh\nexec %s -S "$@"\n' % sys.executable)   # -S: no site-packages, no torch
    no_torch.chmod(0o755)
    listed, topology = gpus.collect_gpus(5.0, torch_fallback=True, python=str(no_torch))
    assert listed["status"] == "skipped" and topology["status"] == "skipped"
    assert listed["reason"].startswith("nvidia-smi not found on PATH; torch not importable")
    assert listed["reason"].endswith("(torch.cuda under %s)" % no_torch)
    missing, _ = gpus.collect_gpus(5.0, torch_fallback=True, python=str(tmp_path / "gone"))
    assert missing["reason"].startswith("nvidia-smi not found on PATH; torch.cuda under %s: cannot start"
                                        % (tmp_path / "gone"))
    with_torch, _ = gpus.collect_gpus(5.0, torch_fallback=True, python=sys.executable)
    assert with_torch["status"] == "skipped" and "torch sees no CUDA device" in with_torch["reason"]


def test_an_nvidia_smi_that_failed_for_env_is_not_asked_again(tmp_path, monkeypatch):
    stand_in_smi(tmp_path, monkeypatch, "touch %s/asked\nexit 9\n" % tmp_path)
    failed = {"env": {"gpus": {"status": "skipped", "source": "nvidia-smi", "devices": [],
                               "reason": "nvidia-smi: no answer within 10 s"}}}
    seen = gpu_layer.snapshot(ProbeContext(results=failed))
    assert seen["devices"] is None and "no answer within 10 s" in seen["why"]
    assert not (tmp_path / "asked").exists()


# -- the GPUs a live server holds, counted as sglang counts them ---------------------------------------------
H200_UUIDS = {"GPU-%d0000000-aaaa-bbbb-cccc-00000000000%d" % (n, n): n for n in range(8)}


def _held(args, env=None, visible=None, uuids=None):
    from probes import gpu_layer
    server = {"pid": 7, "args": args, "env": env or {}, "cuda_visible_devices": visible}
    return gpu_layer.server_gpus(server, uuids or H200_UUIDS)


def test_a_server_holds_tp_times_pp_times_dp_gpus_from_its_base_with_its_step():
    # `--tp 4 --pp-size 2`: sglang starts 8 schedulers on GPUs 0-7 (pp_rank * tp + tp_rank), not 4.
    assert _held({"tp_size": 4, "pp_size": "2"}) == [0, 1, 2, 3, 4, 5, 6, 7]
    assert _held({"tp_size": 2, "pipeline_parallel_size": "2", "base_gpu_id": "4"}) == [4, 5, 6, 7]
    assert _held({"tp_size": 2, "dp_size": 2, "base_gpu_id": "1"}) == [1, 2, 3, 4]
    assert _held({"tp_size": 4, "gpu_id_step": "2"}) == [0, 2, 4, 6]
    # Attention data parallelism splits the TP group: dp ranks share its GPUs.
    assert _held({"tp_size": 4, "dp_size": 4, "enable_dp_attention": True}) == [0, 1, 2, 3]
    assert _held({"tp_size": "garbage"}) == [0]
    from probes.hostinfo.sglang_cmdline import parse_server_args
    parsed, _ = parse_server_args(["--model-path", "/m", "--tp", "4", "--pp-size", "2", "--base-gpu-id", "0"])
    assert _held(parsed) == list(range(8))   # as the deployment probe parses a live command line


def test_a_container_on_gpus_2_and_3_holds_the_hosts_gpus_2_and_3():
    assert _held({"tp_size": 2}, {"NVIDIA_VISIBLE_DEVICES": "2,3"}) == [2, 3]
    assert _held({"tp_size": 1, "base_gpu_id": "1"}, {"NVIDIA_VISIBLE_DEVICES": "2,3"}) == [3]
    # By uuid, as nvidia-smi lists them; CUDA_VISIBLE_DEVICES inside the container indexes its GPUs.
    uuids = "GPU-30000000-aaaa-bbbb-cccc-000000000003,GPU-20000000-aaaa-bbbb-cccc-000000000002"
    assert _held({"tp_size": 2}, {"NVIDIA_VISIBLE_DEVICES": uuids}) == [3, 2]
    assert _held({"tp_size": 1}, {"NVIDIA_VISIBLE_DEVICES": uuids}, visible="1") == [2]
    assert _held({"tp_size": 2}, {"NVIDIA_VISIBLE_DEVICES": "all"}) == [0, 1]


def test_a_server_whose_gpus_cannot_be_placed_makes_every_gpu_its_own():
    from probes import gpu_layer
    # tp 4 inside a container given two GPUs: the mapping cannot hold, so every GPU is protected.
    assert _held({"tp_size": 4}, {"NVIDIA_VISIBLE_DEVICES": "2,3"}) is None
    assert _held({"tp_size": 2}, {"NVIDIA_VISIBLE_DEVICES": "GPU-ffffffff-0000"}) is None
    servers = [{"pid": 7, "args": {"tp_size": 4}, "env": {"NVIDIA_VISIBLE_DEVICES": "2,3"}}]
    assert gpu_layer.protected_gpus(servers, H200_UUIDS, range(8)) == set(range(8))
    held = [{"pid": 8, "args": {"tp_size": 4, "pp_size": "2"}}]
    reasons = gpu_layer.busy_reasons([{"index": n, "processes": [], "memory_used_mib": 0} for n in range(8)], held)
    assert sorted(reasons) == list(range(8))   # --force never reaches GPUs 4-7 of a pp=2 server
