"""Reports follow what differs, not how many hosts: 100 copies of each recorded host (tests/fixtures/runs/fleet3,
renamed) give the findings and fleet rows of one copy each, with counts; no finding's title or recommendation
names a host; the console summary is one row per agreeing group."""
import io
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from gpudiag.cli import cli
from gpudiag.findings import RULES, all_findings
from gpudiag.render.console import summary_table
from gpudiag.run_loader import load_run

FLEET3 = Path(__file__).resolve().parent.parent / "fixtures" / "runs" / "fleet3"


def copies(dst: Path, count: int) -> Path:
    """The recorded run with `count` renamed copies of each host; every mention of its name is renamed."""
    run = json.loads((FLEET3 / "run.json").read_text())
    (dst / "hosts").mkdir(parents=True)
    entries = []
    for entry in run["hosts"]:
        text = (FLEET3 / "hosts" / f"{entry['file']}.json").read_text()
        for number in range(count):
            name = f"{entry['name']}-qx{number:03d}"
            (dst / "hosts" / f"{name}.json").write_text(text.replace(entry["name"], name))
            entries.append(dict(entry, name=name, file=name, reason=entry["reason"].replace(entry["name"], name)))
    run["hosts"] = entries
    (dst / "run.json").write_text(json.dumps(run))
    return dst


def report(run_dir: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["report", str(run_dir), "--no-charts", *args])
    assert result.exit_code in (0, 1, 3, 4), result.output
    return result.output


def section(text: str, name: str) -> list[str]:
    return text.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0].splitlines()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("fleet")
    return copies(base / "one", 1), copies(base / "hundred", 100)


def test_a_hundred_copies_give_the_same_findings_with_a_hundred_times_the_hosts(runs):
    one, hundred = (json.loads(report(r, "--json"))["findings"] for r in runs)
    assert [(f["id"], f["title"], f["severity"]) for f in one] == [(f["id"], f["title"], f["severity"]) for f in hundred]
    assert [100 * len(f["hosts"]) for f in one] == [len(f["hosts"]) for f in hundred]   # JSON: every host
    assert [len(f["evidence"]) for f in one] == [len(f["evidence"]) for f in hundred]


def test_fleet_rows_and_findings_do_not_grow_with_copies(runs):
    one, hundred = (report(r, "--markdown") for r in runs)
    fleet_one, fleet_hundred = section(one, "Fleet"), section(hundred, "Fleet")
    assert len(fleet_one) == len(fleet_hundred)
    assert sum("| 100 hosts: " in line for line in fleet_hundred) == 3          # one row per recorded host
    assert "and 90 more" in "\n".join(fleet_hundred) and "gpu-a-qx099" not in "\n".join(fleet_hundred)
    findings_one, findings_hundred = section(one, "Findings"), section(hundred, "Findings")
    assert len(findings_hundred) <= 1.5 * len(findings_one)
    assert "gpu-c-qx099" in json.dumps(json.loads(report(runs[1], "--json"))["findings"])


def test_no_title_or_recommendation_names_a_host(runs):
    loaded = load_run(runs[1])
    names = [h.name for h in loaded.hosts]
    findings = all_findings(loaded)
    fired = {f.id.split(".")[0] for f in findings}
    assert len(findings) >= 6 and {"cuda_graph", "copies", "fleet", "hosts", "sglang"} <= fired
    for f in findings:
        said = f"{f.title}\n{f.recommendation}"
        assert not [n for n in names if n in said], (f.id, said)
        assert not re.search(r"gpu-[abc]-qx\d", said), (f.id, said)
    assert len(RULES) >= 14


def test_the_console_summary_is_one_row_per_agreeing_group(runs):
    loaded = load_run(runs[1])
    out = io.StringIO()
    Console(file=out, width=400, color_system=None).print(summary_table(list(loaded.hosts), "scan"))
    text = out.getvalue()
    assert text.count("100 hosts: ") == 3 and "gpu-a-qx050" not in text
    assert "HOST.lab.internal:22: connection timed out" in text


def test_the_whole_report_follows_what_differs_not_the_host_count(runs):
    """The main report (no appendix) of 100 copies of each host is at most 1.5 times that of one copy: hosts that
    agree share their lines in Answers, Verdict, Fleet, Findings and Next steps."""
    one, hundred = (report(r, "--markdown").split("\n## Appendix")[0] for r in runs)
    assert len(hundred.splitlines()) <= 1.5 * len(one.splitlines()), (len(one.splitlines()),
                                                                        len(hundred.splitlines()))
