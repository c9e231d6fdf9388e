"""Secret redaction against every server flag of real sglang releases: ordinary flags keep their values."""
import ast
import glob
import json
import os
import re

import pytest

from probes.hostinfo import sglang_cmdline as cmdline
from tests.sglang_wheels import require

SECRET = {"0.4.10": {"api_key"},
          "0.5.23": {"api_key", "admin_api_key", "ssl_keyfile_password", "watermark_config"}}


def server_flags(site):
    """Every `--flag` sglang's server parser accepts: add_argument strings and the generated field flags."""
    files = [os.path.join(site, "sglang/srt/server_args.py")]
    files += glob.glob(os.path.join(site, "sglang/srt/arg_groups/fields/*.py"))
    names = set()
    for path in files:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        names.update(m.replace("_", "-") for m in re.findall(r'"--([A-Za-z0-9][A-Za-z0-9_-]*)"', text))
        if "/fields/" not in path:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                for stmt in node.body:
                    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and \
                            not stmt.target.id.startswith("_") and "no_cli=True" not in ast.unparse(stmt):
                        names.add(stmt.target.id.replace("_", "-"))
    return sorted(names)


@pytest.mark.parametrize("version", sorted(SECRET))
def test_only_secret_bearing_flags_of_a_release_are_redacted(version):
    flags = server_flags(str(require(version)))
    assert len(flags) > (150 if version == "0.4.10" else 500)
    hidden = {f.replace("-", "_") for f in flags if cmdline.looks_secret(f)}
    assert hidden == SECRET[version]
    for name in flags:
        argv = ["python", "-m", "sglang.launch_server", "--" + name, "v4lue-" + name]
        shown = cmdline.redact_argv(argv)
        args, _ = cmdline.parse_server_args(argv[3:])
        key = cmdline.normalize_flag(name)
        if name.replace("-", "_") in SECRET[version]:
            assert "v4lue-" + name not in json.dumps([shown, args]), name
            assert shown[-1] == cmdline.REDACTED
        else:
            assert shown == argv, name
            assert args[key] == "v4lue-" + name or args[key] is True or isinstance(args[key], (int, float, list)), \
                (name, args[key])


@pytest.mark.parametrize("name, value", [("--speculative-num-draft-tokens", "4"), ("--max-total-tokens", "9000"),
                                         ("--tokenizer-path", "/m/tok"), ("--speculative-token-map", "/m/map.pt"),
                                         ("--kv-cache-dtype", "fp8_e5m2"), ("--ssl-keyfile", "/etc/k.pem")])
def test_ordinary_flags_named_like_secrets_keep_their_values(name, value):
    assert cmdline.redact_argv([name, value]) == [name, value]
    assert cmdline.redact_argv([name + "=" + value]) == [name + "=" + value]
    args, _ = cmdline.parse_server_args([name, value])
    assert str(args[cmdline.normalize_flag(name[2:])]) == value


@pytest.mark.parametrize("name", ["--api-key", "--admin-api-key", "--hf-token", "--ssl-keyfile-password",
                                  "--auth-token", "--db-password", "--client-secret", "--token", "--watermark-config"])
def test_secret_flags_stay_hidden(name):
    assert cmdline.redact_argv([name, "s3cr3t"]) == [name, cmdline.REDACTED]
    assert cmdline.redact_argv([name + "=s3cr3t"]) == [name + "=" + cmdline.REDACTED]
    args, _ = cmdline.parse_server_args([name, "s3cr3t"])
    assert "s3cr3t" not in json.dumps(args)


def test_secret_environment_variables_are_dropped_but_token_counts_kept():
    raw = b"\0".join([b"HF_TOKEN=hf_x", b"HUGGING_FACE_HUB_TOKEN=hf_y", b"SGLANG_API_KEY=sk", b"NCCL_AUTH_TOKEN=t",
                      b"SGLANG_SESSION_ID=s", b"SGLANG_MAX_TOTAL_TOKENS=9000", b"SGLANG_TOKENIZER_WORKERS=2"])
    env = cmdline.parse_environ(raw)
    assert env == {"SGLANG_MAX_TOTAL_TOKENS": "9000", "SGLANG_TOKENIZER_WORKERS": "2"}


def test_per_phase_cuda_graph_flags_of_0_5_14_and_later_are_typed():
    argv = ["--disable-decode-cuda-graph", "--cuda-graph-backend-prefill", "breakable",
            "--cuda-graph-config", '{"decode": {"backend": "full", "max_bs": 256}}',
            "--cuda-graph-max-bs-decode", "160", "--cuda-graph-bs-decode", "1", "2", "4", "8",
            "--cuda-graph-max-bs-prefill=64", "--cuda-graph-bs-prefill", "16,32", "--context-bucket", "32k",
            "--cuda-graph-max-seq-len-prefill", "4096", "--model-path", "/m"]
    args, positional = cmdline.parse_server_args(argv)
    assert positional == []
    assert args["disable_decode_cuda_graph"] is True and args["disable_prefill_cuda_graph"] is False
    assert args["cuda_graph_backend_prefill"] == "breakable" and args["cuda_graph_backend_decode"] is None
    assert args["cuda_graph_config"] == {"decode": {"backend": "full", "max_bs": 256}}
    assert args["cuda_graph_max_bs_decode"] == 160 and args["cuda_graph_max_bs_prefill"] == 64
    assert args["cuda_graph_bs_decode"] == [1, 2, 4, 8] and args["cuda_graph_bs_prefill"] == [16, 32]
    assert args["cuda_graph_prefill_max_context"] == 32000 and args["cuda_graph_max_seq_len_prefill"] == 4096
    assert args["model_path"] == "/m"


def test_cuda_graph_flags_absent_or_malformed():
    args, _ = cmdline.parse_server_args(["--cuda-graph-config", "{not json", "--cuda-graph-max-bs-decode", "many"])
    assert args["cuda_graph_config"] == "{not json" and args["cuda_graph_max_bs_decode"] == "many"
    args, _ = cmdline.parse_server_args(["--cuda-graph-config", "[1]", "--context-bucket", "1Ki"])
    assert args["cuda_graph_config"] == "[1]" and args["cuda_graph_prefill_max_context"] == 1024
    args, _ = cmdline.parse_server_args([])
    assert args["cuda_graph_config"] is None and args["cuda_graph_bs_decode"] is None
    assert args["disable_decode_cuda_graph"] is False and args["enforce_piecewise_cuda_graph"] is False


@pytest.mark.parametrize("version", ["0.5.14", "0.5.23"])
def test_every_cuda_graph_flag_of_a_release_is_typed(version):
    """Each CUDA-graph flag the release accepts has a typed key, so a reader never gets a raw string."""
    typed = set(cmdline.INT_FLAGS + cmdline.BOOL_FLAGS + cmdline.STRING_FLAGS + cmdline.INT_LIST_FLAGS +
                cmdline.JSON_FLAGS)
    site = str(require(version))
    graph = [f for f in server_flags(site) + _fields_in_server_args(site) if "cuda-graph" in f]
    missing = sorted({cmdline.normalize_flag(f) for f in graph} - typed - UNTYPED_GRAPH_FLAGS)
    assert missing == []


# Debug and profiling switches that change no capture decision: kept raw (a store_true is True anyway).
UNTYPED_GRAPH_FLAGS = {"enable_profile_cuda_graph"}


def _fields_in_server_args(site):
    """0.5.14 declares its fields in server_args.py itself."""
    with open(os.path.join(site, "sglang/srt/server_args.py"), encoding="utf-8") as handle:
        return [m.replace("_", "-") for m in re.findall(r"^    ([a-z][a-z0-9_]*): A\[", handle.read(), re.M)]


@pytest.mark.parametrize("argv, hidden", [
    (["--tool-server-token", "t1"], "t1"),
    (["--db-pass", "-dashed"], "-dashed"),
    (["--hf-token", "two", "words"], "words"),
    (["--api-key", "-x", "yval", "--port", "1"], "yval"),
    (["HF_TOKEN=e1", "python"], "e1"),
    (["bash", "-c", "python -m sglang.launch_server --api-key b1 --port 1; true"], "b1"),
    (["sh", "-c", "exec -a srv python -m sglang.launch_server --db-pass 'two words'"], "two words"),
    (["bash", "-lc", "SGLANG_DB_PASS=x1 python -m sglang.launch_server"], "x1"),
    (["sh", "-c", "python -m sglang.launch_server --api-key 'unbalanced"], "unbalanced"),
])
def test_redact_argv_hides_every_shape(argv, hidden):
    shown = cmdline.redact_argv(argv)
    assert hidden not in json.dumps(shown), shown


def test_secret_flag_values_starting_with_a_dash_or_of_several_words_never_reach_parsed_args():
    args, positional = cmdline.parse_server_args(["--db-pass", "-abc", "--hf-token", "a", "b", "--port", "30000"])
    assert "-abc" not in json.dumps([args, positional]) and '"b"' not in json.dumps([args, positional])
    assert args["port"] == 30000


@pytest.mark.parametrize("name", ["SGLANG_DB_PASS", "SGL_SECRETKEY", "SGLANG_API_KEY", "NCCL_AUTH_TOKEN",
                                  "SGLANG_SESSION_COOKIE", "SGL_HMAC_SALT", "SGLANG_PASSWD", "SGLANG_PRIVATE_KEY",
                                  "SGLANG_CREDENTIALS", "SGL_PW"])
def test_a_deny_rule_beats_an_allowed_prefix(name):
    assert not cmdline.allowed_env_name(name)
    assert cmdline.parse_environ(f"{name}=v".encode()) == {}


@pytest.mark.parametrize("name", ["SGLANG_ENABLE_TORCH_COMPILE", "SGLANG_MAX_TOTAL_TOKENS", "NCCL_DEBUG",
                                  "SGLANG_FORWARD_PASS_METRICS", "CUDA_VISIBLE_DEVICES"])
def test_ordinary_allowed_variables_are_kept(name):
    assert cmdline.allowed_env_name(name)
