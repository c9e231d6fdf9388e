"""Hosts that agree are handled once: a run of many hosts with the same probe data reads each host file and keeps
one copy of that data, the rules and answers judge it once, and the console report, the markdown report and its
appendix are as long as for ten such hosts. Findings are what judging every host on its own gives."""
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

from gpudiag import findings as rules
from gpudiag.findings.common import sort_findings
from gpudiag.findings.group import merge_across_hosts
from gpudiag.render.safe_text import clean_run
from gpudiag.store import write_json_atomic
from gpudiag.run_loader import load_run

FLEET3 = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "fleet3"


def identical_run(root, count, source="gpu-b", odd=()):
    """A run of `count` hosts h000..., each the recorded `source` host under its own name; hosts named in `odd`
    differ in one value of their probe data."""
    doc = json.loads((FLEET3 / "hosts" / f"{source}.json").read_text())
    run = json.loads((FLEET3 / "run.json").read_text())
    (root / "hosts").mkdir(parents=True)
    entries = []
    for n in range(count):
        name = f"h{n:03d}"
        host = dict(doc, name=name, address=f"10.0.0.{n % 250}", duration_s=1.0 + n / 1000)
        if name in odd:
            host = json.loads(json.dumps(host))
            host["probes"]["env"]["duration_s"] = 99.0
        write_json_atomic(root / "hosts" / f"{name}.json", host)
        entries.append({"file": name, "name": name, "reason": "", "status": host["status"]})
    write_json_atomic(root / "run.json", dict(run, hosts=entries, planned=[e["name"] for e in entries],
                                              run_id=root.name))
    return root


def report(run_dir, *args):
    return subprocess.run([sys.executable, "-m", "gpudiag", "report", str(run_dir), *args], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, COLUMNS="120"))


def test_the_console_and_markdown_reports_of_300_identical_hosts_are_as_long_as_of_ten(tmp_path):
    ten, many = identical_run(tmp_path / "ten", 10), identical_run(tmp_path / "many", 300)
    short, long = report(ten), report(many)
    assert short.returncode == long.returncode, long.stderr
    assert "300 hosts: h000, h001" in long.stdout and "and 290 more" in long.stdout
    # One fleet row for all of them; only a label's wrapping ("and 290 more") may add a line here and there.
    assert len(long.stdout.splitlines()) <= len(short.stdout.splitlines()) + 5 < 300
    for run_dir in (ten, many):
        assert report(run_dir, "--no-charts", "-o", str(run_dir / "r.md")).returncode == short.returncode
    assert len((many / "r.md").read_text().splitlines()) == len((ten / "r.md").read_text().splitlines())
    appendix = (many / "r.appendix.md").read_text()
    assert appendix.count("\n### ") == 1 and "These 300 hosts read the same data; shown as h000 read it." in appendix
    assert len(appendix.splitlines()) == len((ten / "r.appendix.md").read_text().splitlines())
    # JSON keeps every name.
    doc = json.loads(report(many, "--json").stdout)
    assert any(len(a["hosts"]) == 300 for q in doc["answers"]["questions"] for a in q["answers"])


def test_hosts_with_the_same_probe_text_share_one_copy_and_others_keep_their_own(tmp_path):
    run = load_run(identical_run(tmp_path / "run", 20, odd=("h007",)))
    by_name = {h.name: h for h in run.hosts}
    shared = by_name["h000"].probes
    assert all(h.probes is shared for name, h in by_name.items() if name != "h007")
    assert by_name["h007"].probes is not shared and by_name["h007"].probes["env"].duration_s == 99.0
    assert [h.name for h in run.hosts] == [f"h{n:03d}" for n in range(20)]


def per_host_findings(run):
    """The findings as judging every host on its own gives them (each rule over every host)."""
    hosts = sorted(run.hosts, key=lambda h: h.name)
    return sort_findings(merge_across_hosts([f for rule in rules.RULES for f in rule(hosts)]))


def test_findings_judged_once_per_group_are_those_of_every_host_judged_alone(tmp_path):
    run = clean_run(load_run(identical_run(tmp_path / "run", 12, source="gpu-a", odd=("h003",))))
    recorded = clean_run(load_run(FLEET3))
    # The recorded hosts and renamed copies of each, the unreachable one's reason naming the copy itself.
    copies = [dataclasses.replace(h, name=f"{h.name}-{n}", reason=h.reason.replace(h.name, f"{h.name}-{n}"))
              for h in recorded.hosts for n in range(3)]
    mixed = dataclasses.replace(run, hosts=tuple(sorted(run.hosts + recorded.hosts + tuple(copies),
                                                        key=lambda h: h.name)))
    for checked in (run, mixed):
        assert rules.all_findings(checked) == per_host_findings(checked)
    unreached = [f for f in rules.all_findings(mixed) if f.id == "hosts.unscanned"]
    assert unreached and unreached[0].hosts == ("gpu-c", "gpu-c-0", "gpu-c-1", "gpu-c-2")
    assert "HOST.lab.internal:22" in unreached[0].evidence[0].text
