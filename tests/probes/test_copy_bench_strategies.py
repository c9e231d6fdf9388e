"""copy_bench strategies on the CPU: grouping by dtype pair, the DMA split, packed copies of awkward inputs,
verification, and a broken strategy caught as `wrong`."""
import pytest

torch = pytest.importorskip("torch")

from probes import foreach_copy  # noqa: E402
from probes.copybench import strategies  # noqa: E402
from probes.copybench.bench import DeviceBench  # noqa: E402
from probes.copybench.budget import Budget  # noqa: E402
from probes.copybench.devices import InstalledLoader  # noqa: E402


def make_job(**over):
    job = {"paths": ["eagle_draft"], "strategies": list(strategies.STRATEGIES), "batch_sizes": [2],
           "hidden_sizes": [32], "topk": 2, "steps": 2, "draft_tokens": 4, "hidden_dtype": "bfloat16",
           "samples": 3, "target_us": 20.0, "max_iters": 5, "max_mem_mib": 64, "graph": False,
           "graph_copies": 2, "h2d": False, "split_bytes": None, "behaviour": {}, "field_names": {},
           "sweep": {"min_bytes": 1024, "max_bytes": 4096, "factor": 4, "dtype": "float32"}}
    job.update(over)
    return job


def mixed_pairs():
    srcs = [torch.arange(6, dtype=torch.int64), torch.arange(4, dtype=torch.int32) + 7,
            torch.rand(3, 2), torch.arange(5, dtype=torch.int32) + 1, torch.arange(3, dtype=torch.int64) + 2]
    dsts = [torch.zeros(6, dtype=torch.int64), torch.zeros(4, dtype=torch.int64),   # int32 → int64 cast
            torch.zeros(3, 2), torch.zeros(5, dtype=torch.int32), torch.zeros(3, dtype=torch.int64)]
    return dsts, srcs


def test_group_by_dtype_pair_keys_each_pair_once_in_first_seen_order():
    dsts, srcs = mixed_pairs()
    groups = foreach_copy.group_by_dtype_pair(dsts, srcs)
    assert list(groups) == [(torch.int64, torch.int64), (torch.int64, torch.int32),
                            (torch.float32, torch.float32), (torch.int32, torch.int32)]
    grouped_dsts, grouped_srcs = groups[(torch.int64, torch.int64)]
    assert [d is dsts[0] or d is dsts[4] for d in grouped_dsts] == [True, True]
    assert grouped_srcs[1] is srcs[4]


@pytest.mark.parametrize("without_foreach", [False, True])
def test_grouped_foreach_copy_copies_every_pair_with_casts(monkeypatch, without_foreach):
    if without_foreach:
        monkeypatch.delattr(torch, "_foreach_copy_")
    dsts, srcs = mixed_pairs()
    strategies.grouped_foreach_copy(dsts, srcs)
    assert strategies.verify(["a", "b", "c", "d", "e"], dsts, srcs) is None
    assert dsts[1].dtype == torch.int64 and dsts[1].tolist() == [7, 8, 9, 10]


def test_size_split_moves_only_large_memcpy_able_pairs_and_casts_rejoin_the_group():
    big = torch.rand(64, 32)                      # 8 KiB, contiguous, same dtype → DMA
    big_cast = torch.rand(64, 32)                 # large but a cast: copy_ would be a kernel anyway
    big_strided = torch.rand(32, 64).t()          # large but not contiguous
    small = torch.arange(4)
    srcs = [small, big, big_cast, big_strided]
    dsts = [torch.zeros(4, dtype=torch.int64), torch.zeros(64, 32), torch.zeros(64, 32, dtype=torch.float64),
            torch.zeros(64, 32)]
    split = strategies.SplitCopy(dsts, 4096)
    assert split.large == [1, 2, 3] and split.small == [0]     # decided from the static destinations
    split(srcs)                                                 # the cast and strided pairs rejoin the group
    assert strategies.verify(["s", "b", "c", "t"], dsts, srcs) is None
    assert strategies.SplitCopy(dsts, None).large == []


def test_named_split_keeps_hidden_states_on_its_own_copy_at_every_size(monkeypatch):
    """sglang's split: hidden_states leaves the grouped call by name, even when it is tiny."""
    names = ["seq_lens", "hidden_states", "positions"]
    srcs = [torch.arange(2), torch.rand(1, 2).to(torch.bfloat16), torch.arange(3)]
    dsts = [torch.zeros(2, dtype=torch.int64), torch.zeros(1, 2, dtype=torch.bfloat16),
            torch.zeros(3, dtype=torch.int64)]
    grouped = []
    real = strategies.grouped_foreach_copy
    monkeypatch.setattr(strategies, "grouped_foreach_copy",
                        lambda d, s: (grouped.append([id(x) for x in s]), real(d, s)))
    split = strategies.NamedSplitCopy(names, dsts)
    assert split.own == [1] and split.grouped == [0, 2]
    split(srcs)
    assert grouped == [[id(srcs[0]), id(srcs[2])]]
    assert strategies.verify(names, dsts, srcs) is None
    marks = strategies.split_marks(names, [16, 4, 24], threshold_bytes=8)
    assert [m["split"] for m in marks] == ["foreach", "dma", "foreach"]           # by name
    assert [m["size_split"] for m in marks] == ["dma", "foreach", "dma"]          # by size


def test_packed_copy_is_right_for_non_contiguous_mixed_dtype_and_cast_sources():
    srcs = [torch.arange(12, dtype=torch.int64).reshape(3, 4).t(),   # non-contiguous
            torch.ones(5, dtype=torch.bool),
            torch.rand(3, 3).to(torch.bfloat16),
            torch.arange(7, dtype=torch.int32),                    # cast to int64 while staging
            torch.rand(2, 2)[:, :1]]                               # non-contiguous column
    like = [torch.empty(4, 3, dtype=torch.int64), torch.empty(5, dtype=torch.bool),
            torch.empty(3, 3, dtype=torch.bfloat16), torch.empty(7, dtype=torch.int64), torch.empty(2, 1)]
    packed = strategies.PackedCopy(like, "cpu")
    packed(srcs)
    assert strategies.verify(["t", "mask", "h", "cast", "col"], packed.dsts, srcs) is None
    arena = packed.arena.data_ptr()
    for view in packed.dsts:
        assert arena <= view.data_ptr() < arena + packed.arena.numel()   # every field is a view of the arena
        assert view.data_ptr() % view.element_size() == 0
        assert view.is_contiguous()


def test_verify_names_the_field_that_differs():
    dsts, srcs = [torch.zeros(4), torch.arange(3)], [torch.ones(4), torch.arange(3)]
    assert strategies.verify(["topk_p", "seq_lens"], dsts, srcs) == \
        "field topk_p: 4 of 4 elements differ from the source"


def broken_copy(dsts, srcs):
    """Copies every field but the last element of the last one: wrong, and fast."""
    strategies.loop_copy(dsts[:-1], srcs[:-1])
    dsts[-1][:-1].copy_(srcs[-1][:-1])


def raising_copy(dsts, srcs):
    raise RuntimeError("no kernel image for this device")


def test_a_broken_strategy_is_wrong_and_never_timed_while_the_others_are():
    bench = DeviceBench(torch, "cpu", make_job(), Budget(30), InstalledLoader(None, False),
                        extra_strategies={"broken": broken_copy, "raises": raising_copy})
    workload = bench.workload("eagle_draft", 2, 32, threshold=1024)
    results = workload["strategies"]
    assert results["broken"]["status"] == "wrong"
    assert "hidden_states" in results["broken"]["reason"] and "median_us" not in results["broken"]
    assert results["raises"] == {"status": "error", "reason": "RuntimeError: no kernel image for this device"}
    for name in ("loop", "grouped_foreach", "grouped_foreach_dma_split", "grouped_foreach_size_split", "packed"):
        assert results[name]["status"] == "ok", results[name]
        assert results[name]["samples"] == 3 and results[name]["median_us"] > 0
    assert results["loop"]["speedup_vs_loop"] == 1.0
    assert workload["best"] not in ("broken", "raises")
    hidden = [f for f in workload["fields"] if f["name"] == "hidden_states"][0]
    assert hidden["bytes"] == 2 * 32 * 2 and hidden["split"] == "dma"      # by name, as sglang splits
    assert hidden["size_split"] == "foreach"                                # 128 bytes < 1024 threshold


def test_spent_budget_skips_work_instead_of_running_it():
    bench = DeviceBench(torch, "cpu", make_job(), Budget(0), InstalledLoader(None, False))
    assert bench.workload("dflash_verify", 2, None, None)["status"] == "skipped"
    assert {r["status"] for r in bench.sweep()} == {"skipped"}


def test_workload_over_the_memory_cap_is_skipped_with_the_reason():
    bench = DeviceBench(torch, "cpu", make_job(max_mem_mib=1), Budget(30), InstalledLoader(None, False))
    out = bench.workload("eagle_draft_extend", 64, 4096, None)
    assert out["status"] == "skipped" and "max_mem_mib=1" in out["reason"]


def reversed_copy(dsts, srcs):
    """Copies the wrong way round: each destination into its source."""
    for dst, src in zip(dsts, srcs):
        src.copy_(dst)


def copy_then_scribble(dsts, srcs):
    """Right destinations, but the first source is overwritten afterwards."""
    strategies.loop_copy(dsts, srcs)
    srcs[0].zero_()


def test_strategies_that_copy_backwards_nothing_or_swapped_are_wrong_and_the_next_still_passes():
    extra = {"reversed": reversed_copy, "noop": lambda dsts, srcs: None,
             "swapped": lambda dsts, srcs: strategies.loop_copy(dsts, [srcs[3]] + srcs[1:3] + [srcs[0]] + srcs[4:]),
             "scribbles": copy_then_scribble, "late_loop": strategies.loop_copy}
    job = make_job(strategies=["loop"], hidden_dtype="float32")
    bench = DeviceBench(torch, "cpu", job, Budget(30), InstalledLoader(None, False), extra_strategies=extra)
    results = bench.workload("dflash_verify", 2, None, threshold=None)["strategies"]
    for name in ("reversed", "noop", "swapped"):
        assert results[name]["status"] == "wrong" and "differ from the source" in results[name]["reason"], name
    assert results["scribbles"] == {"status": "wrong",
                                    "reason": "field input_ids: the strategy changed its source (8 of 8 elements)"}
    # Each strategy starts from refilled sources: a correct one after the broken ones still copies right.
    assert results["late_loop"]["status"] == "ok" and results["loop"]["status"] == "ok"


def test_sources_are_non_zero_and_every_field_in_its_own_range():
    bench = DeviceBench(torch, "cpu", make_job(), Budget(30), InstalledLoader(None, False))
    first, second = bench.source("int32", (3,), 0), bench.source("int64", (3,), 1)
    assert first.tolist() == [1, 2, 3] and min(second.tolist()) > max(first.tolist())
    floats = bench.source("bfloat16", (64,), 2)
    assert bool((floats != 0).all()) and float(floats.min()) >= 4.0


def test_an_older_release_casts_seq_lens_and_every_strategy_still_verifies():
    bench = DeviceBench(torch, "cpu", make_job(release="0.5.11"), Budget(30), InstalledLoader(None, False))
    workload = bench.workload("eagle_draft", 2, 32, threshold=None)
    seq_lens = [f for f in workload["fields"] if f["name"] == "seq_lens"][0]
    assert (seq_lens["dtype"], seq_lens["src_dtype"]) == ("int32", "int64")
    for name in ("loop", "grouped_foreach", "grouped_foreach_dma_split", "grouped_foreach_size_split", "packed"):
        assert workload["strategies"][name]["status"] == "ok", (name, workload["strategies"][name])
