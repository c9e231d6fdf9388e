"""sglang_source's fact finders on small synthetic packages: definitions, re-export chains, fast paths."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from probes import sglang_source
from probes.context import ProbeContext
from probes.sglang_facts import locate
from probes.sglang_facts.imports import absolute_module

IMPL = '''
import os
import torch

_has_foreach_copy = hasattr(torch, "_foreach_copy_")


def _grouped_foreach_copy_(dsts, srcs):
    if dsts and os.environ.get("MY_FAST_COPY") == "1":
        torch._foreach_copy_(dsts, srcs)
        return
    from sglang.kernels.small import try_small_copy
    if try_small_copy(dsts, srcs):
        return
    for d, s in zip(dsts, srcs):
        d.copy_(s)
'''
OTHER = '''
def _grouped_foreach_copy_(dsts, srcs):
    for d, s in zip(dsts, srcs):
        d.copy_(s)
'''


def make_site(root, files, version="9.9.9"):
    site = root / "site"
    for rel, text in files.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else textwrap.dedent(text).encode())
    dist = site / ("sglang-%s.dist-info" % version)
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: %s\n\nbody\n" % version)
    (dist / "top_level.txt").write_text("sglang\n")
    return site


def scan(site, **options):
    options["site_packages"] = str(site)
    return sglang_source.collect(ProbeContext(options={"sglang_source": options}))


@pytest.fixture
def chain_site(tmp_path):
    return make_site(tmp_path, {
        "sglang/__init__.py": "",
        "sglang/a/__init__.py": "",
        "sglang/a/impl.py": IMPL,
        "sglang/b/__init__.py": "",
        "sglang/b/other.py": OTHER,
        "sglang/pkg/__init__.py": "from .mid import _grouped_foreach_copy_\n",
        "sglang/pkg/mid.py": "from ..a.impl import _grouped_foreach_copy_ as _grouped_foreach_copy_\n",
        "sglang/star.py": "from sglang.b.other import *\n",
        "sglang/users.py": '''
            from sglang.pkg import _grouped_foreach_copy_
            from sglang.b import other
            from sglang.b.other import _grouped_foreach_copy_ as gfc
            import sglang.star as star


            class Runner:
                def replay(self, batch):
                    dsts = [self.buf.seq_lens[:2], self.positions]
                    dsts.append(self.extra[:1])
                    _grouped_foreach_copy_(dsts, [batch.seq_lens, batch.positions, batch.extra])

                def by_module(self, batch):
                    other._grouped_foreach_copy_([self.a], [batch.a])

                def by_alias(self, batch):
                    gfc([self.b], [batch.b])

                def by_star(self, batch):
                    star._grouped_foreach_copy_([self.c], [batch.c])

                def local_import(self, batch):
                    from sglang.a.impl import _grouped_foreach_copy_ as local
                    local([self.d], [batch.d])
            ''',
        "sglang/test/test_copy.py": OTHER,
    })


def test_two_definitions_their_fast_paths_and_the_flag(chain_site):
    copies = scan(chain_site)["grouped_foreach_copy"]
    defs = {d["file"]: d for d in copies["definitions"]}
    assert set(defs) == {"sglang/a/impl.py", "sglang/b/other.py"}  # sglang/test/ is skipped
    kinds = {(p["kind"], p["detail"]) for p in defs["sglang/a/impl.py"]["fast_paths"]}
    assert kinds == {("env_gated", "MY_FAST_COPY"), ("small_copy_kernel", "try_small_copy from sglang.kernels.small")}
    assert defs["sglang/b/other.py"]["fast_paths"] == []
    assert [f["file"] for f in copies["has_foreach_copy_flag"]] == ["sglang/a/impl.py"]


def test_call_sites_follow_reexports_aliases_modules_and_star_imports(chain_site):
    sites = {s["qualname"]: s for s in scan(chain_site)["grouped_foreach_copy"]["call_sites"]}
    resolved = {name: (s["resolves_to"] or {}).get("file") for name, s in sites.items()}
    assert resolved == {"Runner.replay": "sglang/a/impl.py", "Runner.by_module": "sglang/b/other.py",
                        "Runner.by_alias": "sglang/b/other.py", "Runner.by_star": "sglang/b/other.py",
                        "Runner.local_import": "sglang/a/impl.py"}
    assert sites["Runner.replay"]["fields"] == ["seq_lens", "positions", "extra"]
    assert sites["Runner.replay"]["module"] == "sglang.users"


def test_unresolvable_call_is_reported_not_guessed(tmp_path):
    site = make_site(tmp_path, {"sglang/__init__.py": "", "sglang/x.py": """
        from vendor.lib import _grouped_foreach_copy_
        def f(a, b):
            _grouped_foreach_copy_(a, b)
        """})
    [site_fact] = scan(site)["grouped_foreach_copy"]["call_sites"]
    assert site_fact["resolves_to"] is None and site_fact["unresolved"] == "external vendor.lib"


def test_bom_is_tolerated_and_a_broken_file_is_recorded(tmp_path):
    site = make_site(tmp_path, {
        "sglang/__init__.py": "",
        "sglang/bom.py": b"\xef\xbb\xbf" + OTHER.encode(),
        "sglang/broken.py": "def _grouped_foreach_copy_(:\n",
    })
    data = scan(site)
    assert [d["file"] for d in data["grouped_foreach_copy"]["definitions"]] == ["sglang/bom.py"]
    assert data["grouped_foreach_copy"]["definitions"][0]["line"] == 2
    assert [e["file"] for e in data["parse_errors"]] == ["sglang/broken.py"]


def test_eagle_replay_is_found_by_what_it_copies_not_by_its_name(tmp_path):
    site = make_site(tmp_path, {"sglang/__init__.py": "", "sglang/spec/runner.py": """
        class EAGLEDraftCudaGraphRunner:
            def capture_one(self, bs):
                self.global_num_tokens.copy_(self.tmp)

            def _fill_static(self, forward_batch):
                self.seq_lens[:2].copy_(forward_batch.seq_lens)
                self.positions[:2].copy_(forward_batch.positions)
                self.hidden_states[:2].copy_(forward_batch.spec_info.hidden_states)
        """})
    data = scan(site)
    draft = data["eagle"]["draft"]
    assert draft["replay_method"] == "_fill_static" and draft["batched"] is False
    assert draft["per_tensor_fields"] == ["seq_lens", "positions", "hidden_states"]
    absent = data["eagle"]["draft_extend"]
    assert absent["found"] is False and absent["batched"] is None and absent["per_tensor_copies"] == 0


def test_version_falls_back_to_metadata(tmp_path):
    data = scan(make_site(tmp_path, {"sglang/__init__.py": ""}, version="1.2.3"))
    assert data["version"] == "1.2.3" and data["version_source"]["file"] == "sglang-1.2.3.dist-info/METADATA"
    assert data["integrity"]["method"] == "unknown"  # this dist-info has no RECORD


def test_missing_package_is_a_reason_not_an_error(tmp_path):
    data = scan(tmp_path)
    assert data["found"] is False and str(tmp_path) in data["reason"]


def test_another_interpreter_is_asked_for_its_path_and_pythonpath_is_added(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    site = make_site(tmp_path, {"sglang/__init__.py": "", "sglang/_version.py": "__version__ = '7.0.1'\n"})
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(purelib, "extra.pth"), "w") as handle:
        handle.write(str(site) + "\n")
    paths, error = locate.search_paths(python, env_pythonpath=str(tmp_path / "pp"), timeout=30)
    assert error is None and str(site) in paths and purelib in paths
    (tmp_path / "pp").mkdir()
    paths, _ = locate.search_paths(python, env_pythonpath=str(tmp_path / "pp"), timeout=30)
    assert paths[0] == str(tmp_path / "pp")
    results = {"deployment": {"interpreter": {"path": python, "why": "live_server"}}}
    data = sglang_source.collect(ProbeContext(results=results))
    assert data["found"] and data["version"] == "7.0.1" and data["interpreter"]["why"] == "live_server"


def test_a_broken_interpreter_gives_a_reason(tmp_path):
    results = {"deployment": {"interpreter": {"path": str(tmp_path / "nope"), "why": "explicit"}}}
    data = sglang_source.collect(ProbeContext(results=results))
    assert data["found"] is False and "could not ask" in data["reason"]


def test_editable_checkout_reports_commit_and_local_changes(tmp_path):
    checkout = tmp_path / "checkout"
    make_site(checkout, {"sglang/__init__.py": "", "sglang/version.py": "__version__ = '0.9.0.dev'\n"})
    os.rename(checkout / "site", checkout / "python")
    git = ["git", "-C", str(checkout), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "x"], check=True)
    site = tmp_path / "venv-site"
    dist = site / "sglang-0.9.0.dev0.dist-info"
    dist.mkdir(parents=True)
    (dist / "direct_url.json").write_text(json.dumps({"url": "file://%s" % checkout, "dir_info": {"editable": True}}))
    (checkout / "python/sglang/version.py").write_text("__version__ = '0.9.1.dev'\n")
    data = scan(site)
    assert data["found"] and data["version"] == "0.9.1.dev"
    assert data["package_dir"] == str(checkout / "python" / "sglang")
    editable = data["integrity"]["editable"]
    assert data["integrity"]["method"] == "editable" and len(editable["commit"]) == 40
    assert editable["dirty"] is True and editable["changed"] == ["python/sglang/version.py"]
    assert data["integrity"]["modified"] == ["python/sglang/version.py"]


def test_relative_imports_resolve_against_the_package():
    assert absolute_module("sglang.a.b", False, 1, "c") == "sglang.a.c"
    assert absolute_module("sglang.a", True, 1, "c") == "sglang.a.c"
    assert absolute_module("sglang.a.b", False, 2, None) == "sglang"


def test_setuptools_editable_finder_mapping_is_followed(tmp_path):
    checkout = tmp_path / "checkout"
    make_site(checkout, {"sglang/__init__.py": "", "sglang/version.py": "__version__ = '0.8.0'\n"})
    package = checkout / "site" / "sglang"
    site = tmp_path / "venv-site"
    (site / "sglang-0.8.0.dist-info").mkdir(parents=True)
    (site / "__editable___sglang_0_8_0_finder.py").write_text(
        "import sys\nMAPPING = {'sglang': %r}\nNAMESPACES = {}\n" % str(package))
    data = scan(site)
    assert data["found"] and data["version"] == "0.8.0" and data["package_dir"] == str(package)
    assert data["integrity"]["method"] == "editable"


def test_a_failing_finder_costs_only_its_own_facts(chain_site, monkeypatch):
    from probes.sglang_facts import speculative

    def broken(tree):
        raise RuntimeError("odd source")
    monkeypatch.setattr(sglang_source, "find_algorithms", broken)
    data = scan(chain_site)
    assert data["finder_errors"] == [{"finder": "speculative", "error": "RuntimeError: odd source"}]
    assert data["speculative_algorithms"] == [] and len(data["grouped_foreach_copy"]["definitions"]) == 2
    assert speculative.find_algorithms is not broken


def test_flag_inside_module_level_try_is_found(tmp_path):
    site = make_site(tmp_path, {"sglang/__init__.py": "", "sglang/m.py": """
        try:
            import torch
            _has_foreach_copy = hasattr(torch, "_foreach_copy_")
        except ImportError:
            _has_foreach_copy = False

        def _grouped_foreach_copy_(d, s):
            pass
        """})
    flags = scan(site)["grouped_foreach_copy"]["has_foreach_copy_flag"]
    assert [f["line"] for f in flags] == [4, 6]


def test_every_registration_form_of_a_speculative_algorithm(tmp_path):
    """Enum members, the classmethod (also as a decorator), a helper around it, a helper around that
    helper, a keyword name; calls inside functions (plugins registering at run time) are not installed ones."""
    data = scan(make_site(tmp_path, {
        "sglang/__init__.py": "",
        "sglang/spec.py": '''
            from enum import Enum


            class SpeculativeAlgorithm(Enum):
                EAGLE = 1

                @classmethod
                def register(cls, name, **kw):
                    return name


            def add_algorithm(algo_name, worker, **kw):
                upper = algo_name.upper()
                return SpeculativeAlgorithm.register(upper, **kw)


            def add_with_flags(label, worker):
                return add_algorithm(label, worker)


            SpeculativeAlgorithm.register("none")
            add_algorithm("my_spec", object, aliases=("MINE",))
            add_with_flags("flagged", object)
            SpeculativeAlgorithm.register(name="by_keyword")


            @SpeculativeAlgorithm.register("decorated")
            class Worker:
                pass


            def later():
                SpeculativeAlgorithm.register("RUNTIME_ONLY")
            ''',
        "sglang/plugin.py": '''
            from sglang.spec import add_algorithm
            add_algorithm("EAGLE", object)
            add_algorithm("elsewhere", object)
            ''',
    }))
    assert data["speculative_algorithms"] == ["EAGLE", "ELSEWHERE", "NONE", "MY_SPEC", "FLAGGED", "BY_KEYWORD",
                                              "DECORATED"]
    by_name = {a["name"]: a for a in data["speculative_algorithm_evidence"]}
    assert by_name["MY_SPEC"]["via"] == "add_algorithm" and by_name["MY_SPEC"]["aliases"] == ["MINE"]
    assert by_name["FLAGGED"]["via"] == "add_with_flags" and by_name["ELSEWHERE"]["file"] == "sglang/plugin.py"
    assert by_name["EAGLE"]["via"] == "enum"


def test_copied_fields_follow_helpers_and_name_loop_tensors_as_dynamic(tmp_path):
    data = scan(make_site(tmp_path, {
        "sglang/__init__.py": "",
        "sglang/copy.py": OTHER,
        "sglang/helpers.py": '''
            def add_track(buffer, src, *, bs, copy_dsts=None, copy_srcs=None):
                copy_dsts.append(buffer[:bs])
                copy_srcs.append(src)
            ''',
        "sglang/runner.py": '''
            from sglang.copy import _grouped_foreach_copy_
            from sglang.helpers import add_track


            class Runner:
                def replay(self, fb, bs):
                    copy_dsts = [self.bufs.seq_lens[:bs]]
                    copy_srcs = [fb.seq_lens]
                    add_track(self.bufs.track_indices, fb.track_indices, bs=bs, copy_dsts=copy_dsts,
                              copy_srcs=copy_srcs)
                    for key, buf in self.extra.items():
                        dst = buf[:bs]
                        copy_dsts.append(dst)
                    for name in self.names:
                        copy_dsts.append(self.slots[name][:bs])
                    for n in (bs,):
                        copy_dsts.append(self.bufs.positions[:n])
                    _grouped_foreach_copy_(copy_dsts, copy_srcs)

                def never_called(self, fb):
                    _grouped_foreach_copy_([self.bufs.positions], [fb.positions])


            def run(runner, fb):
                runner.replay(fb, 1)
            ''',
    }))
    sites = {s["qualname"]: s for s in data["grouped_foreach_copy"]["call_sites"]}
    replay = sites["Runner.replay"]
    assert replay["fields"] == ["seq_lens", "track_indices", "positions"]
    assert replay["dynamic_fields"] == ["buf for each buf in self.extra.items()",
                                        "self.slots[name] for each name in self.names"]
    assert replay["reachable"] is True and replay["reached_from"]["snippet"] == "runner.replay(fb, 1)"
    dead = sites["Runner.never_called"]
    assert dead["fields"] == ["positions"] and dead["reachable"] is False


def test_an_editable_install_beside_a_leftover_dist_info_is_still_found(tmp_path):
    checkout = tmp_path / "checkout"
    make_site(checkout, {"sglang/__init__.py": "", "sglang/version.py": "__version__ = '0.9.0.dev'\n"})
    os.rename(checkout / "site", checkout / "python")
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    site = tmp_path / "venv-site"
    (site / "sglang-0.5.14.dist-info").mkdir(parents=True)   # sorts first; says nothing about the checkout
    (site / "sglang-0.5.14.dist-info" / "METADATA").write_text("Name: sglang\nVersion: 0.5.14\n\n")
    dist = site / "sglang-0.9.0.dev0.dist-info"
    dist.mkdir()
    (dist / "direct_url.json").write_text(json.dumps({"url": "file://%s" % checkout, "dir_info": {"editable": True}}))
    data = scan(site)
    assert data["found"] and data["package_dir"] == str(checkout / "python" / "sglang")
    assert data["version"] == "0.9.0.dev" and data["dist_info"] == str(dist)
    assert data["integrity"]["method"] == "editable" and data["integrity"]["editable"]["via"] == "direct_url"
    assert {c["belongs"] for c in data["dist_info_candidates"]} == {"direct_url", None}


def test_a_copy_on_the_path_wins_over_an_editable_finder_as_python_imports(tmp_path):
    """setuptools appends its editable finder to sys.meta_path: any copy on sys.path imports first."""
    checkout = tmp_path / "checkout"
    make_site(checkout, {"sglang/__init__.py": "", "sglang/version.py": "__version__ = '0.8.0'\n"})
    venv_site = tmp_path / "venv-site"
    (venv_site / "sglang-0.8.0.dist-info").mkdir(parents=True)
    (venv_site / "__editable___sglang_0_8_0_finder.py").write_text(
        "MAPPING = {'sglang': %r}\n" % str(checkout / "site" / "sglang"))
    plain = make_site(tmp_path / "later", {"sglang/__init__.py": "", "sglang/version.py": "__version__ = '0.5.5'\n"})
    location = locate.find_package([str(venv_site), str(plain)])
    assert location["package_dir"] == str(plain / "sglang") and location["editable"] is None
    assert locate.find_package([str(venv_site)])["package_dir"] == str(checkout / "site" / "sglang")
