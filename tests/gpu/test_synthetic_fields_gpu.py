"""The synthetic harness on a real GPU with each release's replay fields: every path captures, replays and
matches eager, copying as the release does; a replay that yields NaN is a mismatch on the device too."""
import pytest

from probes.graphrepro import specs, synthetic

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("release", ("0.5.11", "0.5.14", "0.5.23"))
@pytest.mark.parametrize("path", specs.PATHS)
def test_each_release_fields_capture_replay_and_match_eager(path, release):
    result = synthetic.run_cell({"path": path, "batch_size": 4, "draft_tokens": 4, "topk": 2, "hidden_size": 256,
                                 "release": release, "max_mem_mib": 2048})
    assert result["status"] == "ok", result
    assert result["fields_of"] == release and result["max_abs_diff"] is not None
    expected = [s["name"] for s in specs.buffer_specs(path, 4, 4, topk=2, hidden_size=256, release=release)]
    assert result["fields"] == expected
    assert result["copies"] == ("grouped" if specs.copies_grouped(path, release) else "per_tensor")


def test_a_nan_in_the_captured_forward_is_a_mismatch_on_the_device(monkeypatch):
    real = synthetic.forward

    def forward(torch, bufs, weights, *rest):
        out = real(torch, bufs, weights, *rest)
        out["logits"] = out["logits"] + torch.where(bufs["seq_lens"][:1] > 0, float("nan"), 0.0).float()
        return out
    monkeypatch.setattr(synthetic, "forward", forward)
    result = synthetic.run_cell({"path": "dflash_verify", "batch_size": 2, "draft_tokens": 4, "hidden_size": 64})
    assert result["status"] == "mismatch" and result["max_abs_diff"] is None and "NaN" in result["detail"]
