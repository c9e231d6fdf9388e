"""No planted secret leaves the host: live stand-in sglang servers carry 30 secrets in their argv and
environment (direct launches, `bash -c`, `sh -c`, `exec -a`, `--flag=value`, values starting with `-`,
multi-word values, URL userinfo, denied names under allowed prefixes); a scan over the sshd fleet and
every report must show the servers and none of the secrets."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

S = {i: f"gdsecret{i:02d}q7" for i in range(1, 31)}   # unique, greppable values


def argv_secrets():
    py = sys.executable
    direct = [py, "-m", "sglang.launch_server", "--model-path", f"https://user:{S[1]}@hub.example/m",
              "--api-key", S[2], "--admin-api-key=" + S[3], "--tool-server-token", S[4], "--db-pass", "-" + S[5],
              "--hf-token", "two", S[6], "--ssl-keyfile-password", S[7], "--watermark-config",
              json.dumps({"key": S[8]}), "--client-secret", S[9], "--auth-token=" + S[10], "--private-key", S[11],
              "--session", S[12], "--hmac-key", S[13], "--cookie", S[14], "--pw", S[15], "--db-password", S[16],
              "--speculative-num-draft-tokens", "4", "--port", "30991"]
    in_bash = ["bash", "-c", (f"{py} -m sglang.launch_server --api-key {S[17]} --db-pass '{S[18]} word' "
                             f"--port 30992; true")]
    in_sh = ["sh", "-c", (f"HF_TOKEN={S[19]} {py} -m sglang.launch_server --model-path /m --secret-key={S[20]} "
                         f"--port 30993; :")]
    exec_a = ["bash", "-c", f"exec -a sglang-srv {py} -m sglang.launch_server --api-key {S[21]} --port 30994"]
    return [direct, in_bash, in_sh, exec_a]


ENV_SECRETS = {"HF_TOKEN": S[22], "SGLANG_DB_PASS": S[23], "SGL_SECRETKEY": S[24], "NCCL_AUTH_TOKEN": S[25],
               "SGLANG_API_KEY": S[26], "SGLANG_SESSION_COOKIE": S[27], "SGL_HMAC_SALT": S[28],
               "HF_HOME": f"https://hf:{S[29]}@mirror.example/hf", "SGLANG_PASSWD": S[30]}


@pytest.fixture
def planted_servers(tmp_path):
    package = tmp_path / "standin" / "sglang"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "launch_server.py").write_text("import time\ntime.sleep(120)\n")
    env = dict(os.environ, PYTHONPATH=str(package.parent), NCCL_DEBUG="WARN", **ENV_SECRETS)
    procs = [subprocess.Popen(argv, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for argv in argv_secrets()]
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and _servers_seen() < 5:   # 4 pythons + the bash that stays
        time.sleep(0.1)
    yield procs
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)


def _servers_seen():
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            count += b"sglang.launch_server" in cmdline and b"gdsecret" in cmdline
    return count


def test_no_planted_secret_leaves_the_host(sshd_fleet, tmp_path, planted_servers):
    assert len(set(S.values())) >= 25
    reports = tmp_path / "reports"
    env = sshd_fleet.env(GPUDIAG_REPORTS=str(reports))
    inventory = sshd_fleet.write_inventory(tmp_path / "inventory.yaml", ["h0"], python=sshd_fleet.system_python)
    scan = sshd_fleet.run_gpudiag("scan", "-i", str(inventory), "all", "--probes", "deployment,env",
                                  "--set", "env.torch=false", env=env, timeout=120)
    assert scan.returncode in (0, 1), scan.stderr
    outputs = [scan.stdout, scan.stderr]
    for args in ((), ("--markdown",), ("--json",)):
        shown = sshd_fleet.run_gpudiag("report", *args, env=env)
        assert shown.returncode in (0, 1), shown.stderr
        outputs += [shown.stdout, shown.stderr]
    markdown_file = tmp_path / "FINDINGS.md"
    sshd_fleet.run_gpudiag("report", "--markdown", "-o", str(markdown_file), env=env)
    stored = [p.read_text(errors="replace") for p in reports.rglob("*") if p.is_file()]
    stored.append(markdown_file.read_text())
    stored += [Path(h.host_key_path).parent.joinpath("sshd.log").read_text(errors="replace")   # the hosts' logs
               for h in sshd_fleet.hosts]
    host = json.loads(next(reports.glob("runs/*/hosts/h0.json")).read_text())
    servers = host["probes"]["deployment"]["data"]["servers"]
    ports = {s["args"].get("port") for s in servers}
    assert {30991, 30992, 30993, 30994} <= ports, servers   # the servers were seen, their flags read
    direct = next(s for s in servers if s["args"].get("port") == 30991)
    assert direct["args"]["speculative_num_draft_tokens"] == 4
    assert direct["env"]["NCCL_DEBUG"] == "WARN"
    everything = "\n".join(outputs + stored)
    leaked = sorted(value for value in S.values() if value in everything)
    assert leaked == [], f"{len(leaked)} of {len(S)} planted secrets left the host: {leaked}"
    assert "<redacted>" in json.dumps(servers)
