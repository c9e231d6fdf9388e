"""Every sglang release from 0.4.6 to 0.5.23, on request: algorithms, version, integrity, field names and the
repro's launch flags, each read from the release's own wheel.

CI downloads only tests/sglang_wheels.VERSIONS; this sweep fetches 28 wheels (about 500 MB), so it runs
only when GPUDIAG_ALL_SGLANG_RELEASES=1. The expected algorithms were read from each release's source.
"""
import os

import pytest

from probes.graphrepro import launch_plan
from probes.sglang_facts import locate
from probes.sglang_source import facts_from_location
from tests.sglang_wheels import require

OLD = ["NONE", "EAGLE", "EAGLE3"]
REGISTERED = ["NONE", "EAGLE", "EAGLE3", "STANDALONE", "NGRAM"]
ENUM_0_5_8 = ["EAGLE", "EAGLE3", "STANDALONE", "NGRAM", "NONE"]
DFLASH = ["DFLASH", "EAGLE", "EAGLE3", "STANDALONE", "NGRAM", "NONE"]
MTP = ["DFLASH", "EAGLE", "EAGLE3", "FROZEN_KV_MTP", "STANDALONE", "NGRAM", "NONE"]
DSPARK = ["DFLASH", "DSPARK", "EAGLE", "EAGLE3", "FROZEN_KV_MTP", "STANDALONE", "NGRAM", "NONE"]
UNO = ["DFLASH", "UNO", "DSPARK", "EAGLE", "EAGLE3", "FROZEN_KV_MTP", "STANDALONE", "NGRAM", "NONE"]
ALGORITHMS = {
    "0.4.6": OLD, "0.4.7": OLD, "0.4.8": OLD, "0.4.9": OLD, "0.4.10": OLD, "0.5.1": OLD,
    "0.5.2": OLD + ["STANDALONE"], "0.5.3": REGISTERED, "0.5.4": REGISTERED, "0.5.5": REGISTERED,
    "0.5.6": REGISTERED, "0.5.7": REGISTERED, "0.5.8": ENUM_0_5_8, "0.5.9": ENUM_0_5_8, "0.5.10": ENUM_0_5_8,
    "0.5.11": DFLASH, "0.5.12": MTP, "0.5.13": MTP, "0.5.14": MTP, "0.5.15": MTP, "0.5.16": DSPARK,
    "0.5.17": DSPARK, "0.5.18": DSPARK, "0.5.19": DSPARK, "0.5.20": UNO, "0.5.21": UNO, "0.5.22": UNO,
    "0.5.23": UNO,
}
LOOP_NAMES = {"dst", "src", "buf", "buffer", "dsts", "srcs", "copy_dsts"}

pytestmark = pytest.mark.skipif(os.environ.get("GPUDIAG_ALL_SGLANG_RELEASES") != "1",
                                reason="set GPUDIAG_ALL_SGLANG_RELEASES=1 to fetch and read all 28 releases")


@pytest.mark.parametrize("version", sorted(ALGORITHMS, key=lambda v: tuple(int(p) for p in v.split("."))))
def test_release(version):
    data = facts_from_location(locate.find_package([str(require(version))]))
    assert data["version"] == version and data["finder_errors"] == []
    assert data["speculative_algorithms"] == ALGORITHMS[version]
    assert data["integrity"]["method"] == "record" and data["integrity"]["modified"] == []
    for site in data["grouped_foreach_copy"]["call_sites"]:
        assert not LOOP_NAMES & set(site["fields"]), site
    flags = data["server_flags"]
    parser = {f["name"] for f in flags}
    for algorithm in ("EAGLE", "EAGLE3", "DFLASH"):
        if algorithm not in data["speculative_algorithms"]:
            continue
        cell = {"model_dir": "/m", "draft_dir": "/d", "algorithm": algorithm, "batch_sizes": [1, 4],
                "draft_tokens": 4, "layers": 2, "steps": 3, "topk": 1, "tp": 1, "port": 30000}
        argv, omitted = launch_plan.build_argv("python", cell, flags)
        assert [f for f in argv[3:] if f.startswith("--") and f not in parser] == []
        assert launch_plan.rejected_values(argv, flags) == []
        assert set(omitted) <= {"--speculative-draft-load-format"}
