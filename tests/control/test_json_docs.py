"""docs/json.md against real output: each command's `--json`, run here on real input (a scan of localhost, the
stored runs, the inventory, the probes, a diff of two runs), has exactly the keys its table documents, and the
pages it points at for the other documents exist."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "json.md").read_text()


def sections():
    """{heading: {path: (type, optional)}} from the doc's tables; `a`, `b` after a first `x[].a` share its prefix."""
    found = {}
    for block in re.split(r"^## ", DOC, flags=re.M)[1:]:
        heading, rows = block.splitlines()[0], {}
        for line in block.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) != 3 or not cells[0].startswith("`"):
                continue
            names = re.findall(r"`([^`]+)`", cells[0])
            prefix = names[0].rpartition(".")[0] + "." if "." in names[0] else ""
            for i, name in enumerate(names):
                rows[name if i == 0 else prefix + name] = (cells[1], cells[2].startswith("*optional*"))
        found[heading] = rows
    return found


def real_paths(doc, documented):
    """The paths of `doc` at the places the table breaks down: the root and every `object` it documents."""
    out = set()

    def visit(value, prefix):
        items = value if isinstance(value, list) else [value]
        for item in items:
            if not isinstance(item, dict):
                continue
            for key, child in item.items():
                path = prefix + ("[]." if isinstance(value, list) else ("." if prefix else "")) + key
                path = path.replace("..", ".")
                out.add(path.lstrip("."))
                kind = documented.get(path.lstrip("."), ("",))[0]
                if "object" in kind and child:
                    visit(child, path.lstrip("."))
    visit(doc, "")
    return out


def gpudiag(*args, cwd):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "gpudiag", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=180)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    work = tmp_path_factory.mktemp("json-docs")
    reports = str(work / "reports")
    scan = ["scan", "localhost", "--probes", "env", "--set", "env.torch=false", "--reports-dir", reports, "--json"]
    first, second = gpudiag(*scan, cwd=work), gpudiag(*scan, cwd=work)
    return {
        "gpudiag scan": first,
        "gpudiag runs": gpudiag("runs", "--reports-dir", reports, "--json", cwd=work),
        "gpudiag hosts": gpudiag("hosts", "localhost", "--json", cwd=work),
        "gpudiag probes": gpudiag("probes", "--json", cwd=work),
        "gpudiag diff": gpudiag("diff", first["run_id"], second["run_id"], "--reports-dir", reports, "--json",
                                cwd=work),
    }


@pytest.mark.parametrize("command", ["gpudiag scan", "gpudiag runs", "gpudiag hosts", "gpudiag probes",
                                     "gpudiag diff"])
def test_each_documented_shape_is_the_real_one(outputs, command):
    heading = next(h for h in sections() if h.startswith("`" + command))
    documented = sections()[heading]
    real = real_paths(outputs[command], documented)
    required = {p for p, (_, optional) in documented.items() if not optional}
    assert real - set(documented) == set(), f"{command}: printed but not documented"
    assert required - real == set(), f"{command}: documented but not printed"


def test_every_command_with_json_is_documented_here_or_linked():
    covered = DOC.split("## ")[0] + " ".join(sections())
    for name in ("scan", "ingest", "repro", "runs", "hosts", "probes", "diff", "bench", "report", "serving"):
        assert f"gpudiag {name}" in covered, name
    for page in re.findall(r"\]\(([\w-]+\.md)", DOC):
        assert (ROOT / "docs" / page).is_file(), page
