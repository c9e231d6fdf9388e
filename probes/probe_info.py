"""Every probe's declaration, read in one place: what it needs and costs, its options, its data shape and the
prose about its data. The control side reads this index for `gpudiag probes`, for checking `--set` before
connecting, for validating stored data (gpudiag/probe_data.py), for the generic report section, and for
docs/probe-options.md and docs/probe-data.md.

Each probe declares these once in its own module (`probes/<name>.py` or its package's `__init__.py`): PROBE
(literals, also read unimported by probes/catalog.py), OPTIONS, SHAPE and NOTES (docs/adding-a-probe.md).
Standard library only. No probe imports this module, so a payload never carries other probes' declarations.
"""
import importlib

from probes.catalog import ALL_PROBES, DECLARED, DEEP_PROBES, EXPLICIT_PROBES, PROBE_TIMEOUTS
from probes.optionspec import OptionValueError


class ProbeInfo(object):
    def __init__(self, name, declaration, module):
        self.name, self.summary = name, declaration.get("summary", "")
        # each "yes", "optional" or "no"
        self.needs = dict((key, declaration.get(key.lower(), "no")) for key in ("GPU", "torch", "sglang"))
        self.timeout_s = PROBE_TIMEOUTS.get(name)
        cost = declaration.get("cost", declaration["set"])
        # What one unit of its work costs ({"synthetic cell": 1.2}): the runner and the probe plan with it.
        self.unit_s = dict((str(k), float(v)) for k, v in (declaration.get("unit_s") or {}).items()
                           if isinstance(v, (int, float)))
        units = ", ".join("one %s ~%g s" % (unit, seconds) for unit, seconds in sorted(self.unit_s.items()))
        limit = "limit %g s" % self.timeout_s if self.timeout_s else ""
        extra = "; ".join(p for p in (limit, units) if p)
        self.cost = cost + (" (%s)" % extra if extra else "")
        self.options = tuple(getattr(module, "OPTIONS", ()))
        self.shape = getattr(module, "SHAPE", None)
        notes = getattr(module, "NOTES", None)
        self.notes = notes.strip() if isinstance(notes, str) else None
        self.deep = name in DEEP_PROBES
        self.set = "deep" if self.deep else "explicit" if name in EXPLICIT_PROBES else "light"

    def option(self, key):
        for option in self.options:
            if option.name == key:
                return option
        return None


PROBES = dict((name, ProbeInfo(name, DECLARED[name], importlib.import_module("probes." + name)))
              for name in ALL_PROBES)
# What each probe puts in `probes.<name>.data` of a host result, and the prose about it, by probe.
SHAPES = dict((name, info.shape) for name, info in PROBES.items() if info.shape is not None)
NOTES = dict((name, info.notes) for name, info in PROBES.items() if info.notes)


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
