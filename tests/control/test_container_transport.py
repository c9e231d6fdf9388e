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


@pytest.mark.parametrize("spec, message", [("lxc:box", "engine must be one of"), ("docker:", "no container name")])
def test_bad_specs(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_container(spec)


class Recorder:
    def __init__(self):
        self.calls, self.closed = [], False

    def run(self, argv, stdin, timeout):
        self.calls.append((argv, stdin, timeout))
        return CommandResult(0, b"", b"", 0.0)

    def close(self):
        self.closed = True


def test_container_wraps_the_inner_transport():
    inner = Recorder()
    transport = ContainerTransport(inner, "docker:my box")
    transport.run(["python3", "-c", "print(1)"], b"in", 5.0)
    transport.close()
    assert inner.calls == [(["docker", "exec", "-i", "my box", "python3", "-c", "print(1)"], b"in", 5.0)]
    assert inner.closed
