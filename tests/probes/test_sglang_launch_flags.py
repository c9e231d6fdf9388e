"""Every flag and value the sglang-mode repro passes exists in that release's own parser, for every
algorithm the release offers, checked against flags read from real PyPI wheels (0.4.6 to 0.5.23)."""
import json

import pytest

from probes.graphrepro import launch_plan
from probes.sglang_facts.flags import find_server_flags
from probes.sglang_facts.sources import SourceTree
from probes.sglang_facts.speculative import find_algorithms
from tests.sglang_wheels import require

RELEASES = ["0.4.6", "0.4.10", "0.5.5", "0.5.11", "0.5.14", "0.5.23"]
REPRO_ALGORITHMS = ("EAGLE", "EAGLE3", "DFLASH")


def release(version):
    tree = SourceTree(str(require(version)))
    return find_server_flags(tree)["server_flags"], [a["name"] for a in find_algorithms(tree)]


def cell(algorithm, **changes):
    base = {"model_dir": "/m/target", "draft_dir": "/m/draft", "algorithm": algorithm, "batch_sizes": [1, 4, 16],
            "draft_tokens": 4, "layers": 2, "steps": 3, "topk": 1, "tp": 1, "port": 30123}
    base.update(changes)
    return base


def passed_flags(argv):
    return [word for word in argv[3:] if word.startswith("--")]


@pytest.mark.parametrize("version", RELEASES)
def test_every_flag_of_every_algorithm_exists_in_the_release_parser(version):
    flags, algorithms = release(version)
    parser = {f["name"]: f for f in flags}
    launched = [a for a in REPRO_ALGORITHMS if a in algorithms]
    assert launched, algorithms
    for algorithm in launched:
        argv, omitted = launch_plan.build_argv("/venv/bin/python", cell(algorithm), flags)
        unknown = [f for f in passed_flags(argv) if f not in parser]
        assert unknown == [], (version, algorithm, unknown)
        assert launch_plan.rejected_values(argv, flags) == [], (version, algorithm)
        assert "--model-path" in argv and "--speculative-num-draft-tokens" in argv
        # The only flag a release may lack is the draft's own load format (0.4.x-0.5.3 load it with --load-format).
        assert set(omitted) <= {"--speculative-draft-load-format"}, (version, algorithm, omitted)
        assert ("--speculative-draft-load-format" in omitted) == (version.startswith("0.4."))
        assert not [f for f in passed_flags(argv) if parser[f].get("deprecated")], (version, algorithm)


@pytest.mark.parametrize("version", RELEASES)
def test_the_algorithm_value_is_one_the_release_accepts(version):
    flags, algorithms = release(version)
    choices = {f["name"]: f.get("choices") for f in flags}["--speculative-algorithm"]
    if choices:  # 0.4.x-0.5.11 list them in argparse; 0.5.14+ accept any registered name
        assert [a for a in REPRO_ALGORITHMS if a in algorithms] == [a for a in REPRO_ALGORITHMS if a in choices]
    else:
        assert version in ("0.5.14", "0.5.23")
    assert "dummy" in {f["name"]: f.get("choices") for f in flags}["--load-format"]


def test_dflash_launch_is_the_target_plus_draft_shape_with_a_layer_cut():
    flags, _ = release("0.5.23")
    argv, omitted = launch_plan.build_argv("python", cell("DFLASH", draft_tokens=16), flags)
    assert omitted == []
    value = lambda flag: argv[argv.index(flag) + 1]  # noqa: E731
    assert value("--model-path") == "/m/target" and value("--speculative-draft-model-path") == "/m/draft"
    assert value("--load-format") == "dummy" and value("--speculative-draft-load-format") == "dummy"
    assert json.loads(value("--json-model-override-args")) == {"num_hidden_layers": 2}
    assert value("--speculative-num-draft-tokens") == "16" and "--speculative-num-steps" not in argv
    assert value("--cuda-graph-max-bs-decode") == "16"
    assert argv[argv.index("--cuda-graph-bs-decode") + 1:argv.index("--cuda-graph-bs-decode") + 4] == ["1", "4", "16"]


def test_a_value_outside_the_release_choices_is_named():
    flags, _ = release("0.4.10")
    argv, _ = launch_plan.build_argv("python", cell("DFLASH"), flags)
    [refused] = launch_plan.rejected_values(argv, flags)
    assert refused == "--speculative-algorithm DFLASH (accepts EAGLE, EAGLE3, NEXTN)"


def test_import_failures_name_the_missing_module():
    text = ("Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n"
            "ModuleNotFoundError: No module named 'uvloop'\n")
    assert launch_plan.import_failure(text, "/v/bin/python") == (
        "sglang cannot start under /v/bin/python: module 'uvloop' is not installed there "
        "(a runtime dependency of sglang.launch_server)")
    lib = "OSError: libcudart.so.12: cannot open shared object file: No such file or directory\n"
    assert "libcudart.so.12" in launch_plan.import_failure(lib, "py")
    assert launch_plan.import_failure("AssertionError: stand-in\nOSError: [Errno 98] Address in use\n", "py") is None


def test_class_regions_are_never_read_for_another_tree_of_the_same_id():
    """A freed source tree's id may be reused by the next release's tree: its cached class regions (same file
    name) must not be taken for the new tree's, or every flag of that release reads as unknown."""
    from probes.sglang_facts import flags as flag_facts

    class Tree:
        def __init__(self, lines):
            self._lines = lines

        def lines(self, rel):
            return self._lines

    first = Tree(["class ServerArgs:", "    x = 1"])
    assert flag_facts.class_regions(first, "server_args.py") == {"ServerArgs": (1, 2)}
    second = Tree(["import os", "class ServerArgs:", "    y = 2", "class Other:", "    z = 3"])
    # as when `second` is allocated where `first` was: the cache entry sits under its id
    flag_facts._REGIONS[(id(second), "server_args.py")] = flag_facts._REGIONS.pop((id(first), "server_args.py"))
    assert flag_facts.class_regions(second, "server_args.py") == {"ServerArgs": (2, 3), "Other": (4, 5)}
