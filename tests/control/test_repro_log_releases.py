"""Release inference for old logs: 0.1-0.3 layouts and `sglang: 0.3.0` version prints; advice names only
flags the release has (checked against the real wheels' argument parsers), or says it cannot tell; the facts
the inference relies on hold in the wheels; sglang's early-2025 `child proces.` typo is a crash."""
import re
from pathlib import Path

import pytest

from probes.crashlog import releases
from probes.crashlog.classify import classify, render_advice
from probes.crashlog.table import SIGNATURES
from tests.control.test_repro_log_corpus import FLAG, wheel_flags
from tests.sglang_wheels import require

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "corpus"


def log(name):
    return [ln for ln in (CORPUS / name).read_text(encoding="utf-8").splitlines() if not ln.startswith("#fixture ")]


@pytest.mark.parametrize("line, version", [
    ("sglang: 0.3.0", "0.3.0"),
    ("sglang:   0.4.6.post4", "0.4.6"),
    ("Name: sglang\nVersion: 0.3.2", "0.3.2"),               # pip show
    ("lmsysorg/sglang:v0.5.10.post1", "0.5.10"),
    ("sglang==0.2.15", "0.2.15"),
    ("sglang version 0.1.17", "0.1.17"),
])
def test_version_prints_are_recognised(line, version):
    assert releases.infer_release(line)["release"] == version


def test_date_less_records_are_a_release_before_0_3_4_and_advice_uses_its_flags():
    for name in ("clean_sglang_1467_served_0_3_layout.log", "clean_sglang_1362_v0_3_server_args.log"):
        info = classify("\n".join(log(name)))["release"]
        assert (info["generation"], info["before"]) == ("before 0.5.14", "0.3.4"), name
        assert "without the date" in info["basis"]
    # Under a docker compose prefix too.
    wrapped = classify("\n".join("llm0-1  | " + ln for ln in log("clean_sglang_1467_served_0_3_layout.log")))
    assert wrapped["release"]["before"] == "0.3.4" and wrapped["advice_assumes"] == "sglang before 0.3.4"


@pytest.mark.parametrize("generation, release, before, wheels", [
    ("before 0.5.14", None, "0.3.4", ("0.2.15", "0.3.0", "0.3.2")),
    ("before 0.5.14", "0.3.0", None, ("0.3.0",)),
    ("before 0.5.14", "0.3.4", None, ("0.3.4",)),
    ("before 0.5.14", None, "0.2.0", ("0.1.17",)),
])
def test_advice_for_old_releases_names_only_their_flags(generation, release, before, wheels):
    words = releases.flag_words(generation, release, before)
    named = set()
    for entry in SIGNATURES:
        advice = render_advice(entry["recommendation"], words)
        for flag in FLAG.findall(advice):
            named.add(flag)
            for version in wheels:
                assert flag in wheel_flags(version), f"{entry['name']}: {flag} is not a flag of sglang {version}"
    assert "--cuda-graph-max-bs" not in named
    if before == "0.2.0":
        assert named == {"--mem-fraction-static"} and "captures no CUDA graphs" in words["graphs_off"]
    else:
        assert "--disable-cuda-graph" in named and "no flag for it" in words["max_bs"]


def test_an_old_traceback_path_tells_the_release():
    frame = '  File "/opt/sglang/python/sglang/srt/managers/controller_single.py", line 166, in start_controller_process'
    info = releases.infer_release(frame)
    assert info["before"] == "0.3.4" and "controller_single.py" in info["basis"]
    ancient = releases.infer_release('  File "/x/sglang/srt/managers/router/model_rpc.py", line 1, in exposed_step')
    assert ancient["before"] == "0.2.0"


def test_the_old_layout_facts_hold_in_the_wheels():
    def datefmt(version):
        return re.findall(r'datefmt="([^"]+)"', (require(version) / "sglang/srt/utils.py").read_text())
    assert datefmt("0.2.15") == datefmt("0.3.2") == ["%H:%M:%S"]
    assert datefmt("0.3.4") == ["%Y-%m-%d %H:%M:%S"]
    for marker in ("managers/controller_single.py", "managers/controller_multi.py", "managers/policy_scheduler.py"):
        assert (require("0.3.2") / "sglang/srt" / marker).is_file() and not (require("0.3.4") / "sglang/srt" / marker).exists()
    assert (require("0.1.17") / "sglang/srt/managers/router/model_rpc.py").is_file()
    assert not (require("0.2.15") / "sglang/srt/managers/router").exists()
    assert "--cuda-graph-max-bs" not in wheel_flags("0.3.4") and "--cuda-graph-max-bs" in wheel_flags("0.3.5")
    assert "--disable-cuda-graph" not in wheel_flags("0.1.17") and "--disable-cuda-graph" in wheel_flags("0.2.15")


def test_the_early_2025_sigquit_typo_is_a_crash():
    source = (require("0.4.3") / "sglang/srt/entrypoints/engine.py").read_text()
    message = re.search(r'"(Received sigquit from a child proces\. [^"]*)"', source).group(1)
    served = log("clean_sglang_11830_capture_bars_finished.log")
    result = classify("\n".join(served + ["[2025-02-10 08:00:00] " + message]))
    assert result["outcome"] == "unclassified_crash"
    assert result["crashes"][0]["line"] == len(served) + 1
