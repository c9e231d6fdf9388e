"""What each probe needs, what it costs and which options it takes: the index the control side reads
for `gpudiag probes`, for checking `--set` before connecting, and for docs/probe-options.md.

Standard library only. No probe imports this module, so a payload never carries other probes' options.
"""
import importlib

from probes import light_options
from probes.catalog import ALL_PROBES, DECLARED, DEEP_PROBES, EXPLICIT_PROBES
from probes.copybench import declared as copy_bench_options
from probes.graphrepro import declared as cuda_graph_options
from probes.optionspec import OptionValueError


class ProbeInfo(object):
    def __init__(self, name, summary, gpu, torch, sglang, cost, options):
        self.name, self.summary = name, summary
        self.needs = {"GPU": gpu, "torch": torch, "sglang": sglang}   # each "yes", "optional" or "no"
        self.cost, self.options = cost, tuple(options)
        self.deep = name in DEEP_PROBES
        self.set = "deep" if self.deep else "explicit" if name in EXPLICIT_PROBES else "light"

    def option(self, key):
        for option in self.options:
            if option.name == key:
                return option
        return None


PROBES = dict((p.name, p) for p in (
    ProbeInfo("deployment", "live sglang servers: flags, interpreter, allow-listed environment",
              gpu="no", torch="no", sglang="no", cost="light: reads /proc, under a second",
              options=light_options.DEPLOYMENT),
    ProbeInfo("env", "GPUs, driver, compute capability, topology, the serving Python's torch",
              gpu="optional", torch="optional", sglang="no", cost="light: nvidia-smi and /proc, seconds",
              options=light_options.ENV),
    ProbeInfo("torch_caps", "torch._foreach_copy_ and the copy paths, checked for each dtype pair",
              gpu="optional", torch="yes", sglang="no",
              cost="light: a few-kilobyte check on idle GPUs, seconds", options=light_options.TORCH_CAPS),
    ProbeInfo("sglang_source", "the installed sglang read as source: copy helpers, replays, flags, integrity",
              gpu="no", torch="no", sglang="yes", cost="light: reads source files, seconds",
              options=light_options.SGLANG_SOURCE),
    ProbeInfo("copy_bench", "copy strategies timed on the release's replay field sets, eager and in graphs",
              gpu="optional", torch="yes", sglang="optional",
              cost="deep: minutes per GPU, idle GPUs only (limit 900 s)", options=copy_bench_options.OPTIONS),
    ProbeInfo("cuda_graph", "where CUDA-graph capture breaks on the EAGLE / DFlash paths",
              gpu="yes", torch="yes", sglang="optional",
              cost="deep: one capture per cell, idle GPUs only (limit 1200 s)", options=cuda_graph_options.OPTIONS),
))


def _declared_info(name):
    """A probe that declares itself: the literals of its PROBE and its module's OPTIONS (imported here only)."""
    decl = DECLARED[name]
    options = getattr(importlib.import_module("probes." + name), "OPTIONS", ())
    return ProbeInfo(name, decl.get("summary", ""), gpu=decl.get("gpu", "no"), torch=decl.get("torch", "no"),
                     sglang=decl.get("sglang", "no"), cost=decl.get("cost", decl["set"]), options=options)


PROBES.update((name, _declared_info(name)) for name in DECLARED)
PROBES = dict((name, PROBES[name]) for name in ALL_PROBES if name in PROBES)
assert tuple(PROBES) == ALL_PROBES, "every probe in the catalog declares its needs and options here"


class SettingError(ValueError):
    """A `--set` the probes cannot take; the message is one line listing what is allowed."""


def check_settings(settings, selected):
    """{probe: {key: value}} with each value checked against its declaration; SettingError otherwise.

    `selected` is the probes that will run: an option for any other probe would be silently ignored.
    """
    checked = {}
    for probe, values in settings.items():
        info = PROBES.get(probe)
        if info is None:
            raise SettingError("--set %s.…: unknown probe %s (probes: %s)" % (probe, probe, ", ".join(PROBES)))
        if probe not in selected:
            raise SettingError("--set %s.…: probe %s is not selected (selected: %s; add it with --probes%s)"
                               % (probe, probe, ", ".join(selected), " or --deep" if PROBES[probe].deep else ""))
        for key, value in values.items():
            option = info.option(key)
            if option is None:
                raise SettingError("--set %s.%s: unknown option (%s options: %s)"
                                   % (probe, key, probe, ", ".join(o.name for o in info.options)))
            try:
                checked.setdefault(probe, {})[key] = option.check(value, probe)
            except OptionValueError as exc:
                raise SettingError("--set %s" % exc) from None
    return checked
