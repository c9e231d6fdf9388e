"""ClusterShell's clush for real: the bundle run with `clush -w` over the loopback sshd fleet and ingested,
in its `host: ` prefixed form and its gathered (`-b`) form: the same facts as a direct `gpudiag scan`, and a
down host reported as unreachable with ssh's own words."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpudiag.engines import clush
from tests.integration import test_engines_fleet as fleet_tests
from tests.integration.test_engines_fleet import DOWN, FLEET_HOSTS, assert_same_as_direct, closed_port, ingest

direct = fleet_tests.direct   # the fixture: a direct scan of the fleet and the bundle the engines run


def clush_binary():
    beside = Path(sys.executable).parent / "clush"   # pip installed it next to this interpreter
    return str(beside) if beside.is_file() else shutil.which("clush")


needs_clush = pytest.mark.skipif(clush_binary() is None,
                                 reason="ClusterShell is not installed (pip install ClusterShell)")


def ssh_config(sshd_fleet, work):
    """Host entries for the fleet and one down host: clush runs plain ssh, which reads this (-o '-F ...')."""
    config = work / "clush_ssh_config"
    address, port = closed_port()
    entries = [(h.name, h.address, h.port) for h in sshd_fleet.hosts if h.name in FLEET_HOSTS]
    config.write_text("".join(
        f"Host {name}\n  HostName {addr}\n  Port {p}\n  User root\n  IdentityFile {sshd_fleet.client_key}\n"
        f"  UserKnownHostsFile {sshd_fleet.known_hosts}\n  StrictHostKeyChecking yes\n  BatchMode yes\n"
        for name, addr, p in entries + [(DOWN, address, port)]))
    return config


def run_clush(sshd_fleet, direct, *mode):
    work = direct["work"]
    out = work / f"clush{''.join(mode)}.out"
    # The fleet shares this machine's disk; on a cluster the bundle sits on a shared path or is copied first
    # (clush --copy). Both streams into one file, as `clush ... > out 2>&1` keeps them.
    argv = [clush_binary(), *mode, "-o", f"-F {ssh_config(sshd_fleet, work)}", "-w", ",".join(FLEET_HOSTS + [DOWN]),
            f"python3 {direct['bundle']}"]
    with open(out, "w") as sink:
        proc = subprocess.run(argv, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              env=sshd_fleet.env(), cwd=work, timeout=240)
    assert proc.returncode == 0, out.read_text()[-2000:]      # clush exits 0 unless -S asks for the worst rc
    return out


@needs_clush
def test_clush_prefixed_output(sshd_fleet, direct):
    out = run_clush(sshd_fleet, direct)
    assert "h0: GPUDIAG-BEGIN " in out.read_text()
    run, hosts = ingest(sshd_fleet, out)
    assert run["source"]["engines"] == ["clush"]
    assert_same_as_direct(direct, hosts, "clush")
    assert hosts[DOWN]["status"] == "unreachable"
    assert "Connection refused" in hosts[DOWN]["reason"]


@needs_clush
def test_clush_gathered_output(sshd_fleet, direct):
    out = run_clush(sshd_fleet, direct, "-b")
    lines = out.read_text().splitlines()
    assert clush.is_gathered(lines) and "h0: GPUDIAG-BEGIN " not in out.read_text()
    run, hosts = ingest(sshd_fleet, out)
    assert run["source"]["engines"] == ["clush"]
    assert_same_as_direct(direct, hosts, "clush")
    assert hosts[DOWN]["status"] == "unreachable"
    assert "Connection refused" in hosts[DOWN]["reason"]


# -- the gathered form's edges, without a fleet ------------------------------------------------------------
def test_node_sets_expand_as_clush_prints_them():
    assert clush.expand_nodeset("gpu-[01-02,05],cpu1 (4)") == ["gpu-01", "gpu-02", "gpu-05", "cpu1"]
    assert clush.expand_nodeset("h0") == ["h0"]
    with pytest.raises(clush.GatheredFormError, match="expands to 2 hosts, not 3"):
        clush.expand_nodeset("h[0-1] (3)")
    with pytest.raises(clush.GatheredFormError, match=r"clush -r"):
        clush.expand_nodeset("@gpu")
    with pytest.raises(clush.GatheredFormError, match="more than 100000 hosts"):   # refused before expanding
        clush.expand_nodeset("h[0-99999999999]")


def test_a_header_inside_a_hosts_output_is_refused(tmp_path):
    """A host printing a header of its own could pose as another host: a node under two headers is refused."""
    block = [clush.SEP, "h0", clush.SEP, "hello", clush.SEP, "h[0-1] (2)", clush.SEP, "posing"]
    with pytest.raises(clush.GatheredFormError, match="h0 under two headers"):
        clush.ungather(block)
    source = tmp_path / "posing.out"
    source.write_text("\n".join(block) + "\n")
    env = dict(os.environ, GPUDIAG_REPORTS=str(tmp_path / "reports"))
    proc = subprocess.run([sys.executable, "-m", "gpudiag", "ingest", str(source)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=60)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [f"gpudiag: error: {source}: clush -b output shows h0 under two "
                                                "headers; a host's output may be posing as clush's: run clush "
                                                "without -b"]
