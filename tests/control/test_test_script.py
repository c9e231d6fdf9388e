"""scripts/test.sh's apt wrapper, run for real with stand-ins for apt-get and sleep: it waits while another
apt holds the lock, and fails at once (with apt's message) on any other error."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def apt_get_function():
    text = (ROOT / "scripts" / "test.sh").read_text()
    return re.search(r"^apt_get\(\) \{.*?^\}", text, re.M | re.S).group(0)


def run_with_fake_apt(tmp_path, apt_script):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "apt-get").write_text("#!/bin/sh\n" + apt_script)
    (bin_dir / "sleep").write_text("#!/bin/sh\necho slept >> %s/sleeps\n" % tmp_path)
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    script = apt_get_function() + "\napt_get install -y pdsh\n"
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin", "TMPDIR": str(tmp_path)})


def test_waits_while_another_apt_holds_the_lock(tmp_path):
    count = tmp_path / "count"
    proc = run_with_fake_apt(tmp_path, f"""n=$(cat {count} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {count}
if [ $n -le 2 ]; then echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 7 (apt)" >&2
exit 100; fi
echo "ran: $*"
""")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "ran: -o DPkg::Lock::Timeout=60 install -y pdsh\n"
    assert proc.stderr.count("apt is busy") == 2 and (tmp_path / "sleeps").read_text().count("slept") == 2


def test_other_apt_errors_fail_at_once(tmp_path):
    proc = run_with_fake_apt(tmp_path, 'echo "E: Unable to locate package pdsh" >&2; exit 100\n')
    assert proc.returncode == 1
    assert proc.stderr == "E: Unable to locate package pdsh\n" and not (tmp_path / "sleeps").exists()
