"""Credentials redacted by their shape, whatever name carries them; ordinary serving values kept as they are."""
import json

import pytest

from probes.hostinfo.secrets import REDACTED, random_looking, redact_argv, redact_value


@pytest.mark.parametrize("value, secret, kept", [
    ("sk-proj-Ab3dEf5gHi7jKl9mNo1pQr", "Ab3dEf5g", ""),
    ("hf_AbCdEfGhIjKlMnOpQrStUv12", "AbCdEf", ""),
    ("Bearer abc.def-ghi", "abc.def", "Bearer "),
    ("Authorization: Basic dXNlcjpwYXNz", "dXNlcjpw", "Authorization: "),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "dozjg", ""),
    ("https://u:p4ss@h/x?access_token=abc123&y=1", "p4ss", "https://"),
    ("https://h/x?access_token=abc123&y=1", "abc123", "https://h/x?access_token="),
    ("Zk3Qp9Xw7Lm2Rt8VbN4cYhJ6sDf1Gk5T", "Zk3Qp9", ""),
    ("foo=1,api_key=zz9", "zz9", "foo=1,api_key="),
    ("SGLANG_OPTS=token=abc:def", "abc:def", "SGLANG_OPTS=token="),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----", "b3Blbn", ""),
    ("AKIAIOSFODNN7EXAMPLE", "IOSFODNN", ""),
    ("ghp_AbCdEfGhIjKlMnOpQrStUv1234", "AbCdEf", ""),
])
def test_credential_shapes_are_redacted(value, secret, kept):
    shown = redact_value(value)
    assert REDACTED in shown and shown.startswith(kept) and secret not in shown, shown


@pytest.mark.parametrize("value", [
    "/models/Qwen/Qwen2.5-72B-Instruct-AWQ", "DeepSeek-V3-0324-Instruct-AWQ-Quantized",
    "models--meta-llama--Llama-3.1-70B/snapshots/0123456789abcdef0123456789abcdef01234567",
    "expandable_segments:True,max_split_size_mb:128", "flashinfer", "0,1,2,3", "127.0.0.1:30000",
    "/usr/local/lib/python3.11/site-packages/nvidia/cudnn/lib:/usr/local/cuda/lib64", "fa3", "bfloat16",
    "TORCH_NCCL_AVOID_RECORD_STREAMS=1", "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct",
    "GPU-5f3a9c2e-1b7d-4e8a-9f0c-2d6b8e4a1c3f,GPU-8a1b2c3d-4e5f-6789-abcd-ef0123456789",
    "MIG-GPU-8a1b2c3d-4e5f-6789-abcd-ef0123456789/1/0", "Qwen3-235B-A22B-Instruct-2507-FP8",
    "lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B", "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic",
])
def test_ordinary_values_are_kept(value):
    assert redact_value(value) == value


def test_json_values_are_redacted_key_by_key_and_keep_the_rest():
    value = json.dumps({"api_key": "x1", "rope_scaling": {"factor": 2, "hf_token": "y"},
                        "headers": [{"Authorization": "Token zz"}], "use_auth": True})
    shown = json.loads(redact_value(value))
    assert shown == {"api_key": REDACTED, "rope_scaling": {"factor": 2, "hf_token": REDACTED},
                     "headers": [{"Authorization": REDACTED}], "use_auth": True}
    assert redact_value('{"rope_scaling": {"factor": 2}}') == '{"rope_scaling": {"factor": 2}}'   # untouched text


def test_flag_names_holding_license_sk_and_friends_hide_their_values():
    argv = ["python", "-m", "sglang.launch_server", "--license", "L1x", "--sk", "S1x", "--licence-key=L2x",
            "--my-credential", "C1x", "--json-model-override-args", '{"api_key": "J1x", "rope": 1}',
            "--chat-template", "Bearer T0k3nValue", "--port", "30000"]
    shown = redact_argv(argv)
    assert not any(secret in " ".join(shown) for secret in ("L1x", "S1x", "L2x", "C1x", "J1x", "T0k3nValue"))
    assert shown[-2:] == ["--port", "30000"] and '"rope": 1' in shown[-5]


def test_random_looking_tells_keys_from_words():
    assert random_looking("Zk3Qp9Xw7Lm2Rt8VbN4cYhJ6sDf1Gk5T")
    assert not random_looking("Meta-Llama-3.1-70B-Instruct-FP8-Dynamic")
    assert not random_looking("0123456789abcdef0123456789abcdef")   # a hex digest is an identifier


def test_quoted_log_lines_lose_credential_shapes_too():
    from probes.crashlog.redact import redact_line

    line = ("ERROR 401 for key sk-proj-Ab3dEf5gHi7jKl9mNo1pQr, token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcdefghij "
            "on GPU-5f3a9c2e-1b7d-4e8a-9f0c-2d6b8e4a1c3f")
    shown = redact_line(line)
    assert "Ab3dEf5g" not in shown and "eyJzdWIi" not in shown
    assert shown.startswith("ERROR 401 for key <redacted>") and shown.endswith("GPU-5f3a9c2e-1b7d-4e8a-9f0c-2d6b8e4a1c3f")


# Shapes that once left the host: argparse abbreviations, an `exec -a` argv0 holding flags, flags inside
# environment values and log lines, [name, value] header pairs, SAS signatures, any Authorization scheme,
# URL userinfo with an empty user, and `password X` in prose.
NEW_SECRET = "Qx7newSecretV4lue"


@pytest.mark.parametrize("argv", [
    ["python3", "-m", "sglang.launch_server", "--admin-api", NEW_SECRET, "--port", "1"],
    ["python3", "-m", "sglang.launch_server", "--api=" + NEW_SECRET],
    ["python3", "-m", "sglang.launch_server", "--ssl-keyfile-pass", NEW_SECRET],
    [f"sglang-srv --api-key {NEW_SECRET} --port 1", "-m", "sglang.launch_server"],
    ["bash", "-c", f"exec -a 'srv --admin-api-key {NEW_SECRET}' python3 -m sglang.launch_server"],
])
def test_argv_shapes_argparse_and_exec_accept_are_hidden(argv):
    from probes.hostinfo.secrets import redact_argv
    assert NEW_SECRET not in " ".join(redact_argv(argv))


def test_a_path_flag_that_prefixes_a_secret_flag_keeps_its_value():
    from probes.hostinfo.secrets import redact_argv
    assert redact_argv(["x", "--ssl-keyfile", "/etc/k.pem"]) == ["x", "--ssl-keyfile", "/etc/k.pem"]


@pytest.mark.parametrize("value", [
    f"--api-key {NEW_SECRET} --port 1", f"--log-level info --admin-api={NEW_SECRET}",
    json.dumps({"headers": [["Authorization", f"Bearer {NEW_SECRET}"], ["Accept", "json"]]}),
    json.dumps([["X-Api-Key", NEW_SECRET]]),
    f"https://acct.blob.core.windows.net/c/model.bin?sv=2022-11-02&se=2026-01-01&sig={NEW_SECRET}%2Bx%3D",
    f"Authorization: Token {NEW_SECRET}", f"authorization=ApiKey {NEW_SECRET}", f'{{"authorization": "Digest {NEW_SECRET}"}}',
    f"redis://:{NEW_SECRET}@127.0.0.1:6379/0", f"amqp://guest:{NEW_SECRET}@mq/",
])
def test_value_shapes_are_hidden_in_environment_values(value):
    from probes.hostinfo.sglang_cmdline import parse_environ
    kept = parse_environ(f"SGLANG_EXTRA={value}\0".encode())
    assert "SGLANG_EXTRA" in kept and NEW_SECRET not in kept["SGLANG_EXTRA"]


@pytest.mark.parametrize("line", [
    f"[2026-01-01 00:00:00] connecting to 'redis://:{NEW_SECRET}@127.0.0.1:6379/0'",
    f"ERROR login failed: password {NEW_SECRET} rejected",
    f"INFO server_args: 'launch_server --api-key {NEW_SECRET} --port 30000'",
    f"INFO args=\"python -m sglang.launch_server --admin-api {NEW_SECRET}\"",
    f"WARNING header Authorization: Token {NEW_SECRET}",
])
def test_quoted_log_lines_hide_the_new_shapes(line):
    from probes.crashlog.redact import redact_line
    redacted = redact_line(line)
    assert NEW_SECRET not in redacted and "<redacted>" in redacted


def test_prose_around_a_password_is_kept():
    from probes.crashlog.redact import redact_line
    assert redact_line("Wrong password for user root") == "Wrong password for user root"
