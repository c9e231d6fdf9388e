"""A real OpenSSH fleet on loopback (127.0.0.2, 127.0.0.3, ...) for integration tests and benchmarks.

Fixture `sshd_fleet` (session scope) starts one `/usr/sbin/sshd -D -e -f CONFIG` per host, each with its
own generated host key, on a free port picked for this session, and stops them all at the end.
Nothing outside the fixture's temp dir is touched except `/run/sshd` (sshd's privilege-separation dir)
and the system user `gdnoisy`, whose ~/.bashrc prints a line to stdout (created once, idempotently).

Use from a test under tests/integration/:

    def test_scan(sshd_fleet, tmp_path):
        inventory = sshd_fleet.write_inventory(tmp_path / "inventory.yaml", ["h0", "h1"])
        proc = sshd_fleet.run_gpudiag("scan", "-i", str(inventory), "all", "--probes", "env", "--json")
        run, hosts = sshd_fleet.load_run(proc)        # run.json and {host name: host document}
        assert hosts["h0"]["status"] == "ok"

The API (class SSHDFleet, also usable without pytest, see benchmarks/fleet_scan.py):
  fleet.hosts            [FleetHost(name, address, port, user, key_path, host_key_fingerprint,
                         known_hosts_line, host_key_path)], named h0, h1, ...
  fleet.host(name)       one FleetHost
  fleet.known_hosts      a known_hosts file trusting every fleet host ("[127.0.0.x]:port key")
  fleet.client_key       the private key authorized for root and gdnoisy on every host
  fleet.unauthorized_key a valid key no host accepts
  fleet.bin_dir          first on the PATH of every ssh session (drop stand-in commands here)
  fleet.script(name, body)   an executable shell script in the fleet dir, readable by every user
  fleet.write_inventory(path, names=None, python=None, form="gpudiag"|"ansible", extra=None, variants=None)
                         extra: {host name: {field: value}}, variants: {new name: (host name, {field: value})},
                         fields in gpudiag's names (translated for form="ansible")
  fleet.fast_scan_args   ("--probes", "env", "--set", "env.torch=false"): scans that test plumbing
  fleet.system_python    an interpreter every user (gdnoisy too) can run
  fleet.env(**overrides) env for running the gpudiag CLI: GPUDIAG_KNOWN_HOSTS=fleet.known_hosts,
                         GPUDIAG_SSH_CONFIG=an empty file, HOME=a temp dir, GPUDIAG_REPORTS, no agent
  fleet.run_gpudiag(*args, timeout=60, env=None) -> subprocess.CompletedProcess (text)
  fleet.load_run(proc_or_run_dir) -> (run.json dict, {host name: host document})
"""
from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

SSHD = "/usr/sbin/sshd"
NOISY_USER = "gdnoisy"
NOISY_LINE = "gdnoisy-bashrc: welcome, this line goes to stdout"
START_TIMEOUT = 15.0
# Probe selection for scans that test the plumbing, not the probes: quick on any host.
FAST_SCAN_ARGS = ("--probes", "env", "--set", "env.torch=false")
ANSIBLE_NAMES = {"address": "ansible_host", "port": "ansible_port", "user": "ansible_user",
                 "identity_file": "ansible_ssh_private_key_file", "python": "ansible_python_interpreter",
                 "container": "gpudiag_container", "jump": "gpudiag_jump"}


@dataclass(frozen=True)
class FleetHost:
    name: str
    address: str
    port: int
    user: str
    key_path: str
    host_key_fingerprint: str      # "SHA256:..." as ssh-keygen -l prints it
    known_hosts_line: str          # "[address]:port ssh-ed25519 AAAA..."
    host_key_path: str

    @property
    def host_id(self) -> str:
        return f"[{self.address}]:{self.port}"

    @property
    def jump_spec(self) -> str:
        return f"{self.user}@{self.address}:{self.port}"


def fingerprint_of_pub(pub_line: str) -> str:
    blob = base64.b64decode(pub_line.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def keygen_all(paths: list[Path]) -> None:
    """Generate ed25519 keys in parallel (ssh-keygen is the slow part of starting a fleet)."""
    procs = [subprocess.Popen(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", p.name, "-f", str(p)],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for p in paths]
    for proc, path in zip(procs, paths):
        _, err = proc.communicate(timeout=30)
        if proc.returncode != 0:
            raise RuntimeError(f"ssh-keygen {path}: {err.decode(errors='replace').strip()}")


def free_port(address: str) -> int:
    with socket.socket() as sock:
        sock.bind((address, 0))
        return sock.getsockname()[1]


def ensure_noisy_user() -> None:
    """The user `gdnoisy` with a .bashrc that prints to stdout; safe to race with another creator."""
    try:
        pwd.getpwnam(NOISY_USER)
    except KeyError:
        # -p '*': no password but not locked (sshd without PAM refuses locked '!' accounts). 9 = exists.
        proc = subprocess.run(["useradd", "-m", "-s", "/bin/bash", "-p", "*", NOISY_USER],
                              capture_output=True, text=True)
        if proc.returncode not in (0, 9):
            raise RuntimeError(f"useradd {NOISY_USER}: {proc.stderr.strip()}")
    entry = pwd.getpwnam(NOISY_USER)
    home = Path(entry.pw_dir)
    home.mkdir(parents=True, exist_ok=True)
    bashrc = home / ".bashrc"
    wanted = f"echo '{NOISY_LINE}'\n"
    if not bashrc.is_file() or bashrc.read_text() != wanted:
        tmp = home / f".bashrc.{os.getpid()}"
        tmp.write_text(wanted)
        os.chown(tmp, entry.pw_uid, entry.pw_gid)
        os.replace(tmp, bashrc)


SSHD_CONFIG = """\
ListenAddress {address}:{port}
HostKey {host_key}
PidFile none
StrictModes no
PermitRootLogin yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
UsePAM no
AuthorizedKeysFile {authorized_dir}/%u
AllowTcpForwarding yes
X11Forwarding no
PrintMotd no
PrintLastLog no
MaxStartups 200:30:400
MaxSessions 100
LogLevel VERBOSE
Subsystem sftp internal-sftp
SetEnv PATH={bin_dir}:/usr/local/bin:/usr/bin:/bin
"""


class SSHDFleet:
    """`count` sshd hosts on 127.0.0.2 ... ; start() then stop(). See the module docstring."""

    def __init__(self, count: int = 4, user: str = "root"):
        if count > 200:
            raise ValueError("at most 200 loopback hosts")
        self.count = count
        self.user = user
        self.root = Path(tempfile.mkdtemp(prefix="gpudiag-fleet-"))
        os.chmod(self.root, 0o755)   # gdnoisy's sshd child reads authorized keys and scripts here
        self.bin_dir = self.root / "bin"
        self.home = self.root / "home"
        self.reports = self.root / "reports"
        self.authorized_dir = self.root / "authorized_keys"
        self.client_key = self.root / "keys" / "client"
        self.unauthorized_key = self.root / "keys" / "unauthorized"
        self.known_hosts = self.root / "known_hosts"
        self.ssh_config = self.root / "ssh_config"
        self.hosts: list[FleetHost] = []
        self.fast_scan_args = FAST_SCAN_ARGS
        self.system_python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
        self._procs: list[subprocess.Popen] = []

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> "SSHDFleet":
        if not os.access(SSHD, os.X_OK):
            raise RuntimeError(f"{SSHD} not found (apt-get install openssh-server)")
        for d in (self.bin_dir, self.home, self.reports, self.authorized_dir, self.client_key.parent):
            d.mkdir(parents=True, exist_ok=True)
            os.chmod(d, 0o755)
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        self.ssh_config.write_text("")
        ensure_noisy_user()
        host_dirs = [self.root / "hosts" / f"h{i}" for i in range(self.count)]
        for d in host_dirs:
            d.mkdir(parents=True)
        keygen_all([self.client_key, self.unauthorized_key] + [d / "ssh_host_ed25519_key" for d in host_dirs])
        client_pub = (self.client_key.with_suffix(".pub")).read_text()
        for user in (self.user, NOISY_USER):
            path = self.authorized_dir / user
            path.write_text(client_pub)
            os.chmod(path, 0o644)
        starts = [self._launch(i, d) for i, d in enumerate(host_dirs)]
        try:
            self.hosts = [self._wait_ready(*start) for start in starts]
        except BaseException:
            self.stop()
            raise
        self.known_hosts.write_text("".join(h.known_hosts_line + "\n" for h in self.hosts))
        return self

    def _launch(self, index: int, host_dir: Path, port: int | None = None):
        address = f"127.0.0.{index + 2}"
        port = port or free_port(address)
        config = host_dir / "sshd_config"
        config.write_text(SSHD_CONFIG.format(address=address, port=port, host_key=host_dir / "ssh_host_ed25519_key",
                                             authorized_dir=self.authorized_dir, bin_dir=self.bin_dir))
        log = open(host_dir / "sshd.log", "ab")
        proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self._procs.append(proc)
        return index, host_dir, address, port, proc

    def _wait_ready(self, index: int, host_dir: Path, address: str, port: int, proc: subprocess.Popen,
                    attempts: int = 5) -> FleetHost:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                log = (host_dir / "sshd.log").read_text(errors="replace")
                if "Address already in use" in log and attempts > 1:   # lost the port race: next port
                    return self._wait_ready(*self._launch(index, host_dir), attempts=attempts - 1)
                raise RuntimeError(f"sshd for {address}:{port} exited {proc.returncode}: {log.strip()[-500:]}")
            if _speaks_ssh(address, port):
                pub = (host_dir / "ssh_host_ed25519_key.pub").read_text().split()
                return FleetHost(name=f"h{index}", address=address, port=port, user=self.user,
                                 key_path=str(self.client_key), host_key_fingerprint=fingerprint_of_pub(" ".join(pub)),
                                 known_hosts_line=f"[{address}]:{port} {pub[0]} {pub[1]}",
                                 host_key_path=str(host_dir / "ssh_host_ed25519_key"))
            time.sleep(0.05)
        raise RuntimeError(f"sshd for {address}:{port} did not answer within {START_TIMEOUT:.0f} s")

    def stop(self) -> None:
        # Sessions still open (a test's deliberately hung probe) are children of our listeners: end them too.
        sessions = descendants({proc.pid for proc in self._procs})
        for proc in self._procs:
            if proc.poll() is None:
                proc.terminate()
        for pid in sessions:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for proc in self._procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._procs.clear()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "SSHDFleet":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- helpers for tests ------------------------------------------------------------------------
    def host(self, name: str) -> FleetHost:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def script(self, name: str, body: str) -> Path:
        """An executable `#!/bin/sh` script under the fleet dir (e.g. a stand-in python)."""
        path = self.root / "scripts" / name
        path.parent.mkdir(exist_ok=True)
        os.chmod(path.parent, 0o755)
        path.write_text("#!/bin/sh\n" + body.rstrip("\n") + "\n")
        os.chmod(path, 0o755)
        return path

    def inventory_entry(self, name: str, default_python: str | None = None, form: str = "gpudiag",
                        **fields) -> dict:
        """One host's inventory settings; `fields` in gpudiag's names (address, port, user, identity_file,
        python, container, jump), translated to Ansible's names for form="ansible"."""
        h = self.host(name)
        settings = {"address": h.address, "port": h.port, "user": h.user, "identity_file": h.key_path}
        if default_python:
            settings["python"] = default_python
        settings.update(fields)
        if form == "ansible":
            return {ANSIBLE_NAMES.get(k, k): v for k, v in settings.items()}
        return settings

    def write_inventory(self, path, names=None, python: str | None = None, form: str = "gpudiag",
                        extra: dict | None = None, variants: dict | None = None) -> Path:
        """An inventory of the named fleet hosts (default all) in gpudiag's or Ansible's YAML form.

        extra:    {fleet host name: {field: value}} changes to that host (gpudiag field names).
        variants: {new name: (fleet host name, {field: value})} more hosts made from a fleet host,
                  e.g. {"noauth": ("h0", {"identity_file": str(fleet.unauthorized_key)})}.
        """
        import yaml

        if form not in ("gpudiag", "ansible"):
            raise ValueError(f"form {form!r}: gpudiag or ansible")
        entries = {}
        for name in names if names is not None else [h.name for h in self.hosts]:
            entries[name] = self.inventory_entry(name, python, form, **(extra or {}).get(name, {}))
        for new_name, (base, fields) in (variants or {}).items():
            entries[new_name] = self.inventory_entry(base, python, form, **fields)
        doc = {"all": {"hosts": entries}} if form == "ansible" else {"hosts": entries}
        path = Path(path)
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return path

    def env(self, **overrides: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("SSH_AUTH_SOCK", "NO_COLOR", "GPUDIAG_KNOWN_HOSTS")}
        env.update(GPUDIAG_KNOWN_HOSTS=str(self.known_hosts), GPUDIAG_SSH_CONFIG=str(self.ssh_config),
                   HOME=str(self.home), GPUDIAG_REPORTS=str(self.reports), COLUMNS="200")
        env.update(overrides)
        return env

    def gpudiag_argv(self) -> list[str]:
        script = Path(sys.executable).parent / "gpudiag"
        return [str(script)] if script.is_file() else [sys.executable, "-m", "gpudiag"]

    def run_gpudiag(self, *args: str, timeout: float = 60, env: dict[str, str] | None = None,
                    cwd: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(self.gpudiag_argv() + list(args), capture_output=True, text=True, timeout=timeout,
                              env=env or self.env(), cwd=cwd or str(self.home), stdin=subprocess.DEVNULL)

    def load_run(self, source, reports=None) -> tuple[dict, dict[str, dict]]:
        """run.json and the host documents, from a finished `scan --json` process (its reports dir is
        `reports`, default fleet.reports) or a run directory."""
        if isinstance(source, subprocess.CompletedProcess):
            run_id = json.loads(source.stdout)["run_id"]
            run_dir = Path(reports or self.reports) / "runs" / run_id
        else:
            run_dir = Path(source)
        run = json.loads((run_dir / "run.json").read_text())
        hosts = {}
        for path in sorted((run_dir / "hosts").glob("*.json")):
            doc = json.loads(path.read_text())
            hosts[doc["name"]] = doc
        return run, hosts


@contextlib.contextmanager
def loopback_listener(address: str, greeting: bytes = b""):
    """A TCP listener on `address` that accepts every connection, sends `greeting` (if any) and holds it open;
    yields (address, port). Closed, with every connection, when the block ends."""
    server = socket.socket()
    server.bind((address, 0))
    server.listen(16)
    held, stop = [], threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn = server.accept()[0]
            except OSError:
                continue
            if greeting:
                conn.sendall(greeting)
            held.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()
    finally:
        stop.set()
        thread.join(2)
        for conn in held:
            conn.close()
        server.close()


def descendants(roots: set[int]) -> list[int]:
    """Every process below `roots`, from /proc (parents before children)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, queue = [], list(roots)
    while queue:
        for child in children.get(queue.pop(0), []):
            found.append(child)
            queue.append(child)
    return found


def _speaks_ssh(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=1.0) as sock:
            return sock.recv(8).startswith(b"SSH-")
    except OSError:
        return False


FLEET_SIZE = 4


@pytest.fixture(scope="session")
def sshd_fleet():
    """Four sshd hosts h0..h3 on 127.0.0.2-5 for the whole test session (see the module docstring)."""
    if os.geteuid() != 0:
        pytest.skip("the sshd fleet needs root (sshd privilege separation, a system user)")
    if not os.access(SSHD, os.X_OK) or shutil.which("ssh-keygen") is None:
        pytest.skip(f"OpenSSH server not installed ({SSHD}, ssh-keygen)")
    fleet = SSHDFleet(FLEET_SIZE).start()
    try:
        yield fleet
    finally:
        fleet.stop()
