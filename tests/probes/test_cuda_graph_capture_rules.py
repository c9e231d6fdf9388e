"""The layer cuts the repro writes follow sglang's capture rules, checked against the real wheels' llama.py,
and a launch whose draft could not receive its hidden states is refused, never run."""
import os
import re
import stat
import sys

import pytest

from probes import cuda_graph
from probes.context import ProbeContext
from probes.graphrepro import capture, configs, results, sglang_repro

RELEASES = ("0.5.11", "0.5.14", "0.5.23")


def llama_source(version):
    from tests.sglang_wheels import require
    return (require(version) / "sglang" / "srt" / "models" / "llama.py").read_text()


@pytest.mark.parametrize("version", RELEASES)
def test_the_rules_are_the_releases_own(version):
    """Both setters capture before layer id + 1; EAGLE3's default points are [2, L // 2, L - 3]; the forward
    loop runs over range(start_layer, end_layer), so a point equal to the layer count is never reached."""
    text = llama_source(version)
    for setter in ("set_eagle3_layers_to_capture", "set_dflash_layers_to_capture"):
        body = text[text.index("def " + setter):][:1200]
        assert "layers_to_capture = [val + 1 for val in layer_ids]" in body, setter
    assert "layers_to_capture = [2, num_layers // 2, num_layers - 3]" in text
    assert re.search(r"for i in range\(self\.start_layer, self\.end_layer\):\s+(?:if i in self\.layers_to_capture"
                     r"|hidden_states = self\.layers\[i\])", text)
    assert capture.captured_points(None, 2, "EAGLE3") == [1]          # 1 of 3: the copy under study is skipped
    assert capture.captured_points([0, 1], 2, "DFLASH") == [1]        # id 1 (the last layer) never captured


@pytest.mark.parametrize("layers, count, expected", [(2, 1, [0]), (4, 3, [0, 1, 2]), (6, 5, [0, 1, 2, 3, 4]),
                                                     (32, 3, [0, 15, 30]), (3, 3, [0, 1])])
def test_spread_ids_are_all_capturable(layers, count, expected):
    ids = capture.spread_ids(count, layers)
    assert ids == expected
    assert len(capture.captured_points(ids, layers, "DFLASH")) == len(ids)


def settings(**extra):
    return dict({"layers": 2, "model": None, "draft_model": None}, **extra)


def test_eagle3_target_is_cut_so_all_three_aux_states_are_captured():
    built = sglang_repro.launch_configs(settings(), "EAGLE3", 4)
    assert built["layers"] == 4 and built["target"]["num_hidden_layers"] == 4 and built["refused"] is None
    assert built["draft"]["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [0, 1, 2]
    assert any("EAGLE3 target cut to 4 layers, not 2" in n for n in built["notes"])
    eagle = sglang_repro.launch_configs(settings(), "EAGLE", 4)
    assert eagle["layers"] == 2 and eagle["refused"] is None and eagle["notes"] == []


def real_draft(tmp_path, name, config):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(__import__("json").dumps(config))
    return str(folder)


def test_a_real_eagle3_and_dflash_draft_get_their_ids_fitted(tmp_path):
    eagle3 = real_draft(tmp_path, "eagle3", {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 4096,
                                             "num_hidden_layers": 1,
                                             "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 23, 44]}})
    built = sglang_repro.launch_configs(settings(draft_model=eagle3), "EAGLE3", 4)
    assert built["layers"] == 4 and built["refused"] is None
    assert built["draft"]["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [0, 1, 2]
    dflash = real_draft(tmp_path, "dflash", {"architectures": ["DFlashDraftModel"], "num_hidden_layers": 5,
                                             "dflash_config": {"target_layer_ids": [1, 9, 17, 25, 33],
                                                               "mask_token_id": 7}})
    built = sglang_repro.launch_configs(settings(draft_model=dflash), "DFLASH", 8)
    assert built["layers"] == 6 and built["draft"]["num_hidden_layers"] == 6 and built["refused"] is None
    assert built["draft"]["dflash_config"] == {"target_layer_ids": [0, 1, 2, 3, 4], "mask_token_id": 7,
                                               "block_size": 8, "num_target_layers": 6}


def test_the_refusal_names_the_uncapturable_ids():
    reason = capture.refusal(2, {"dflash_config": {"target_layer_ids": [0, 1]}}, "DFLASH")
    assert reason.startswith("DFLASH draft would get 1 of its 2 target hidden states from a 2-layer target")
    assert "feature dim mismatch" in reason
    reason = capture.refusal(2, {"eagle_config": {}}, "EAGLE3")
    assert reason.startswith("EAGLE3 draft would get 1 of its 3 aux hidden states") and "[2, 1, -1]" in reason
    assert capture.refusal(2, {}, "EAGLE") is None


RECORDING_SGLANG = r'''#!%(python)s
import sys
if sys.argv[1:2] == ["-c"]:
    sys.exit(0)
with open(%(record)r, "a") as fh:
    fh.write("launched\n")
sys.exit(1)
'''


def test_a_model_too_short_for_its_draft_is_refused_and_never_launched(tmp_path):
    """A 2-layer model can feed no 3-state EAGLE3 draft: the cells say so and no server starts."""
    model = real_draft(tmp_path, "model", dict(configs.BUNDLED_LLAMA, num_hidden_layers=2))
    record = tmp_path / "launched.txt"
    fake = tmp_path / "python-with-sglang"
    fake.write_text(RECORDING_SGLANG % {"python": sys.executable, "record": str(record)})
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    ctx = ProbeContext(results={"sglang_source": {"version": "0.5.23", "speculative_algorithms": ["EAGLE3"]}})
    chosen = cuda_graph.settings_from({"algorithms": ["EAGLE3"], "batch_sizes": [1, 4], "draft_tokens": [4, 4],
                                       "model": model})
    data = {"cells": [], "boundaries": [], "notes": []}
    cuda_graph.run_sglang(ctx, chosen, data, dict(os.environ), "", str(fake))
    results.summarise(data, "sm_90")
    assert not record.exists()
    assert {c["status"] for c in data["cells"]} == {"skipped"}
    assert all(c["detail"].startswith("refused before launch: EAGLE3 draft would get 1 of its 3") for c in data["cells"])
    assert "fails" not in data["boundary"]["text"]


def test_a_death_before_ready_outside_graph_code_is_the_repros_own_error():
    status, detail, _ = sglang_repro.classify("died", [], False, None, False,
                                              "Traceback (most recent call last):\nValueError: bad config\n")
    assert status == "error" and detail.startswith("the repro's own error: the server died before it was ready")
    from probes.graphrepro import sweep
    assert not sweep.is_failure({"status": status})


DYING_SGLANG = r'''#!%(python)s
import sys
if sys.argv[1:2] == ["-c"]:
    sys.exit(0)
with open(%(record)r, "a") as fh:
    fh.write(sys.argv[sys.argv.index("--speculative-num-draft-tokens") + 1] + "\n")
print("Traceback (most recent call last):", flush=True)
print("ValueError: DFLASH draft config is not what this release expects", flush=True)
sys.exit(1)
'''


def test_one_draft_token_value_is_one_launch_and_a_death_before_ready_is_no_boundary(tmp_path):
    record = tmp_path / "launched.txt"
    fake = tmp_path / "python-with-sglang"
    fake.write_text(DYING_SGLANG % {"python": sys.executable, "record": str(record)})
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    ctx = ProbeContext(results={"sglang_source": {"version": "0.5.23", "speculative_algorithms": ["DFLASH"]}})
    chosen = cuda_graph.settings_from({"algorithms": ["DFLASH"], "batch_sizes": [1, 4], "draft_tokens": [8, 8]})
    data = {"cells": [], "boundaries": [], "notes": []}
    cuda_graph.run_sglang(ctx, chosen, data, dict(os.environ), "", str(fake))
    results.summarise(data, "sm_90")
    assert record.read_text().split() == ["8"]   # one value: one launch, no bisection
    assert {c["status"] for c in data["cells"]} == {"error"}
    assert all(c["detail"].startswith("the repro's own error: the server died before it was ready")
               for c in data["cells"])
    assert data["boundary"]["text"] == "DFLASH: nothing ran on sm_90"   # never "fails at every draft-token count"
