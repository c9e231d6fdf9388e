"""Container transport: the exec prefix per engine, and the argv handed to the inner transport."""
import pytest

from gpudiag.models import CommandResult
from gpudiag.transports.container import ContainerTransport, exec_prefix, parse_container


@pytest.mark.parametrize("spec, prefix", [
    ("docker:sglang", ["docker", "exec", "-i", "sglang"]),
    ("podman:sg;x", ["podman", "exec", "-i", "sg;x"]),
    ("kubectl:sglang-0", ["kubectl", "exec", "-i", "sglang-0", "--"]),
    ("kubectl:inference/sglang-0", ["kubectl", "exec", "-i", "-n", "inference", "sglang-0", "--"]),
    ("bare-name", ["docker", "exec", "-i", "bare-name"]),
])
def test_exec_prefix(spec, prefix):
    assert exec_prefix(spec) == prefix


@pytest.mark.parametrize("spec, message", [("lxc:box", "engine must be one of"), ("docker:", "no container name"),
                                           ("docker:--privileged", "may not begin with '-'"),
                                           ("kubectl:-n/pod", "may not begin with '-'")])
def test_bad_specs(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_container(spec)


class Recorder:
    def __init__(self):
        self.calls, self.closed = [], False

    def run(self, argv, stdin, timeout, output_limit=None, events=None, hold_stdin=False):
        self.calls.append((argv, stdin, timeout))
        self.held = hold_stdin
        return CommandResult(0, b"", b"", 0.0)

    def close(self):
        self.closed = True


def test_container_wraps_the_inner_transport():
    inner = Recorder()
    transport = ContainerTransport(inner, "docker:my box")
    transport.run(["python3", "-c", "print(1)"], b"in", 5.0)
    transport.close()
    assert inner.calls == [(["docker", "exec", "-i", "my box", "python3", "-c", "print(1)"], b"in", 5.0)]
    assert inner.held   # stdin stays open: its end is how the runner inside learns the control side is gone
    assert inner.closed


# Stand-ins for docker and kubectl that fail the way the real ones do, through `gpudiag scan`.
FAILING_ENGINE = """#!/bin/sh
printf '%s\\n' {message} >&2
exit {code}
"""

ENGINE_FAILURES = {
    "no-such-container": ("docker:sglang", "docker", "'Error: No such container: sglang'", 1,
                          "unreachable", "docker exec sglang: Error: No such container: sglang"),
    "daemon-error": ("docker:sglang", "docker",
                     "'Error response from daemon: container 4f2 is not running'", 1,
                     "unreachable", "docker exec sglang: Error response from daemon: container 4f2 is not running"),
    "pod-not-found": ("kubectl:inference/sglang-0", "kubectl",
                      "'Error from server (NotFound): pods \"sglang-0\" not found'", 1, "unreachable",
                      'kubectl exec inference/sglang-0: Error from server (NotFound): pods "sglang-0" not found'),
    "interpreter-missing": ("docker:sglang", "docker",
                            "'OCI runtime exec failed: exec failed: unable to start container process: exec: "
                            "\"/opt/venv/bin/python3\": stat /opt/venv/bin/python3: no such file or directory: "
                            "unknown'", 127, "python_missing", "/opt/venv/bin/python3: no such interpreter"),
}


def scan_in_container(tmp_path, container, env_path):
    import json
    from click.testing import CliRunner
    from gpudiag.cli import cli
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(json.dumps({"hosts": {"localhost": {"container": container,
                                                             "python": "/opt/venv/bin/python3"}}}))
    result = CliRunner().invoke(cli, ["scan", "-i", str(inventory), "localhost", "--probes", "env", "--json",
                                      "--reports-dir", str(tmp_path / "reports")], env={"PATH": env_path})
    assert result.exit_code == 3, result.output
    return json.loads(result.stdout)["hosts"][0]


@pytest.mark.parametrize("case", sorted(ENGINE_FAILURES))
def test_engine_failures_are_reported_in_the_engines_words(tmp_path, case):
    import os
    container, engine, message, code, status, reason = ENGINE_FAILURES[case]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / engine).write_text(FAILING_ENGINE.format(message=message, code=code))
    (bin_dir / engine).chmod(0o755)
    host = scan_in_container(tmp_path, container, f"{bin_dir}:{os.environ['PATH']}")
    assert (host["status"], host["reason"][:len(reason)]) == (status, reason)


def test_engine_not_installed_is_unreachable_not_python_missing(tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    host = scan_in_container(tmp_path, "podman:sglang", str(empty))
    assert host["status"] == "unreachable"
    assert host["reason"] == "podman exec sglang: podman: No such file or directory"
