"""No planted secret leaves the host: live stand-in sglang servers carry 30 secret-named values and 42
credential shapes under ordinary names (keys, schemes, JWTs, JSON values, URL userinfo) in their argv and
environment (direct launches, `bash -c`, `sh -c`, `exec -a`, `--flag=value`, values starting with `-`,
multi-word values, URL userinfo, denied names under allowed prefixes); a scan over the sshd fleet and
every report must show the servers and none of the secrets."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.process_groups import end_groups

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
    end_groups(procs)


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


def mark(i):
    """A unique, greppable marker that keeps a random-looking token random-looking (short mixed runs)."""
    return f"Gd{i:02d}sH9q"


JWT = "eyJhbGciOiJIUzI1NiJ9.eyJ{m}zdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
RANDOM = "Zk3Qp9Xw7Lm2{m}Rt8VbN4cYhJ6"


def shaped_argv():
    """Credentials in shapes a name list misses: non-secret flag names carrying keys, schemes, JWTs, JSON."""
    m = mark
    py = sys.executable
    shapes = [
        "--served-model-name", f"sk-proj-{m(1)}AbCdEf123456", "--revision", f"hf_{m(2)}AbCdEfGhIjKl",
        "--chat-template", f"Bearer {m(3)}abc.def", "--tokenizer-mode", f"Basic {m(4)}dXNlcjpwYXNz",
        "--file-storage-path", JWT.format(m=m(5)), "--download-dir", RANDOM.format(m=m(6)),
        "--upstream-url", f"http://user:{m(7)}@10.0.0.1:5000/v1", "--endpoint", f"https://h/x?access_token={m(8)}&y=1",
        "--json-model-override-args", json.dumps({"api_key": m(9), "rope_scaling": {"factor": 2}}),
        "--model-loader-extra-config", json.dumps({"headers": {"Authorization": f"Token {m(10)}"},
                                                   "nested": [{"hf_token": m(11)}]}),
        "--license", m(12), "--sk", m(13), f"--licence-key={m(14)}", "--my-credential", m(15),
        "--cookie-jar", m(16), "--auth", m(17), "--note", f"ghp_{m(18)}AbCdEfGhIjKlMnOp12",
        "--aws", "AKIAGD19SHQZZZZZZZZZ", "--ssl-certfile", f"-----BEGIN PRIVATE KEY-----\n{m(20)}\n-----END PRIVATE KEY-----",
        "--extra", f"api_key={m(21)},x=1", "--extra-two", f"token: {m(22)}", "--gl", f"glpat-{m(23)}abcdefghij",
        "--slack", f"xoxb-{m(24)}-1234567890", "--google", f"AIza{m(25)}abcdefghijklmnopqrstuvwxyz",
        "--x-encoded", f"Bearer%20{m(26)}", "--headers", f"X-Api-Key: {m(27)}", "--npm", f"npm_{m(28)}abcdefghijklmnopqrstuv",
        "--anthropic", f"sk-ant-api03-{m(29)}abcdefgh", "--port", "30995"]
    direct = [py, "-m", "sglang.launch_server", *shapes]
    in_bash = ["bash", "-c", f"{py} -m sglang.launch_server --json-model-override-args "
                             f"'{json.dumps({'secret': m(30)})}' --model-path https://u:{m(31)}@hub/m --port 30996"]
    return [direct, in_bash]


SHAPED_ENV = {
    "SGLANG_EXTRA_HEADERS": f"Authorization: Bearer {mark(32)}", "SGLANG_JSON_CFG": json.dumps({"password": mark(33)}),
    "SGL_UPSTREAM": f"https://svc:{mark(34)}@h/", "SGLANG_OPTS": f"api_key={mark(35)},debug=1",
    "NCCL_X": f"sk-ant-{mark(36)}aaaaaaaaaaaaa", "SGLANG_HF": f"hf_{mark(37)}AbCdEfGhIjKl",
    "SGLANG_JWT": JWT.format(m=mark(38)), "SGLANG_RANDOM": RANDOM.format(m=mark(39)),
    "SGLANG_HEADERS_JSON": json.dumps({"headers": {"Cookie": f"session={mark(40)}"}}),
    "FLASHINFER_URL": f"https://h/?token={mark(41)}", "SGLANG_BASIC": f"Basic {mark(42)}Zm9vOmJhcg==",
}
SHAPE_MARKERS = [mark(i) for i in range(1, 43) if i != 19] + ["GD19SHQ"]


@pytest.fixture
def shaped_servers(tmp_path):
    package = tmp_path / "standin" / "sglang"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "launch_server.py").write_text("import time\ntime.sleep(120)\n")
    env = dict(os.environ, PYTHONPATH=str(package.parent), NCCL_DEBUG="WARN", **SHAPED_ENV)
    procs = [subprocess.Popen(argv, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for argv in shaped_argv()]
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and _shaped_seen() < 3:   # 2 pythons + the bash that stays
        time.sleep(0.1)
    yield procs
    end_groups(procs)


def _shaped_seen():
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            count += b"sglang.launch_server" in cmdline and b"sH9q" in cmdline
    return count


def test_no_credential_shape_leaves_the_host_whatever_its_name(sshd_fleet, tmp_path, shaped_servers):
    assert len(set(SHAPE_MARKERS)) == 42
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
    stored = [p.read_text(errors="replace") for p in reports.rglob("*") if p.is_file()]
    stored += [Path(h.host_key_path).parent.joinpath("sshd.log").read_text(errors="replace")
               for h in sshd_fleet.hosts]
    host = json.loads(next(reports.glob("runs/*/hosts/h0.json")).read_text())
    servers = host["probes"]["deployment"]["data"]["servers"]
    shaped = [s for s in servers if s["args"].get("port") in (30995, 30996)]
    assert len(shaped) == 2, servers                     # both servers were seen and their flags read
    direct = next(s for s in shaped if s["args"]["port"] == 30995)
    assert direct["env"]["NCCL_DEBUG"] == "WARN" and "SGLANG_EXTRA_HEADERS" in direct["env"]
    assert json.loads(direct["args"]["json_model_override_args"])["rope_scaling"] == {"factor": 2}
    everything = "\n".join(outputs + stored)
    leaked = sorted(marker for marker in SHAPE_MARKERS if marker in everything)
    assert leaked == [], f"{len(leaked)} of {len(SHAPE_MARKERS)} planted credential shapes left the host: {leaked}"


def new_mark(i):
    return f"Nw{i:02d}kP3z"


def new_shape_argv():
    """Shapes a first round of redaction missed: argparse abbreviations, an `exec -a` argv0 holding flags,
    [name, value] header pairs, a SAS signature, other Authorization schemes, userinfo with an empty user."""
    m = new_mark
    py = sys.executable
    direct = [py, "-m", "sglang.launch_server", "--admin-api", m(1), "--api=" + m(2), "--ssl-keyfile-pass", m(3),
              "--model-loader-extra-config", json.dumps({"headers": [["Authorization", f"Bearer {m(4)}"]]}),
              "--endpoint", f"https://a.blob.core.windows.net/c/m?sv=2022-11-02&sig={m(5)}%2Bx%3D",
              "--chat-template", f"Authorization: Token {m(6)}", "--upstream-url", f"redis://:{m(7)}@127.0.0.1:6379",
              "--port", "30997"]
    exec_a = ["bash", "-c", f"exec -a 'sglang-srv --api-key {m(8)}' {py} -m sglang.launch_server --port 30998"]
    return [direct, exec_a]


NEW_SHAPE_ENV = {"SGLANG_ARGS": f"--api-key {new_mark(9)} --log-level info",
                 "SGLANG_LAUNCH": f"serve --admin-api-key={new_mark(10)}",
                 "SGLANG_HEADERS": json.dumps([["X-Api-Key", new_mark(11)]]),
                 "SGLANG_AUTH": f"Authorization: ApiKey {new_mark(12)}",
                 "SGLANG_CACHE_URL": f"redis://:{new_mark(13)}@cache:6379/0"}
NEW_SHAPE_MARKERS = [new_mark(i) for i in range(1, 14)]


@pytest.fixture
def new_shape_servers(tmp_path):
    package = tmp_path / "standin" / "sglang"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "launch_server.py").write_text("import time\ntime.sleep(120)\n")
    env = dict(os.environ, PYTHONPATH=str(package.parent), NCCL_DEBUG="WARN", **NEW_SHAPE_ENV)
    procs = [subprocess.Popen(argv, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for argv in new_shape_argv()]
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and _count_cmdlines(b"kP3z") < 2:
        time.sleep(0.1)
    yield procs
    end_groups(procs)


def _count_cmdlines(marker):
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                count += marker in Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
    return count


def test_no_new_secret_shape_leaves_the_host(sshd_fleet, tmp_path, new_shape_servers):
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
    stored = [p.read_text(errors="replace") for p in reports.rglob("*") if p.is_file()]
    host = json.loads(next(reports.glob("runs/*/hosts/h0.json")).read_text())
    servers = host["probes"]["deployment"]["data"]["servers"]
    assert {30997, 30998} <= {s["args"].get("port") for s in servers}, servers   # both seen, flags read
    everything = "\n".join(outputs + stored)
    leaked = sorted(marker for marker in NEW_SHAPE_MARKERS if marker in everything)
    assert leaked == [], f"{len(leaked)} of {len(NEW_SHAPE_MARKERS)} planted shapes left the host: {leaked}"
