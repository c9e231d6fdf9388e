"""The one replay-field table against the real sglang wheels (0.5.11, 0.5.14, 0.5.23, unpacked from PyPI,
never imported): the fields each replay copies as sglang_source reads them, and the buffers' dtypes as the
release allocates them (read here with ast, independently of the probe)."""
import ast
import functools
import os

import pytest

from probes import replay_fields, sglang_source
from probes.context import ProbeContext
from probes.copybench import workloads
from probes.graphrepro import specs
from tests.sglang_wheels import require, site_packages_for

RELEASES = ("0.5.11", "0.5.14", "0.5.23")
EAGLE_FILES = {"eagle_draft": "sglang/srt/speculative/eagle_draft_cuda_graph_runner.py",
               "eagle_draft_extend": "sglang/srt/speculative/eagle_draft_extend_cuda_graph_runner.py"}
# Where each release allocates the generic decode runner's buffers (DFlash verifies through it).
GENERIC_FILES = {"0.5.11": "sglang/srt/model_executor/cuda_graph_runner.py",
                 "0.5.14": "sglang/srt/model_executor/runner_utils/buffers.py",
                 "0.5.23": "sglang/srt/model_executor/cuda_graph_buffer_registry.py"}
TORCH_ALLOCATORS = ("zeros", "full", "ones", "empty", "arange")


@functools.lru_cache(maxsize=None)
def _facts(version):
    site = str(site_packages_for(version))
    return site, sglang_source.collect(ProbeContext(options={"sglang_source": {"site_packages": site}}))


def facts(version):
    require(version)
    return _facts(version)


def _torch_dtype(node):
    """'int64' for `torch.int64`, else None (the model's dtype, a method call, …)."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
        return {"float": "float32", "long": "int64", "int": "int32"}.get(node.attr, node.attr)
    return None


def allocated_dtypes(path):
    """{buffer name: dtype or None} from `name = torch.zeros(..., dtype=torch.X)` (also inside `… if … else None`)
    and from `GraphSlot("name", shape_fn, torch.X, …)` in one source file."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            for call in ast.walk(node.value):
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
                        and call.func.attr in TORCH_ALLOCATORS:
                    dtype = [_torch_dtype(k.value) for k in call.keywords if k.arg == "dtype"]
                    if dtype and dtype[0]:
                        found.setdefault(node.targets[0].id, dtype[0])
                    break
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "GraphSlot" and len(node.args) >= 3 \
                and isinstance(node.args[0], ast.Constant):
            found.setdefault(node.args[0].value, _torch_dtype(node.args[2]))   # None: a variable's dtype
    return found


def source_fields(data, path):
    """What the release's replay copies on `path`, in order, as sglang_source read it (device tensors)."""
    if path in EAGLE_FILES:
        info = data["eagle"]["draft" if path == "eagle_draft" else "draft_extend"]
        names = list(info["grouped_fields"]) + list(info["per_tensor_fields"])
    else:
        sites = [s for s in data["grouped_foreach_copy"]["call_sites"]
                 if s["qualname"] == "DecodeInputBuffers.populate_from_forward_batch"]
        names = list(sites[0]["fields"]) if sites else []
    return [n for n in names if not n.endswith("_cpu") and n not in ("buf", "dst")]


@pytest.mark.parametrize("version", RELEASES)
@pytest.mark.parametrize("path", sorted(EAGLE_FILES))
def test_eagle_fields_and_their_order_match_the_release(version, path):
    _, data = facts(version)
    copied = source_fields(data, path)
    table = [r["name"] for r in replay_fields.rows(path, version)]
    assert set(copied) <= set(table), set(copied) - set(table)
    default = [r["name"] for r in replay_fields.rows(path, version) if r["when"] is None]
    assert [n for n in copied if n in default] == default   # every replay's fields, in the release's order
    info = data["eagle"]["draft" if path == "eagle_draft" else "draft_extend"]
    assert replay_fields.batched(path, version) is info["batched"]
    own = {r["name"] for r in replay_fields.rows(path, version) if r["own_copy"]}
    if info["batched"]:
        assert info["hidden_states_separate"] is True and "hidden_states" in own
        assert not own & set(info["grouped_fields"])
        assert set(info["per_tensor_fields"]) - {"seq_lens_cpu"} <= own


@pytest.mark.parametrize("version", ("0.5.11", "0.5.14"))
def test_generic_verify_fields_match_the_decode_buffers_fill(version):
    _, data = facts(version)
    copied = source_fields(data, "dflash_verify")
    table = [r["name"] for r in replay_fields.rows("dflash_verify", version)]
    assert copied and set(copied) <= set(table), set(copied) - set(table)
    default = [r["name"] for r in replay_fields.rows("dflash_verify", version) if r["when"] is None]
    assert [n for n in copied if n in default] == default


@pytest.mark.parametrize("version", RELEASES)
def test_buffer_dtypes_match_what_the_release_allocates(version):
    site, _ = facts(version)
    compared = 0
    files = dict(EAGLE_FILES, dflash_verify=GENERIC_FILES[version])
    for path, rel in files.items():
        allocated = allocated_dtypes(os.path.join(site, rel))
        for row in replay_fields.rows(path, version):
            if row["dtype"] is not None and allocated.get(row["name"]):
                assert allocated[row["name"]] == row["dtype"], (version, path, row["name"])
                compared += 1
    assert compared >= 15


def test_0_5_23_registry_slots_are_the_generic_default_fields():
    site, _ = facts("0.5.23")
    slots = allocated_dtypes(os.path.join(site, GENERIC_FILES["0.5.23"]))
    default = [r["name"] for r in replay_fields.rows("dflash_verify", "0.5.23") if r["when"] is None]
    assert set(default) <= set(slots)


@pytest.mark.parametrize("version", RELEASES)
def test_the_copy_bench_benchmarks_what_the_release_copies_from_its_own_facts(version):
    _, data = facts(version)
    names = workloads.fields_from_source({"sglang_source": data})
    for path in replay_fields.PATHS:
        benched = [s["name"] for s in workloads.field_specs(path, 4, 4096, 2, 3, 8, names=names.get(path),
                                                            release=version)]
        default = [r["name"] for r in replay_fields.rows(path, version) if r["when"] is None]
        assert sorted(benched) == sorted(default), (version, path)


def test_the_bench_and_the_harness_read_the_same_table():
    for version in RELEASES + (None,):
        for path in replay_fields.PATHS:
            bench = workloads.field_specs(path, 4, 256, 2, 3, 7, release=version)
            harness = specs.buffer_specs(path, 4, 7, topk=2, hidden_size=256, steps=3, release=version)
            assert [(s["name"], s["dtype"], s["src_dtype"], s["shape"], s["own_copy"]) for s in bench] == \
                [(s["name"], s["dtype"], s["src_dtype"], s["shape"], s["large"]) for s in harness]


def test_releases_map_to_the_table_read_at_or_below_them():
    assert replay_fields.table_release("0.5.23.post1") == (0, 5, 23)
    assert replay_fields.table_release("0.5.20") == (0, 5, 14)
    assert replay_fields.table_release("0.4.10") == (0, 5, 11)
    assert replay_fields.table_release(None) == replay_fields.table_release("dev") == (0, 5, 23)
    assert replay_fields.dtype_pairs("0.5.11") == {"seq_lens": ("int32", "int64")}
    assert replay_fields.dtype_pairs("0.5.23") == {}


def test_local_variables_and_conditional_fields_do_not_become_workload_fields():
    assert replay_fields.replay_names("dflash_verify", "0.5.23", ["dst"]) == [
        "input_ids", "req_pool_indices", "seq_lens", "out_cache_loc", "positions"]
    names = replay_fields.replay_names("eagle_draft", "0.5.23", ["seq_lens", "draft_probs", "brand_new", "x_cpu"])
    assert names == ["seq_lens", "brand_new", "hidden_states"]
