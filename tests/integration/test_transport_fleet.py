"""The sshd fleet itself: its hosts answer OpenSSH's own client with the generated keys."""
import subprocess


def test_openssh_client_reaches_fleet_hosts(sshd_fleet):
    for h in sshd_fleet.hosts[::3]:   # first and last: every host is reached by the scan tests
        proc = subprocess.run(
            ["ssh", "-F", "/dev/null", "-i", h.key_path, "-p", str(h.port), "-o", "BatchMode=yes",
             "-o", f"UserKnownHostsFile={sshd_fleet.known_hosts}", "-o", "StrictHostKeyChecking=yes",
             f"{h.user}@{h.address}", "echo", "reached", h.name],
            capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == f"reached {h.name}"
