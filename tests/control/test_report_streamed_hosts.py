"""Hosts that differ are read a chunk at a time: `gpudiag report` derives what it reports from each host while the
chunk is held and drops the host's data. Its console, markdown (with appendix) and JSON reports of a fleet whose
hosts all differ (their own GPU UUIDs, hostnames, measured values) are those of the whole run read at once."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from click.testing import CliRunner

import gpudiag.cli.report as report_cli  # every remembered function registered, as the CLI has them
from gpudiag.cli import cli
from gpudiag.cli.report_stream import CHUNK, FINDINGS_AND_VERDICT, streamed_run
from gpudiag.derived import COMPRESSED, REMEMBERED, DataDropped, is_slim
from gpudiag.findings import all_findings
from gpudiag.render.host_appendix import appendix_document_lines
from gpudiag.render.json_report import render_json
from gpudiag.render.markdown import render_markdown
from gpudiag.render.safe_text import clean_run
from gpudiag.run_loader import load_run
from gpudiag.store import write_json_atomic
from gpudiag.verdict import verdict

FLEET3 = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "fleet3"
FLOAT = re.compile(r"(?<=[:\[ ])-?\d+\.\d+(?:[eE][-+]?\d+)?")
UUID = re.compile(r"GPU-[0-9a-f]{8}-")


def varied_run(root, count):
    """`count` hosts cycling through the three recorded hosts, each with its own GPU UUIDs, hostname and measured
    values (every float scaled by a factor of its own); h040, h080 and h120 are h000 again under their own names."""
    sources = {name: (FLEET3 / "hosts" / f"{name}.json").read_text() for name in ("gpu-a", "gpu-b", "gpu-c")}
    (root / "hosts").mkdir(parents=True)
    entries = []
    for n in range(count):
        name, twin = f"h{n:03d}", n % 40 == 0
        text = sources[("gpu-a", "gpu-b", "gpu-c")[0 if twin else n % 3]]
        if not twin:
            factor = 0.95 + n / 1000
            text = FLOAT.sub(lambda m: repr(round(float(m.group()) * factor, 6)), text)
            text = UUID.sub(f"GPU-{n:08x}-", text).replace('"hostname": "', f'"hostname": "{name}-')
        host = dict(json.loads(text), name=name, address=f"10.0.0.{n}")
        write_json_atomic(root / "hosts" / f"{name}.json", host)
        entries.append({"file": name, "name": name, "reason": "", "status": host["status"]})
    run = json.loads((FLEET3 / "run.json").read_text())
    write_json_atomic(root / "run.json", dict(run, hosts=entries, planned=[e["name"] for e in entries], run_id="r"))
    return root


def report(run_dir, *args):
    return subprocess.run([sys.executable, "-m", "gpudiag", "report", str(run_dir), *args], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, COLUMNS="120"))


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    return varied_run(tmp_path_factory.mktemp("varied") / "run", 2 * CHUNK + 20)  # three chunks


def test_the_reports_of_a_differing_fleet_are_those_of_the_whole_run_read_at_once(fleet, tmp_path):
    whole = clean_run(load_run(fleet))  # every host's data held, as report read runs before
    found = all_findings(whole)
    judged = verdict(whole, found)
    assert len({(h.probe_data("env") or {}).get("hostname") for h in whole.hosts}) > 2 * CHUNK * 2 // 3  # differ

    as_json = report(fleet, "--json")
    assert as_json.returncode == judged.exit_code, as_json.stderr
    assert as_json.stdout == render_json(whole, found, judged)
    assert report(fleet, "--no-charts", "-o", str(tmp_path / "r.md")).returncode == judged.exit_code
    assert (tmp_path / "r.md").read_text() == render_markdown(whole, found, {}, judged, "r.appendix.md")
    appendix = (tmp_path / "r.appendix.md").read_text()
    assert appendix == "\n".join(appendix_document_lines(whole, {}, "r.md")).rstrip("\n") + "\n"
    assert "These 4 hosts read the same data; shown as h000 read it." in appendix  # twins in three chunks
    doc = json.loads(as_json.stdout)
    assert {"fleet.drift", "copies.gpu_outlier"} <= {f["id"] for f in doc["findings"]}
    assert [h["name"] for h in doc["hosts"]] == [f"h{n:03d}" for n in range(2 * CHUNK + 20)]


def test_the_console_report_is_that_of_the_whole_run_read_at_once(fleet, monkeypatch):
    def console():
        out = CliRunner(env={"COLUMNS": "120"}).invoke(cli, ["report", str(fleet)])
        return out.exit_code, out.output

    streamed = console()
    monkeypatch.setattr(report_cli, "streamed_run", lambda run_dir, *_: (load_run(run_dir), {}))
    assert streamed == console()
    for n in (1, 2, 2 * CHUNK + 19):  # a host of two sources, and the last chunk's last host
        assert f"h{n:03d}" in streamed[1]


def test_worker_processes_write_the_report_one_process_writes(fleet, tmp_path):
    """Three chunks in three forked workers (--jobs 3), then in this process alone (--jobs 1): the same bytes."""
    outputs = {}
    for jobs in ("3", "1"):
        md = tmp_path / f"r{jobs}" / "r.md"
        as_md = report(fleet, "--jobs", jobs, "--no-charts", "-o", str(md))
        as_json, console = report(fleet, "--jobs", jobs, "--json"), report(fleet, "--jobs", jobs)
        outputs[jobs] = [(r.returncode, r.stdout) for r in (as_md, as_json, console)]
        outputs[jobs] += [md.read_text(), md.with_name("r.appendix.md").read_text()]
    assert outputs["3"] == outputs["1"]
    assert "### h147" in outputs["1"][4] and "fleet.drift" in outputs["1"][1][1]  # the last chunk's host; a fleet rule
    refused = report(fleet, "--jobs", "0")
    assert refused.returncode == 2 and "--jobs" in refused.stderr and "Traceback" not in refused.stderr


def test_an_appendix_that_cannot_be_written_is_one_error_whoever_writes_it(fleet, tmp_path):
    for jobs in ("2", "1"):  # its own process beside the findings, or this one
        out = tmp_path / jobs
        (out / "r.appendix.md").mkdir(parents=True)
        refused = report(fleet, "--jobs", jobs, "--no-charts", "-o", str(out / "r.md"))
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
        assert refused.stderr.count("r.appendix.md: cannot write: Is a directory") == 1
        assert not (out / "r.md").exists()  # no report that links to an appendix not written


def test_a_streamed_host_keeps_what_was_derived_and_no_data(fleet):
    run, charts = streamed_run(fleet)
    assert charts == {} and len(run.hosts) == 2 * CHUNK + 20 and all(is_slim(h) for h in run.hosts)
    host = run.hosts[3]  # h003, from gpu-a
    assert set(host.probes.derived) == set(REMEMBERED)
    statuses = {name: result.status for name, result in host.probes.items()}  # names and statuses stay
    assert statuses["env"] == "ok" and "copy_bench" in statuses
    with pytest.raises(DataDropped):
        host.probe_data("env")  # a reader that was not remembered fails loudly, never reads nothing
    assert REMEMBERED["gpudiag.findings.facts.host_facts"](host).name == "h003"
    # The appendix section (text, read once) is kept compressed; the results several renderers read are not.
    kept = host.probes.derived
    assert COMPRESSED == {"gpudiag.render.host_appendix.host_detail"} and kept[next(iter(COMPRESSED))].compressed
    assert not kept["gpudiag.findings.questions.host_answers"].compressed
    assert REMEMBERED["gpudiag.render.host_appendix.host_detail"](host, {})[0].startswith("Probes: ")


def test_the_scan_read_back_keeps_what_findings_and_verdict_read_and_judges_as_the_whole_run(fleet):
    assert FINDINGS_AND_VERDICT <= set(REMEMBERED)
    whole = clean_run(load_run(fleet))
    streamed = clean_run(streamed_run(fleet, derive=FINDINGS_AND_VERDICT)[0])
    assert set(streamed.hosts[3].probes.derived) == FINDINGS_AND_VERDICT
    found = all_findings(streamed)
    assert found == all_findings(whole) and verdict(streamed, found) == verdict(whole, found)
