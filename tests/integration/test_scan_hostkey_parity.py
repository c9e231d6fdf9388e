"""Host keys as OpenSSH judges them: for each known_hosts case, the real `ssh` client and `gpudiag scan`
connect to the same real sshd with the same known_hosts file, and must agree on accept or refuse.

One row differs on purpose, and the test pins it: a host whose key is trusted only through a
`@cert-authority` line. OpenSSH verifies host certificates; paramiko offers none, so gpudiag refuses
such a host (safely) and says why. The fleet's sshd presents a plain key, so there both refuse; a second
sshd with a CA-signed host certificate shows the difference.
"""
import subprocess
import time
from pathlib import Path

import paramiko
import pytest


def key_of(fleet, name):
    return " ".join(fleet.host(name).known_hosts_line.split()[1:])


def other_key(fleet):
    return " ".join(Path(str(fleet.unauthorized_key) + ".pub").read_text().split()[:2])


ECDSA = paramiko.ECDSAKey.generate()
ECDSA_KEY = f"{ECDSA.get_name()} {ECDSA.get_base64()}"
# Characters Python's str.splitlines() or str.split() take for line ends or blanks, and OpenSSH does not.
NOT_LINE_ENDS = {"U+2028": "\u2028", "form feed": "\x0c", "U+0085": "\x85", "CR": "\r", "VT": "\x0b",
                 "U+001C": "\x1c", "U+2029": "\u2029"}


def cases(fleet):
    """name → (known_hosts text, OpenSSH's verdict, gpudiag's status)."""
    h = fleet.host("h0")
    hid, key, port = h.host_id, key_of(fleet, "h0"), h.port
    wildcard = f"[127.0.0.*]:{port}"
    key_type, blob = key.split()
    comments = {f"# comment holding {name}, then an entry": (f"# fleet{char}{hid} {key}\n", "refuse",
                                                             "host_key_unknown")
                for name, char in NOT_LINE_ENDS.items()}
    return {
        **comments,
        # The server offers only ED25519: a known key of another type makes it a changed key in OpenSSH
        "ECDSA known, server offers ED25519": (f"{hid} {ECDSA_KEY}\n", "refuse", "host_key_changed"),
        "wrong ECDSA, right ED25519": (f"{hid} {ECDSA_KEY}\n{hid} {key}\n", "accept", "ok"),
        "right ED25519, wrong ECDSA": (f"{hid} {key}\n{hid} {ECDSA_KEY}\n", "accept", "ok"),
        "no-break space after the host": (f"{hid}\u00a0{key}\n", "refuse", "host_key_unknown"),
        "no-break space after the type": (f"{hid} {key_type}\u00a0{blob}\n", "refuse", "host_key_unknown"),
        "CRLF line end": (f"{hid} {key}\r\n", "accept", "ok"),
        "malformed hashed salt, then the key": (f"|1|AAAA|AAAA {key}\n{hid} {key}\n", "accept", "ok"),
        "malformed hashed salt only": (f"|1|AAAA|AAAA {key}\n", "refuse", "host_key_unknown"),
        "hashed name and a comma": (f"{paramiko.HostKeys.hash_host(hid)},{hid} {key}\n", "refuse",
                                    "host_key_unknown"),
        "bare address, no port": (f"{h.address} {key}\n", "accept", "ok"),
        "bare address, other key": (f"{h.address} {ECDSA_KEY}\n", "refuse", "host_key_unknown"),
        "two markers": (f"{hid} {key}\n@revoked @revoked {hid} {key}\n", "accept", "ok"),
        "type not the blob's": (f"{hid} {ECDSA.get_name()} {blob}\n", "refuse", "host_key_unknown"),
        "unknown": ("", "refuse", "host_key_unknown"),
        "changed": (f"{hid} {other_key(fleet)}\n", "refuse", "host_key_changed"),
        "hashed": (f"{paramiko.HostKeys.hash_host(hid)} {key}\n", "accept", "ok"),
        "[host]:port": (f"{hid} {key}\n", "accept", "ok"),
        "other port only": (f"[{h.address}]:{port + 1} {key}\n", "refuse", "host_key_unknown"),
        "wildcard": (f"{wildcard} {key}\n", "accept", "ok"),
        "negation": (f"{wildcard},!{hid} {key}\n", "refuse", "host_key_unknown"),
        "@cert-authority": (f"@cert-authority {wildcard} {other_key(fleet)}\n", "refuse", "host_key_unknown"),
        "@revoked": (f"{hid} {key}\n@revoked {hid} {key}\n", "refuse", "host_key_revoked"),
        "@revoked by wildcard": (f"{hid} {key}\n@revoked * {key}\n", "refuse", "host_key_revoked"),
        "two spaces": (f"{hid}  {key.replace(' ', '  ')}\n", "accept", "ok"),
        "tabs and a comment": (f"# fleet\n\t{hid}\t{key.replace(' ', chr(9))}\tadded by hand\n", "accept", "ok"),
        "several keys": (f"{hid} {other_key(fleet)}\n{hid} {key}\n", "accept", "ok"),
        "changed, two spaces": (f"{hid}  {other_key(fleet).replace(' ', '  ')}\n", "refuse", "host_key_changed"),
        "@revoked, tabs": (f"{hid} {key}\n@revoked\t{hid}\t{key.replace(' ', chr(9))}\n", "refuse",
                           "host_key_revoked"),
        # OpenSSH ends a marker at the line's first space: this one is an invalid marker, the line ignored
        "@revoked<TAB>, then spaces": (f"{hid} {key}\n@revoked\t{hid} {key}\n", "accept", "ok"),
    }


def openssh_verdict(fleet, known: Path, accept_new: bool = False) -> str:
    h = fleet.host("h0")
    proc = subprocess.run(
        ["ssh", "-F", "/dev/null", "-o", "BatchMode=yes",
         "-o", f"StrictHostKeyChecking={'accept-new' if accept_new else 'yes'}",
         "-o", f"UserKnownHostsFile={known}", "-o", "GlobalKnownHostsFile=/dev/null",
         "-o", "HostKeyAlgorithms=ssh-ed25519", "-o", "ConnectTimeout=10", "-o", "IdentitiesOnly=yes",
         "-i", h.key_path, "-p", str(h.port), f"{h.user}@{h.address}", "true"],
        capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    return "accept" if proc.returncode == 0 else "refuse"


def gpudiag_status(fleet, tmp_path, known: Path, *args: str) -> tuple[str, str]:
    inventory = fleet.write_inventory(tmp_path / "inventory.yaml", ["h0"])
    reports = tmp_path / "reports"
    proc = fleet.run_gpudiag("scan", "-i", str(inventory), "all", *fleet.fast_scan_args, "--json", *args,
                             env=fleet.env(GPUDIAG_KNOWN_HOSTS=str(known), GPUDIAG_REPORTS=str(reports)))
    host = fleet.load_run(proc, reports)[1]["h0"]
    return host["status"], host["reason"]


def test_host_key_behaviour_table_matches_openssh(sshd_fleet, tmp_path):
    table = []
    for name, (text, _openssh, _status) in cases(sshd_fleet).items():
        known = tmp_path / f"known_hosts-{len(table)}"
        known.write_text(text)
        openssh = openssh_verdict(sshd_fleet, known)
        status, reason = gpudiag_status(sshd_fleet, tmp_path, known)
        table.append((name, openssh, status, reason))
    rows = "\n".join(f"{n:22} openssh={o:7} gpudiag={s:18} {r[:90]}" for n, o, s, r in table)
    for (name, openssh, status, _), (expected_openssh, expected_status) in zip(
            table, [(c[1], c[2]) for c in cases(sshd_fleet).values()]):
        assert openssh == expected_openssh, f"OpenSSH changed its mind on {name!r}:\n{rows}"
        assert status == expected_status, f"gpudiag on {name!r}:\n{rows}"
        assert (status == "ok") == (openssh == "accept"), f"gpudiag and OpenSSH disagree on {name!r}:\n{rows}"
    reasons = {name: reason for name, _, _, reason in table}
    assert "marked @revoked at" in reasons["@revoked"]
    assert "@cert-authority" in reasons["@cert-authority"] and "cannot check host certificates" in \
        reasons["@cert-authority"]


# With accept-new OpenSSH records a plain key for a host trusted only through a @cert-authority line; gpudiag,
# which cannot check certificates, refuses it and records nothing (see the module docstring).
# A line naming the host whose key gpudiag cannot read (here: the line's type is not the blob's, a line OpenSSH
# skips) also stops gpudiag's --accept-new: it may hold the host's real key.
ACCEPT_NEW_DIFFERS = {"@cert-authority": "host_key_unknown", "type not the blob's": "host_key_unknown"}


def test_host_key_behaviour_table_with_accept_new_matches_openssh(sshd_fleet, tmp_path):
    """The same table under accept-new: each tool gets its own copy of the file; both must agree on accept or
    refuse and on whether the file was written."""
    table = []
    for number, (name, (text, _openssh, _status)) in enumerate(cases(sshd_fleet).items()):
        theirs, ours = tmp_path / f"openssh-{number}", tmp_path / f"gpudiag-{number}"
        theirs.write_text(text)
        ours.write_text(text)
        openssh = openssh_verdict(sshd_fleet, theirs, accept_new=True)
        status, reason = gpudiag_status(sshd_fleet, tmp_path, ours, "--accept-new")
        table.append((name, openssh, theirs.read_text() != text, status, ours.read_text() != text, reason))
    rows = "\n".join(f"{n:26} openssh={o:7} wrote={ow!s:5} gpudiag={s:18} wrote={gw!s:5} {r[:70]}"
                     for n, o, ow, s, gw, r in table)
    for name, openssh, openssh_wrote, status, gpudiag_wrote, _ in table:
        if name in ACCEPT_NEW_DIFFERS:
            assert openssh == "accept" and status == ACCEPT_NEW_DIFFERS[name] and not gpudiag_wrote, rows
            continue
        assert (status == "ok") == (openssh == "accept"), f"gpudiag and OpenSSH disagree on {name!r}:\n{rows}"
        assert gpudiag_wrote == openssh_wrote, f"only one of them wrote the file on {name!r}:\n{rows}"
    refused_by_openssh = {row[0] for row in table if row[1] == "refuse"}
    assert refused_by_openssh >= {"changed", "changed, two spaces", "@revoked",
                                  "ECDSA known, server offers ED25519"}, rows
    reasons = {row[0]: row[5] for row in table}
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in reasons["ECDSA known, server offers ED25519"]
    assert "another key type" in reasons["ECDSA known, server offers ED25519"]


def test_a_malformed_hashed_line_is_that_lines_warning_and_every_host_is_still_checked(sshd_fleet, tmp_path):
    inventory = sshd_fleet.write_inventory(tmp_path / "inventory.yaml", ["h0", "h1"])
    known = tmp_path / "known_hosts"
    lines = [f"|1|AAAA|AAAA {key_of(sshd_fleet, 'h0')}", "|1|!!|x ssh-ed25519 AAAA"]
    lines += [sshd_fleet.host(n).known_hosts_line for n in ("h0", "h1")]
    known.write_text("\n".join(lines) + "\n")
    reports = tmp_path / "reports"
    proc = sshd_fleet.run_gpudiag("scan", "-i", str(inventory), "all", *sshd_fleet.fast_scan_args, "--json",
                                  env=sshd_fleet.env(GPUDIAG_KNOWN_HOSTS=str(known), GPUDIAG_REPORTS=str(reports)))
    hosts = sshd_fleet.load_run(proc, reports)[1]
    assert {n: d["status"] for n, d in hosts.items()} == {"h0": "ok", "h1": "ok"}, hosts
    for number in (1, 2):
        warned = [w for w in proc.stderr.splitlines() if f"{known}:{number}: known_hosts line not read" in w]
        assert len(warned) == 1 and "malformed salt" in warned[0], proc.stderr
    assert "AssertionError" not in proc.stdout + proc.stderr


@pytest.fixture
def two_key_sshd(sshd_fleet, tmp_path):
    """One more sshd on 127.0.0.31 with an ED25519 and an ECDSA host key."""
    from tests.integration.conftest import SSHD, SSHD_CONFIG, _speaks_ssh, free_port
    root = tmp_path / "two-keys"
    root.mkdir()
    keys = {kind: root / f"ssh_host_{kind}_key" for kind in ("ed25519", "ecdsa")}
    for kind, path in keys.items():
        subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(path)], check=True,
                       capture_output=True)
    address, port = "127.0.0.31", free_port("127.0.0.31")
    config = root / "sshd_config"
    config.write_text(SSHD_CONFIG.format(address=address, port=port, host_key=keys["ed25519"],
                                         authorized_dir=sshd_fleet.authorized_dir, bin_dir=sshd_fleet.bin_dir)
                      + f"HostKey {keys['ecdsa']}\n")
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 15
        while not _speaks_ssh(address, port):
            assert proc.poll() is None and time.monotonic() < deadline, "the two-key sshd did not start"
            time.sleep(0.05)
        public = {kind: " ".join(Path(str(path) + ".pub").read_text().split()[:2]) for kind, path in keys.items()}
        yield address, port, public
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_server_with_two_key_types_is_judged_on_the_type_ssh_asks_for(sshd_fleet, tmp_path, two_key_sshd):
    """ssh asks first for the known types in its default order (ED25519 before ECDSA): a right ECDSA line
    beside a wrong ED25519 line is a changed key, not a pass on ECDSA."""
    address, port, public = two_key_sshd
    hid = f"[{address}]:{port}"
    wrong_ed25519 = key_of(sshd_fleet, "h1")
    table = {
        "right ECDSA, then wrong ED25519": (f"{hid} {public['ecdsa']}\n{hid} {wrong_ed25519}\n", "host_key_changed"),
        "wrong ED25519, then right ECDSA": (f"{hid} {wrong_ed25519}\n{hid} {public['ecdsa']}\n", "host_key_changed"),
        "right ECDSA only": (f"{hid} {public['ecdsa']}\n", "ok"),
        "wrong ECDSA, right ED25519": (f"{hid} {ECDSA_KEY}\n{hid} {public['ed25519']}\n", "ok"),
    }
    h = sshd_fleet.host("h0")
    inventory = sshd_fleet.write_inventory(tmp_path / "inventory.yaml", [],
                                           variants={"two": ("h0", {"address": address, "port": port})})
    rows = []
    for number, (name, (text, expected)) in enumerate(table.items()):
        known = tmp_path / f"known-{number}"
        known.write_text(text)
        openssh = subprocess.run(
            ["ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=accept-new",
             "-o", f"UserKnownHostsFile={known}", "-o", "GlobalKnownHostsFile=/dev/null", "-o", "IdentitiesOnly=yes",
             "-i", h.key_path, "-p", str(port), f"{h.user}@{address}", "true"],
            capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL, check=False)
        reports = tmp_path / f"reports-{number}"
        proc = sshd_fleet.run_gpudiag("scan", "-i", str(inventory), "all", *sshd_fleet.fast_scan_args, "--json",
                                      "--accept-new", env=sshd_fleet.env(GPUDIAG_KNOWN_HOSTS=str(known),
                                                                         GPUDIAG_REPORTS=str(reports)))
        host = sshd_fleet.load_run(proc, reports)[1]["two"]
        rows.append((name, openssh.returncode == 0, host["status"], expected, host["reason"]))
    shown = "\n".join(f"{n:34} ssh_ok={o!s:5} gpudiag={s:18} {r[:80]}" for n, o, s, _, r in rows)
    for name, openssh_ok, status, expected, _ in rows:
        assert status == expected, f"{name}:\n{shown}"
        assert openssh_ok == (status == "ok"), f"{name}:\n{shown}"


def test_a_changed_key_on_a_two_space_line_is_refused_with_accept_new_and_the_file_is_untouched(sshd_fleet, tmp_path):
    hid = sshd_fleet.host("h0").host_id
    known = tmp_path / "known_hosts"
    text = f"{hid}  {other_key(sshd_fleet).replace(' ', '  ')}\n"
    known.write_text(text)
    found = subprocess.run(["ssh-keygen", "-F", hid, "-f", str(known)], capture_output=True, text=True)
    assert "found: line 1" in found.stdout                 # OpenSSH reads the line: it is the host's key
    assert openssh_verdict(sshd_fleet, known, accept_new=True) == "refuse"
    assert known.read_text() == text
    status, reason = gpudiag_status(sshd_fleet, tmp_path, known, "--accept-new")
    assert status == "host_key_changed", reason
    assert f"{known}:1" in reason and "not accepted" in reason
    assert known.read_text() == text


def test_a_revoked_key_is_refused_and_never_recorded_even_with_accept_new(sshd_fleet, tmp_path):
    h = sshd_fleet.host("h0")
    known = tmp_path / "known_hosts"
    text = f"@revoked * {key_of(sshd_fleet, 'h0')}\n"
    known.write_text(text)
    assert openssh_verdict(sshd_fleet, known, accept_new=True) == "refuse"
    assert known.read_text() == text                       # OpenSSH recorded nothing
    status, reason = gpudiag_status(sshd_fleet, tmp_path, known, "--accept-new")
    assert status == "host_key_revoked", reason
    assert h.host_key_fingerprint in reason and "not recorded" in reason
    assert known.read_text() == text                       # neither did gpudiag


@pytest.fixture
def certified_sshd(sshd_fleet, tmp_path):
    """One more sshd on 127.0.0.30 whose host key is certified by a CA (HostCertificate)."""
    from tests.integration.conftest import SSHD, SSHD_CONFIG, _speaks_ssh, free_port, keygen_all
    root = tmp_path / "certified"
    root.mkdir()
    ca, host_key = root / "ca", root / "ssh_host_ed25519_key"
    keygen_all([ca, host_key])
    signed = subprocess.run(["ssh-keygen", "-q", "-s", str(ca), "-I", "gdhost", "-h", "-n", "127.0.0.30",
                             str(host_key) + ".pub"], capture_output=True, text=True, check=False)
    assert signed.returncode == 0, signed.stderr
    address, port = "127.0.0.30", free_port("127.0.0.30")
    config = root / "sshd_config"
    config.write_text(SSHD_CONFIG.format(address=address, port=port, host_key=host_key,
                                         authorized_dir=sshd_fleet.authorized_dir, bin_dir=sshd_fleet.bin_dir)
                      + f"HostCertificate {host_key}-cert.pub\n")
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 15
        while not _speaks_ssh(address, port):
            assert proc.poll() is None and time.monotonic() < deadline, "the certified sshd did not start"
            time.sleep(0.05)
        yield address, port, Path(str(ca) + ".pub").read_text().split()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_host_trusted_only_by_a_cert_authority_is_refused_with_the_reason(sshd_fleet, tmp_path, certified_sshd):
    """The one place gpudiag is stricter than OpenSSH: host certificates are not checked, so the host
    is refused, never accepted on a key nobody vouched for."""
    address, port, ca = certified_sshd
    known = tmp_path / "known_hosts"
    known.write_text(f"@cert-authority [{address}]:{port} {ca[0]} {ca[1]}\n")
    h = sshd_fleet.host("h0")
    openssh = subprocess.run(
        ["ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
         "-o", f"UserKnownHostsFile={known}", "-o", "GlobalKnownHostsFile=/dev/null", "-o", "IdentitiesOnly=yes",
         "-i", h.key_path, "-p", str(port), f"{h.user}@{address}", "true"],
        capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL, check=False)
    assert openssh.returncode == 0, openssh.stderr          # OpenSSH checks the certificate and accepts
    inventory = sshd_fleet.write_inventory(tmp_path / "inventory.yaml", [],
                                           variants={"certified": ("h0", {"address": address, "port": port})})
    reports = tmp_path / "reports"
    proc = sshd_fleet.run_gpudiag("scan", "-i", str(inventory), "all", *sshd_fleet.fast_scan_args, "--json",
                                  "--accept-new", env=sshd_fleet.env(GPUDIAG_KNOWN_HOSTS=str(known),
                                                                     GPUDIAG_REPORTS=str(reports)))
    host = sshd_fleet.load_run(proc, reports)[1]["certified"]
    assert host["status"] == "host_key_unknown"
    assert "@cert-authority" in host["reason"] and "cannot check host certificates" in host["reason"]
    assert known.read_text().count("\n") == 1               # --accept-new did not record the bare key
