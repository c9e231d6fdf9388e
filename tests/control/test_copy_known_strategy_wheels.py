"""The strategy each release is known to copy its replay inputs with (the baseline Q5 prices against when the installed
function cannot be timed) agrees with what sglang_source reads from the real wheels (0.5.11, 0.5.14, 0.5.23, never
imported): up to 0.5.11 the EAGLE replays copy tensor by tensor; from 0.5.14 they group the small fields and copy
hidden_states with its own copy_() (sglang PR #28465)."""

import pytest

from gpudiag.findings.savings import known_strategy, rank
from probes.copybench import strategies, workloads
from tests.probes.test_replay_fields import RELEASES, facts

EXPECTED = {
    "0.5.11": {"eagle_draft": strategies.LOOP, "eagle_draft_extend": strategies.LOOP},
    "0.5.14": {"eagle_draft": strategies.NAMED_SPLIT, "eagle_draft_extend": strategies.NAMED_SPLIT},
    "0.5.23": {"eagle_draft": strategies.NAMED_SPLIT, "eagle_draft_extend": strategies.NAMED_SPLIT},
}


@pytest.mark.parametrize("version", RELEASES)
def test_the_known_strategy_is_what_the_wheel_does(version):
    _, source = facts(version)
    behaviour = workloads.installed_behaviour({"sglang_source": source})
    for path, key in (("eagle_draft", "draft"), ("eagle_draft_extend", "draft_extend")):
        read = source["eagle"][key]
        strategy, words = known_strategy(path, version, behaviour[path]["hidden_states_separate"])
        assert strategy == EXPECTED[version][path], (version, path, words)
        assert bool(read["batched"]) == (strategy != strategies.LOOP)
        if read["batched"]:
            assert read["hidden_states_separate"] is True and "hidden_states with its own copy_()" in words
        # The table alone (no source facts) says the same.
        assert known_strategy(path, version)[0] == strategy


def test_an_untimed_installed_function_is_priced_against_the_known_strategy_said_as_such():
    timing = {"status": "ok", "median_us": 40.0, "graph": {"status": "ok", "median_us": 4.0}}
    workload = {"name": "eagle_draft/bs8/h4096", "path": "eagle_draft", "batch_size": 8, "hidden_size": 4096,
                "strategies": {"grouped_foreach": dict(timing, graph={"status": "ok", "median_us": 9.8}),
                               "grouped_foreach_dma_split": dict(timing, median_us=43.0),
                               "installed": {"status": "skipped", "reason": "import failed: ImportError: x"}}}
    ranked = rank(workload, {"release": "0.5.23", "behaviour": {}})
    assert ranked.baseline.kind == "known" and ranked.baseline.strategy == strategies.NAMED_SPLIT
    assert ranked.baseline.said.startswith("known, not timed itself (import failed: ImportError: x): sglang 0.5.23 "
                                           "groups the small eagle_draft fields and copies hidden_states with its "
                                           "own copy_()")
    assert ranked.best == (strategies.GROUPED, strategies.NAMED_SPLIT)
    assert (ranked.saving.cpu_us, ranked.saving.gpu_us) == (3.0, 0.0)
    none = rank(workload, {"release": None, "behaviour": {}})
    assert none.baseline is None and none.no_baseline.startswith("no sglang release was read")
