"""The remote command line under every login shell: a login whose shell is bash, dash, zsh, tcsh or fish
scans ok through `gpudiag scan`, a `python` value those shells would read differently is refused before
anything runs, and a container name that begins with `-` is a usage error with its file:line. A login
without a home directory (sshd's "Could not chdir" note on stderr) is not mistaken for a missing Python."""
import os
import pwd
import shutil
import subprocess

import pytest

SHELLS = {"bash": "/bin/bash", "dash": "/bin/dash", "zsh": "/usr/bin/zsh", "tcsh": "/usr/bin/tcsh",
          "fish": "/usr/bin/fish"}


@pytest.fixture(scope="module")
def shell_users(sshd_fleet):
    """One login per shell (gdsh-<shell>), authorized for the fleet's client key; removed afterwards."""
    missing = [path for path in SHELLS.values() if not os.access(path, os.X_OK)]
    if missing:
        pytest.skip(f"login shells not installed: {', '.join(missing)} (apt-get install -y zsh tcsh fish)")
    created = []
    try:
        for shell, path in SHELLS.items():
            user = f"gdsh-{shell}"
            try:
                pwd.getpwnam(user)
            except KeyError:
                subprocess.run(["useradd", "-m", "-s", path, "-p", "*", user], check=True, capture_output=True)
                created.append(user)
            key = sshd_fleet.authorized_dir / user
            shutil.copy(sshd_fleet.authorized_dir / sshd_fleet.user, key)
            os.chmod(key, 0o644)
        yield {shell: f"gdsh-{shell}" for shell in SHELLS}
    finally:
        for user in created:
            subprocess.run(["userdel", "-r", user], capture_output=True)


def scan(fleet, tmp_path, variants, *args):
    inventory = fleet.write_inventory(tmp_path / "inventory.yaml", [], variants=variants)
    reports = tmp_path / "reports"
    proc = fleet.run_gpudiag("scan", "-i", str(inventory), "all", *fleet.fast_scan_args, *args,
                             env=fleet.env(GPUDIAG_REPORTS=str(reports)), timeout=120)
    return proc, inventory, reports


def test_every_login_shell_runs_the_probes(sshd_fleet, tmp_path, shell_users):
    # A venv path with a space, where every login can reach it (the fleet's dir is world-readable).
    spaced = sshd_fleet.root / "shells" / "my venv" / "bin"
    spaced.mkdir(parents=True, exist_ok=True)
    for folder in (spaced.parent.parent, spaced.parent, spaced):
        os.chmod(folder, 0o755)
    if not (spaced / "python3").exists():
        (spaced / "python3").symlink_to(sshd_fleet.system_python)
    variants = {}
    for shell, user in shell_users.items():
        variants[shell] = ("h0", {"user": user, "python": sshd_fleet.system_python})
        variants[f"{shell}-spaced"] = ("h1", {"user": user, "python": str(spaced / "python3")})
    proc, _, reports = scan(sshd_fleet, tmp_path, variants, "--json")
    assert proc.returncode == 0, proc.stderr
    hosts = sshd_fleet.load_run(proc, reports)[1]
    assert {name: h["status"] for name, h in hosts.items()} == {name: "ok" for name in variants}


@pytest.mark.parametrize("python", [
    "python3' ; touch MARKER ; '",
    "python3\\' ; touch MARKER #",
    "python3 $(touch MARKER)!",
    "python3\n touch MARKER",
])
def test_values_that_shells_read_differently_are_refused_before_anything_runs(sshd_fleet, tmp_path,
                                                                               shell_users, python):
    # That host's problem alone: not scanned (never contacted), file:line said, the others scanned.
    marker = tmp_path / "pwned"
    python = python.replace("MARKER", str(marker))
    variants = {"fish": ("h0", {"user": shell_users["fish"], "python": python}), "plain": ("h1", {})}
    proc, inventory, reports = scan(sshd_fleet, tmp_path, variants, "--json")
    assert proc.returncode == 3, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("gpudiag: warning:")]
    assert len(warnings) == 1 and warnings[0].startswith(f"gpudiag: warning: fish: not scanned: {inventory}:")
    assert "read differently" in warnings[0] and "host 'fish'" in warnings[0]
    hosts = sshd_fleet.load_run(proc, reports)[1]
    assert hosts["fish"]["status"] == "unreachable" and "not scanned" in hosts["fish"]["reason"]
    assert hosts["plain"]["status"] == "ok"
    assert not marker.exists()


def test_a_container_name_beginning_with_a_dash_skips_that_host_with_file_line(sshd_fleet, tmp_path):
    # An inventory entry that cannot be read is its host's problem alone: skipped (never run), file:line said.
    proc, inventory, _ = scan(sshd_fleet, tmp_path, {"boxed": ("h0", {"container": "docker:--privileged"})})
    assert proc.returncode == 3, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("gpudiag: warning:")]
    assert len(warnings) == 1 and warnings[0].startswith(f"gpudiag: warning: boxed: not scanned: {inventory}:")
    assert warnings[0].endswith("host 'boxed': container 'docker:--privileged': a name may not begin with '-'")


@pytest.fixture
def homeless_user(sshd_fleet):
    """A login whose home directory does not exist: sshd says "Could not chdir to home directory"."""
    user = "gdsh-nohome"
    created = False
    try:
        pwd.getpwnam(user)
    except KeyError:
        subprocess.run(["useradd", "-M", "-d", "/nonexistent/gdsh-nohome", "-s", "/bin/sh", "-p", "*", user],
                       check=True, capture_output=True)
        created = True
    key = sshd_fleet.authorized_dir / user
    shutil.copy(sshd_fleet.authorized_dir / sshd_fleet.user, key)
    os.chmod(key, 0o644)
    try:
        yield user
    finally:
        if created:
            subprocess.run(["userdel", user], capture_output=True, check=False)


def test_a_login_without_a_home_directory_is_not_python_missing(sshd_fleet, tmp_path, homeless_user):
    failing = sshd_fleet.script("failing-python", "cat >/dev/null\nexit 1")   # runs, prints no frame
    variants = {"homeless-ok": ("h0", {"user": homeless_user, "python": sshd_fleet.system_python}),
                "homeless-failing": ("h1", {"user": homeless_user, "python": str(failing)}),
                "homeless-missing": ("h2", {"user": homeless_user, "python": "/nonexistent/python3"})}
    proc, _, reports = scan(sshd_fleet, tmp_path, variants, "--json")
    hosts = sshd_fleet.load_run(proc, reports)[1]
    assert hosts["homeless-ok"]["status"] == "ok", hosts["homeless-ok"]["reason"]
    failing_host = hosts["homeless-failing"]
    assert "Could not chdir to home directory" in failing_host["output_tail"]["stderr"]   # sshd's real note
    assert failing_host["status"] == "frame_error", failing_host["reason"]
    assert hosts["homeless-missing"]["status"] == "python_missing"      # a real missing interpreter still is
