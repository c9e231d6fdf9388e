"""The host's time handed out as the probes run (probes/timeshare.py through probes/runner.py): a long probe
gets min(its declared limit, its share of what is left among the long probes still to run), what one leaves
unused reaches the next, and a bundle run without a deadline gives each probe its declared limit."""
import sys
import time
import types

import pytest

from probes import runner, timeshare

LONG = {"probes.fake_bench": [False, "PROBE = {'set': 'deep', 'order': 1, 'timeout_s': 900, "
                                     "'unit_s': {'workload on one GPU': 0.5}}"],
        "probes.fake_graph": [False, "PROBE = {'set': 'deep', 'order': 2, 'timeout_s': 1200, "
                                     "'unit_s': {'synthetic cell': 1.2}}"]}


@pytest.fixture
def long_probes(monkeypatch):
    """Two long probes declared as a bundle carries them; each records the time it was given."""
    seen = {}

    def make(name, busy_s):
        def collect(ctx):
            seen[name] = ctx.time_left()
            time.sleep(busy_s)
            return {"given": seen[name]}
        module = types.ModuleType("probes." + name)
        module.collect = collect
        monkeypatch.setitem(sys.modules, "probes." + name, module)
    make("fake_bench", 0.2)
    make("fake_graph", 0.0)
    return seen


def test_unused_time_reaches_the_next_long_probe(long_probes):
    doc = runner.run_all({"probes": ["fake_bench", "fake_graph"], "budget_s": 21.0, "modules": LONG})
    bench, graph = doc["probes"]["fake_bench"], doc["probes"]["fake_graph"]
    # fake_bench's share: 21 s x 900 / (900 + 1200) = 9 s; it used 0.2 s and fake_graph got the rest.
    assert bench["limit_s"] == pytest.approx(9.0, abs=0.1) and bench["declared_s"] == 900
    assert graph["limit_s"] == pytest.approx(21.0 - bench["duration_s"], abs=0.3)
    assert long_probes["fake_graph"] > 20.0 - bench["duration_s"]   # what the probe itself saw
    assert graph["limit_s"] > 2 * bench["limit_s"]
    assert doc["budget_s"] == 21.0


def test_without_a_deadline_each_probe_gets_its_declared_limit(long_probes):
    """A bundle run (Ansible, pdsh, Slurm, clush) names no timeouts: the declarations hold."""
    doc = runner.run_all({"probes": ["fake_bench", "fake_graph"], "modules": LONG})
    assert doc["probes"]["fake_bench"]["limit_s"] == 900 and doc["probes"]["fake_graph"]["limit_s"] == 1200


def test_a_probe_timeout_given_by_the_user_is_every_probes_limit(long_probes):
    doc = runner.run_all({"probes": ["fake_bench", "fake_graph"], "modules": LONG, "probe_timeout": 30})
    assert doc["probes"]["fake_bench"]["limit_s"] == 30 and doc["probes"]["fake_graph"]["limit_s"] == 30


def test_a_long_probe_never_gets_more_than_declared_nor_less_than_one_unit():
    assert timeshare.limit_now("a", 5000.0, ["b"], {"a": 900.0, "b": 1200.0}, {}, 120.0) == 900.0
    # 2 s left, shared: 2 x 900 / 2100 < 1.2, yet one synthetic cell fits, so the probe gets one unit's time.
    assert timeshare.limit_now("b", 2.0, ["a"], {"a": 900.0, "b": 1200.0}, {"b": 1.2}, 120.0) == pytest.approx(1.2)
    # Short probes still to come keep a little back, never most of what is left.
    assert timeshare.limit_now("a", 20.0, ["env"], {"a": 900.0}, {}, 120.0) == 15.0
    assert timeshare.limit_now("a", 6.0, ["env", "x"], {"a": 900.0}, {}, 120.0) == 3.0
    assert timeshare.limit_now("env", 3.0, [], {"a": 900.0}, {}, 120.0) == 3.0
    assert timeshare.limit_now("env", None, [], {}, {}, 120.0) == 120.0
