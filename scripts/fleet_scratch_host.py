"""The scratch host scripts/record-fleet.py runs the light probes on: a venv at the recorded host's path
holding the real sglang wheel of its release, a /proc view holding its servers, and an nvidia-smi that prints
its recorded answers. Everything lives under one temporary root, stripped from the output afterwards.
"""
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIGHT = ("env", "deployment", "torch_caps", "sglang_source")
NONCE = "RECORD-FLEET"
CLK_TCK = os.sysconf("SC_CLK_TCK")
UPTIME_S = 1000000.0
SMI = """#!/bin/sh
# nvidia-smi as the host answered it: its recorded outputs, one file per question.
D=%s
case "$*" in
  *--query-gpu=*) exec cat "$D/query-gpu.csv" ;;
  *--query-compute-apps=*) exec cat "$D/compute-apps.csv" ;;
  "topo -m") exec cat "$D/topo.txt" ;;
  --version) exec cat "$D/version.txt" ;;
esac
echo "recorded nvidia-smi: no answer for: $*" >&2
exit 2
"""


# The recorded hosts' kernel logs were not recorded: the scratch host answers as an unprivileged container does,
# so the env probe's Xid reading is exercised without reading this machine's log.
NO_KERNEL_LOG = {
    "dmesg": "#!/bin/sh\necho 'dmesg: read kernel buffer failed: Operation not permitted' >&2\nexit 1\n",
    "journalctl": "#!/bin/sh\necho 'No journal files were found.' >&2\necho '-- No entries --'\nexit 0\n",
}


class RecordError(Exception):
    """A segment or a real probe run that cannot make a valid host document; the message says which."""


def _symlink(target, link):
    os.makedirs(os.path.dirname(link), exist_ok=True)
    os.symlink(target, link)


def install_tree(source, target):
    """The unpacked wheel as real files under `target` (hard links where the filesystem allows): the
    integrity check only hashes files that lie inside site-packages."""
    for folder, _, names in os.walk(source):
        into = os.path.join(target, os.path.relpath(folder, source))
        os.makedirs(into, exist_ok=True)
        for name in names:
            try:
                os.link(os.path.join(folder, name), os.path.join(into, name))
            except OSError:
                shutil.copy2(os.path.join(folder, name), os.path.join(into, name))


def make_venv(scratch, spec):
    """A venv at the host's path under `scratch` whose site-packages holds the host's sglang wheel; this
    Python's torch is lent to it by a .pth file. Returns its python."""
    from tests.sglang_wheels import site_packages_for
    venv = scratch + spec["venv"]
    base = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    python = os.path.join(venv, "bin", "python")
    _symlink(base, python)
    with open(os.path.join(venv, "pyvenv.cfg"), "w", encoding="utf-8") as handle:
        handle.write("home = %s\ninclude-system-site-packages = false\n" % os.path.dirname(base))
    site = os.path.join(venv, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
    install_tree(str(site_packages_for(spec["sglang"])), site)
    with open(os.path.join(site, "zz-record-fleet.pth"), "w", encoding="utf-8") as handle:
        handle.write((torch_site() or "") + "\n")   # this Python's torch, for the probes and their children
    return python


def torch_site():
    """The site-packages this Python finds torch in (without importing it), or None."""
    torch = importlib.util.find_spec("torch")
    return os.path.dirname(os.path.dirname(torch.origin)) if torch and torch.origin else None


def make_proc(scratch, spec):
    """A /proc view holding the host's servers: command line, allow-listed environment, stat, exe, root."""
    proc = os.path.join(scratch, "proc")
    os.makedirs(proc)
    with open(os.path.join(proc, "uptime"), "w") as handle:
        handle.write("%.2f 0.00\n" % UPTIME_S)
    for server in spec["servers"]:
        base = os.path.join(proc, str(server["pid"]))
        os.makedirs(base)
        argv = list(server["argv"])
        argv[0] = scratch + argv[0]
        with open(os.path.join(base, "cmdline"), "wb") as handle:
            handle.write(b"\0".join(a.encode() for a in argv) + b"\0")
        with open(os.path.join(base, "environ"), "wb") as handle:
            handle.write(b"".join(("%s=%s\0" % kv).encode() for kv in sorted(server["environ"].items())))
        start = int((UPTIME_S - server["age_s"]) * CLK_TCK)
        fields = ["S", str(server["ppid"])] + ["0"] * 17 + [str(start)] + ["0"] * 10
        with open(os.path.join(base, "stat"), "w") as handle:
            handle.write("%d (python) %s\n" % (server["pid"], " ".join(fields)))
        os.symlink(server["exe"], os.path.join(base, "exe"))
        os.symlink("/", os.path.join(base, "root"))
    return proc


def make_smi(scratch, host_dir):
    path = os.path.join(scratch, "usr", "bin", "nvidia-smi")
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as handle:
        handle.write(SMI % shlex.quote(os.path.join(host_dir, "nvidia-smi")))
    os.chmod(path, 0o755)
    for name, body in NO_KERNEL_LOG.items():
        tool = os.path.join(os.path.dirname(path), name)
        with open(tool, "w") as handle:
            handle.write(body)
        os.chmod(tool, 0o755)
    return os.path.dirname(path)


def run_light_probes(scratch, spec, host_dir):
    """The light probes' results as the runner printed them, run for real on the scratch host."""
    python = make_venv(scratch, spec)
    proc = make_proc(scratch, spec)
    env = dict(os.environ, PATH=make_smi(scratch, host_dir) + os.pathsep + os.environ.get("PATH", ""),
               PYTHONPATH=ROOT)
    env.pop("GPUDIAG_PROC_ROOT", None)
    env.pop("HF_HUB_CACHE", None)
    env["HF_HOME"] = os.path.join(scratch, "huggingface")  # an empty model cache, the same on every machine
    env["CUDA_VISIBLE_DEVICES"] = ""   # on a GPU machine too, torch sees no device: GPU results are segments
    argv = [python, "-m", "probes", "--probes", ",".join(LIGHT), "--nonce", NONCE, "--line-width", "0",
            "--host", spec["document"]["name"], "--set", "deployment.proc_root=" + proc]
    out = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    begin, end = "GPUDIAG-BEGIN %s\n" % NONCE, "\nGPUDIAG-END %s" % NONCE
    if begin not in out.stdout or end not in out.stdout:
        raise RecordError("%s: the probes printed no frame (exit %s): %s" % (
            spec["document"]["name"], out.returncode, out.stderr.strip()[-400:]))
    probes = json.loads(out.stdout.split(begin, 1)[1].split(end, 1)[0])["probes"]
    failed = ["%s: %s" % (n, probes[n].get("reason") or probes[n].get("error")) for n in LIGHT
              if probes.get(n, {}).get("status") != "ok"]
    if failed:
        raise RecordError("%s: light probes did not run: %s" % (spec["document"]["name"], "; ".join(failed)))
    return probes
