"""Pure parsers of the deployment probe, fed with recorded /proc files (one case a file)."""
import json
import os

import pytest

from probes.hostinfo import sglang_cmdline as cmdline

PROC = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "proc")


def recorded(name):
    with open(os.path.join(PROC, name), "rb") as handle:
        return handle.read()


def launch_of(name):
    return cmdline.find_launch(cmdline.parse_cmdline(recorded(name)))


def test_launch_server_with_eagle3():
    launch = launch_of("sglang-launch-server-eagle3.cmdline")
    assert launch["entry"] == "python -m sglang.launch_server"
    assert launch["interpreter"] == "/opt/venvs/sglang/bin/python3"
    args, positional = cmdline.parse_server_args(launch["args"])
    assert positional == []
    assert args["model_path"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert args["speculative_algorithm"] == "EAGLE3"
    assert args["speculative_draft_model_path"] == "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B"
    assert (args["speculative_num_steps"], args["speculative_eagle_topk"], args["speculative_num_draft_tokens"]) \
        == (5, 8, 32)
    assert args["mem_fraction_static"] == 0.6 and args["cuda_graph_max_bs"] == 8
    assert args["tp_size"] == 8 and args["dp_size"] is None
    assert args["host"] == "0.0.0.0" and args["port"] == 30000
    assert args["disable_cuda_graph"] is False
    assert args["api_key"] == cmdline.REDACTED


def test_sglang_serve_with_equals_and_lists():
    launch = launch_of("sglang-serve-dp-attention.cmdline")
    assert launch["entry"] == "sglang serve" and launch["interpreter"] == "/usr/bin/python3"
    args, _ = cmdline.parse_server_args(launch["args"])
    assert (args["tp_size"], args["dp_size"], args["ep_size"]) == (8, 8, 8)
    assert args["enable_dp_attention"] is True
    assert args["cuda_graph_bs"] == [1, 2, 4, 8, 16, 32]
    assert args["trust_remote_code"] is True
    assert args["port"] == 30001


def test_shell_wrapper_is_parsed_up_to_the_pipe():
    launch = launch_of("bash-c-wrapper.cmdline")
    assert launch["embedded"] is True and launch["interpreter"] == "python"
    args, _ = cmdline.parse_server_args(launch["args"])
    assert args["model_path"] == "Qwen/Qwen3-8B"
    assert args["disable_cuda_graph"] is True
    assert args["port"] == 30002
    assert "tee" not in json.dumps(args)


def test_numactl_wrapper_and_underscored_flags():
    launch = launch_of("numactl-wrapper.cmdline")
    assert launch["interpreter"] == "/opt/venv/bin/python"
    args, _ = cmdline.parse_server_args(launch["args"])
    assert args["mem_fraction_static"] == 0.85
    assert args["speculative_algorithm"] == "NEXTN"
    assert args["tp_size"] == 4
    assert args["cuda_graph_bs"] == [1, 2, 4, 8]


def test_srt_server_module():
    assert launch_of("srt-server.cmdline")["entry"] == "python -m sglang.srt.server"


@pytest.mark.parametrize("name", sorted(n for n in os.listdir(PROC) if n.startswith("not-server-")))
def test_lookalikes_are_not_servers(name):
    assert launch_of(name) is None


def test_flag_forms():
    flags, positional = cmdline.split_flags(["--a", "1", "--b=2", "--c", "--d", "x", "y", "--e", "-3", "--f="])
    assert flags == {"a": "1", "b": "2", "c": True, "d": ["x", "y"], "e": "-3", "f": ""}
    assert positional == []
    args, _ = cmdline.parse_server_args(["--tp", "eight", "--disable-cuda-graph", "extra"])
    assert args["tp_size"] == "eight"  # kept raw: the probe reports what it saw
    assert args["disable_cuda_graph"] is True


def test_environ_keeps_only_the_allow_list():
    env = cmdline.parse_environ(recorded("sglang-server.environ"))
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
    assert env["NCCL_DEBUG"] == "INFO" and env["NCCL_IB_HCA"].startswith("mlx5_0")
    assert env["SGLANG_ENABLE_JIT_DEEPGEMM"] == "1"
    assert env["VIRTUAL_ENV"] == "/opt/venvs/sglang" and env["PYTHONPATH"] == "/opt/sglang/python"
    assert env["TORCH_CUDA_ARCH_LIST"] == "9.0"
    for name in ("HF_TOKEN", "SGLANG_API_KEY", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY", "NCCL_AUTH_TOKEN", "HOME",
                 "LANG"):
        assert name not in env
    text = json.dumps(env)
    assert "hunter2" not in text and "hf_AbCd" not in text and "sk-sglang" not in text
    assert env["SGLANG_REMOTE_URL"] == "https://<redacted>@models.internal/v1"


def test_redacted_command_line():
    argv = cmdline.parse_cmdline(recorded("sglang-launch-server-eagle3.cmdline"))
    shown = cmdline.redact_argv(argv)
    assert "sk-live-9f8e7d6c" not in shown and shown[-1] == cmdline.REDACTED
    assert cmdline.redact_argv(["--hf-token=abc", "--port", "1"]) == ["--hf-token=<redacted>", "--port", "1"]


def test_stat_with_spaces_in_the_name():
    assert cmdline.parse_stat(recorded("stat-with-spaces").decode()) == {"ppid": 48100, "starttime_ticks": 1843210}
    assert cmdline.parse_stat("") == {"ppid": None, "starttime_ticks": None}


def test_credentials_in_urls_are_redacted_from_args():
    args, positional = cmdline.parse_server_args(["--model-path", "https://bot:hf_secret@hub.internal/m",
                                                  "--extra", "s3://AKIA:sk@bucket/x", "git+https://u:p@h/r"])
    text = json.dumps([args, positional])
    assert "hf_secret" not in text and "AKIA" not in text and "u:p" not in text
    assert args["model_path"] == "https://<redacted>@hub.internal/m"
