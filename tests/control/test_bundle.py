"""The bundle: probe sources packed for stdin, the bootstrap that runs them, and frame extraction."""
import json
import subprocess
import sys

import pytest

from gpudiag import bundle


def test_probe_modules_hold_every_probe_and_no_control_side():
    modules = bundle.probe_modules()
    assert modules["probes"][0] is True
    assert "probes.runner" in modules and "probes.context" in modules
    assert not any(name.startswith("gpudiag") for name in modules)
    for name, (_, source) in modules.items():
        assert "import gpudiag" not in source and "from gpudiag" not in source, name


def run_bootstrap(payload, python=sys.executable, extra_stdout=b""):
    proc = subprocess.run(bundle.bootstrap_argv(python), input=payload.data, capture_output=True, timeout=120)
    return proc


def test_bootstrap_runs_the_bundle_isolated_and_frames_the_answer(tmp_path):
    payload = bundle.build_payload(["env"], host="here")
    proc = subprocess.run(bundle.bootstrap_argv(sys.executable), input=payload.data, capture_output=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    doc = bundle.extract_frame(proc.stdout, payload.nonce)
    assert doc["host"] == "here"
    assert doc["probes"]["env"]["status"] == "ok"
    assert doc["probes"]["env"]["data"]["python"]["executable"]
    assert list(tmp_path.iterdir()) == []  # nothing left behind in the working directory


def test_unknown_probe_is_skipped_with_reason():
    payload = bundle.build_payload(["env", "nope"])
    proc = run_bootstrap(payload)
    doc = bundle.extract_frame(proc.stdout, payload.nonce)
    assert doc["probes"]["nope"]["status"] == "skipped"
    assert "nope" in doc["probes"]["nope"]["reason"]


def frame(nonce, doc):
    return f"GPUDIAG-BEGIN {nonce}\n{json.dumps(doc)}\nGPUDIAG-END {nonce}\n".encode()


def test_extract_frame_ignores_banners_and_other_nonces():
    noise = b"Welcome to gpu-01\r\nlast login: yesterday\n"
    other = frame("other", {"probes": {"x": 1}})
    mine = frame("abc123", {"probes": {"env": {"status": "ok"}}})
    doc = bundle.extract_frame(noise + other + mine + b"trailing warning\n", "abc123")
    assert doc == {"probes": {"env": {"status": "ok"}}}


def test_extract_frame_handles_crlf_from_a_pty():
    data = frame("n1", {"a": 1}).replace(b"\n", b"\r\n")
    assert bundle.extract_frame(data, "n1") == {"a": 1}


@pytest.mark.parametrize("data,message", [
    (b"garbage only\n", "holds no gpudiag frame"),
    (b"GPUDIAG-BEGIN n1\n{\"a\": 1", "never ends it"),
    (b"GPUDIAG-BEGIN n1\n{not json}\nGPUDIAG-END n1\n", "not valid JSON"),
    (b"GPUDIAG-BEGIN n1\n[1, 2]\nGPUDIAG-END n1\n", "not a JSON object"),
])
def test_extract_frame_errors_say_what_is_wrong(data, message):
    with pytest.raises(bundle.FrameError, match=message):
        bundle.extract_frame(data, "n1")


def test_a_light_payload_carries_only_what_the_light_probes_need():
    light = bundle.probe_modules(list(bundle.LIGHT_PROBES))
    everything = bundle.probe_modules()
    assert "probes.sglang_facts.imports" in light and "probes.hostinfo.nvidia_smi" in light
    assert not any(name.startswith(("probes.copybench", "probes.graphrepro")) for name in light)
    assert sum(len(s) for _, s in light.values()) < 0.7 * sum(len(s) for _, s in everything.values())


@pytest.mark.parametrize("probe,options", [
    ("env", {"env": {"torch": False}}),
    ("sglang_source", {}),
    ("copy_bench", {"copy_bench": {"batch_sizes": [1], "hidden_sizes": [64], "sweep_min_bytes": 1024,
                                   "sweep_max_bytes": 4096, "isolate": True}}),
    ("cuda_graph", {}),
])
def test_each_probe_runs_from_its_own_minimal_payload(probe, options):
    # The payload is trimmed to what a probe names; running it proves nothing it imports was left out.
    payload = bundle.build_payload([probe], options)
    proc = run_bootstrap(payload)
    doc = bundle.extract_frame(proc.stdout, payload.nonce)
    result = doc["probes"][probe]
    assert result["status"] in ("ok", "skipped"), result
    assert "No module named 'probes" not in json.dumps(result) + proc.stderr.decode()


def test_selected_probes_bring_what_they_read_in_runner_order():
    assert bundle.with_needs(["sglang_source"]) == ["deployment", "sglang_source"]
    assert bundle.with_needs(["copy_bench"]) == ["deployment", "sglang_source", "copy_bench"]
    assert bundle.with_needs(["cuda_graph"]) == ["deployment", "env", "sglang_source", "cuda_graph"]
    assert bundle.with_needs(["deployment"]) == ["deployment"]


def test_bootstrap_argv_is_one_line_a_csh_login_shell_accepts():
    import shlex
    import shutil
    from probes.boot import child_argv
    for argv in (bundle.bootstrap_argv("python3"), child_argv("python3")):
        assert not any("\n" in word for word in argv)
        assert "'" not in argv[-1] and "!" not in argv[-1] and "$" not in argv[-1]   # nothing csh expands
    csh = shutil.which("tcsh") or shutil.which("csh")
    if csh is None:
        pytest.skip("no csh or tcsh installed to run the command line under")
    # What sshd does with a command for a user whose login shell is tcsh: `tcsh -c COMMAND`.
    payload = bundle.build_payload(["env"], host="csh-host")
    proc = subprocess.run([csh, "-c", shlex.join(bundle.bootstrap_argv(sys.executable))], input=payload.data,
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    assert bundle.extract_frame(proc.stdout, payload.nonce)["host"] == "csh-host"


def test_frames_too_deep_or_with_huge_numbers_are_frame_errors_and_nan_reads_as_null():
    from gpudiag import bundle as b

    def framed(body):
        return f"GPUDIAG-BEGIN n9\n{body}\nGPUDIAG-END n9\n".encode()
    with pytest.raises(b.FrameError, match="nested deeper than 100 levels"):
        b.extract_frame(framed("[" * 3000 + "]" * 3000), "n9")
    with pytest.raises(b.FrameError, match="out of range"):
        b.extract_frame(framed('{"n": ' + "7" * 6000 + "}"), "n9")
    with pytest.raises(b.FrameError, match="out of range"):
        b.extract_frame(framed('{"n": -1e400}'), "n9")
    assert b.extract_frame(framed('{"a": NaN, "b": [Infinity, 2.5]}'), "n9") == {"a": None, "b": [None, 2.5]}
