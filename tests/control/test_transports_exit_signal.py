"""How a command's death by a signal is described: the transport's own report, or a shell's 128+N."""
import pytest

from gpudiag.models import CommandResult
from gpudiag.transports.exit_signal import describe_kill


def result(exit_code=None, signal=None, core=False):
    return CommandResult(exit_code, b"", b"", 1.0, signal=signal, core_dumped=core)


@pytest.mark.parametrize("command, reason", [
    (result(signal="SIGKILL"), "the probe process was killed by SIGKILL on the host; the kernel's OOM killer "
                               "sends SIGKILL too, look for it in the host's kernel log"),
    (result(signal="SIGSEGV", core=True), "the probe process was killed by SIGSEGV on the host and dumped core"),
    (result(139), "the probe process was killed by SIGSEGV on the host (exit 139, the shell's report of it)"),
    (result(134), "the probe process was killed by SIGABRT on the host (exit 134, the shell's report of it)"),
])
def test_a_killed_command_is_described_with_its_signal(command, reason):
    assert describe_kill(command) == reason


@pytest.mark.parametrize("exit_code", [None, 0, 1, 2, 126, 127, 128, 130, 141, 255])
def test_ordinary_exits_and_unlisted_signals_are_not_kills(exit_code):
    assert describe_kill(result(exit_code)) is None
