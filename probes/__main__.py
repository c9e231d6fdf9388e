"""Entry point of the probe bundle (`python3 gpudiag-probes.pyz [--probes ...]`, or `python3 -m probes`).

Builds the same payload the control side sends on stdin and hands it to probes.runner.main, which
prints one framed JSON document on stdout. Standard library only, Python 3.9+, writes nothing to disk.
"""
import argparse
import json
import os
import sys
import zipfile

DEFAULT_NONCE_PREFIX = "bundle"
# pdsh drops everything past 128 KiB of a line, and other engines split long lines: the bundle
# wraps the frame's JSON into lines of this many characters; ingest joins them back.
DEFAULT_LINE_WIDTH = 16384


def parse_args(argv, defaults):
    parser = argparse.ArgumentParser(
        prog="gpudiag-probes",
        description="Run gpudiag probes on this host and print one framed JSON document "
                    "(read it back with `gpudiag ingest`).")
    parser.add_argument("--probes", help="comma-separated probes (default: %s)"
                        % ",".join(defaults.get("probes") or ["the light set"]))
    parser.add_argument("--deep", action="store_true", help="add the GPU-touching probes")
    parser.add_argument("--force", action="store_true", help="let GPU probes run on GPUs that look busy")
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="PROBE.KEY=VALUE",
                        help="a probe option (repeatable)")
    parser.add_argument("--probe-timeout", type=float, help="time limit per probe in seconds")
    parser.add_argument("--host", help="name this host in the result (default: its hostname)")
    parser.add_argument("--python", help="interpreter whose torch and sglang the probes use: torch work runs "
                        "in its children (default: a live server's, else this one)")
    parser.add_argument("--nonce", help="frame marker (default: %s-<version>-<random>)" % DEFAULT_NONCE_PREFIX)
    parser.add_argument("--line-width", type=int, default=DEFAULT_LINE_WIDTH,
                        help="wrap the frame's JSON at this many characters (0: one line; default %(default)s)")
    parser.add_argument("--version", action="version",
                        version="gpudiag probe bundle %s" % defaults.get("version", "unknown"))
    return parser.parse_args(argv)


def parse_settings(settings, error):
    """`PROBE.KEY=VALUE` → {"PROBE": {"KEY": VALUE}}; values are JSON when they parse as JSON."""
    options = {}
    for item in settings:
        key, sep, raw = item.partition("=")
        probe, dot, name = key.partition(".")
        if not sep or not dot or not probe or not name:
            error("--set %r: expected PROBE.KEY=VALUE" % item)
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        options.setdefault(probe, {})[name] = value
    return options


def selected_probes(args, defaults):
    from probes import runner
    if args.probes:
        names = [p.strip() for p in args.probes.split(",") if p.strip()]
    else:
        names = list(defaults.get("probes") or runner.LIGHT_PROBES)
    if args.deep:
        names += [p for p in runner.DEEP_PROBES if p not in names]
    return names


def bundled_modules():
    """Every probe module's source as {dotted name: [is_package, source]}, read from the zipapp or the
    package directory: probes that start an isolated child (cuda_graph) hand it these sources."""
    import probes
    loader = getattr(probes, "__loader__", None)
    archive = getattr(loader, "archive", None)
    if archive and zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            return _modules_from_paths((n, zf.read(n).decode("utf-8")) for n in zf.namelist()
                                       if n.startswith("probes/") and n.endswith(".py"))
    from probes.boot import local_modules
    return local_modules()


def _modules_from_paths(entries):
    modules = {}
    for path, source in entries:
        parts = path[:-3].split("/")
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        modules[".".join(parts)] = [is_package, source]
    return modules


def build_payload(args, defaults):
    options = parse_settings(args.settings, lambda msg: _usage_error(msg))
    options.update(force=args.force, deep=args.deep, python=args.python or sys.executable,
                   python_explicit=bool(args.python))
    nonce = args.nonce or "%s-%s-%s" % (DEFAULT_NONCE_PREFIX, defaults.get("version", "0"),
                                        os.urandom(4).hex())
    payload = {"nonce": nonce, "probes": selected_probes(args, defaults), "options": options,
               "timeouts": {}, "host": args.host, "modules": bundled_modules()}
    if args.probe_timeout is not None:
        payload["probe_timeout"] = args.probe_timeout
    if args.line_width > 0:
        payload["line_width"] = args.line_width
    return payload


def _usage_error(message):
    sys.stderr.write("gpudiag-probes: error: %s\n" % message)
    sys.exit(2)


def main(argv=None, defaults=None):
    defaults = defaults or {}
    args = parse_args(sys.argv[1:] if argv is None else argv, defaults)
    payload = build_payload(args, defaults)
    from probes import runner
    return runner.main(payload)  # prints the frame and ends the process (os._exit)


if __name__ == "__main__":
    sys.exit(main())
