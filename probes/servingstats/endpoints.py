"""A live server's own numbers from its HTTP endpoints on loopback: `/server_info` (`/get_server_info` in
releases without it) and, with `--enable-metrics`, `/metrics`. GET only (nothing that changes the server's
state), 2 s per request, 1 MiB per response; only whitelisted numbers are kept, never the payload (it holds
the server's arguments). The server's `--api-key` is read from /proc/PID/cmdline here, sent as sglang's
middleware expects (`Authorization: Bearer KEY`) and never stored.

Which info route a release serves is read from its own entrypoints/http_server.py (`/server_info` appears in
0.5.6 among the releases read; `/get_server_info` stays, deprecated, through 0.5.23).
"""
import http.client
import ipaddress
import json
import math
import os
import re
import time

from probes.hostinfo.sglang_cmdline import parse_cmdline
from probes.hostinfo.system import read_bytes

TIMEOUT_S = 2.0
MAX_BYTES = 1024 * 1024
DEFAULT_PORT = 30000  # sglang's --port default
WILDCARD = ("", "0.0.0.0", "::", "localhost", "[::]")
METRICS = ("sglang:spec_accept_length", "sglang:gen_throughput", "sglang:num_running_reqs")
PROM_LINE = re.compile(r"^(sglang:[a-z_]+)(\{[^}]*\})?\s+(\S+)")
MAX_SAMPLES = 64


def read_endpoints(servers, proc_root="/proc", budget_s=10.0):
    """{str(pid): record} for every server, within `budget_s` altogether (later servers get a reason)."""
    deadline = time.monotonic() + budget_s
    out = {}
    for server in servers:
        if os.path.realpath(proc_root) != "/proc":
            out[str(server.get("pid"))] = {"contacted": False, "reason": "servers read from another /proc "
                                           "(deployment.proc_root): their loopback is not this host's"}
            continue
        if time.monotonic() > deadline:
            out[str(server.get("pid"))] = {"contacted": False, "reason": "time budget for endpoints spent"}
            continue
        try:
            out[str(server.get("pid"))] = read_one(server, proc_root)
        except Exception as exc:  # noqa: BLE001 - one odd server costs its own record only
            out[str(server.get("pid"))] = {"contacted": False, "reason": "%s: %s" % (type(exc).__name__, exc)}
    return out


def loopback_address(args):
    """The loopback address the server listens on, or None when --host names another interface."""
    host = str(args.get("host") or "").strip()
    if host in WILDCARD:
        return "127.0.0.1"
    try:  # a literal loopback address only: a name (`127.0.0.1.nip.io`) would be resolved through DNS
        address = ipaddress.ip_address(host[1:-1] if host.startswith("[") and host.endswith("]") else host)
    except ValueError:
        return None
    return str(address) if address.is_loopback else None


def api_key_of(proc_root, pid):
    """The raw --api-key of the server's command line (the stored argv is redacted); None without one."""
    argv = parse_cmdline(read_bytes(os.path.join(proc_root, str(pid), "cmdline"))) or []
    for index, word in enumerate(argv):
        if word == "--api-key" and index + 1 < len(argv):
            return argv[index + 1]
        if word.startswith("--api-key="):
            return word.split("=", 1)[1]
    return None


def info_routes(server):
    """The info routes to try, the release's own first (read from its http_server.py when it is here)."""
    package = (server.get("sglang") or {}).get("package_dir")
    text = b""
    if package and server.get("same_root") is not False:
        text = read_bytes(os.path.join(package, "srt", "entrypoints", "http_server.py")) or b""
    if b'"/server_info"' in text or not text:
        return ("/server_info", "/get_server_info")
    return ("/get_server_info",)


def read_one(server, proc_root):
    args = server.get("args") or {}
    address = loopback_address(args)
    port = args.get("port") or DEFAULT_PORT
    if address is None:
        return {"contacted": False, "reason": "listens on %s, not on loopback: not contacted" % args.get("host")}
    if not isinstance(port, int) or not 0 < port < 65536:
        return {"contacted": False, "reason": "port %r is not a port" % (port,)}
    key = api_key_of(proc_root, server.get("pid"))
    record = {"contacted": True, "address": address, "port": port, "api_key_used": key is not None}
    for route in info_routes(server):
        status, body, why = get(address, port, route, key)
        if status == 404:
            continue
        record["info_route"] = route
        if why:
            record["info_error"] = why
        else:
            record.update(info_figures(body))
        break
    else:
        record["info_error"] = "no info route answered (404)"
    if args.get("enable_metrics"):
        status, body, why = get(address, port, "/metrics", key)
        record["metrics"] = {"error": why} if why else metrics_figures(body)
    return record


def get(address, port, path, key):
    """(status, body bytes, error or None): one GET with the time and size bounds."""
    connection = http.client.HTTPConnection(address, port, timeout=TIMEOUT_S)
    headers = {"Authorization": "Bearer " + key} if key else {}
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        body = response.read(MAX_BYTES + 1)
    except (OSError, http.client.HTTPException) as exc:
        return None, b"", "%s: %s" % (path, getattr(exc, "strerror", None) or exc or type(exc).__name__)
    finally:
        connection.close()
    if response.status != 200:
        return response.status, b"", "%s: HTTP %d%s" % (path, response.status,
                                                         " (the api key was refused)" if response.status == 401 else "")
    if len(body) > MAX_BYTES:
        return response.status, b"", "%s: response over 1 MiB" % path
    return response.status, body, None


def _finite(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) else None


def info_figures(body):
    """Whitelisted numbers of /server_info: per DP rank `internal_states[]` (0.4.7+), else the top level (0.4.6)."""
    try:
        info = json.loads(body.decode("utf-8", "replace"))
    except ValueError:
        return {"info_error": "info response is not JSON"}
    if not isinstance(info, dict):
        return {"info_error": "info response is not an object"}
    states = info.get("internal_states")
    states = [s for s in states if isinstance(s, dict)][:MAX_SAMPLES] if isinstance(states, list) else [info]
    accept = [_finite(s.get("avg_spec_accept_length")) for s in states]
    tput = [_finite(s.get("last_gen_throughput")) for s in states]
    algorithm = info.get("speculative_algorithm")
    drafts = _finite(info.get("speculative_num_draft_tokens"))
    version = info.get("version")
    return {"version": str(version)[:40] if isinstance(version, str) else None,
            "speculative_algorithm": str(algorithm)[:40] if isinstance(algorithm, str) else None,
            "speculative_num_draft_tokens": drafts,
            "avg_spec_accept_length": [a for a in accept if a is not None],
            "last_gen_throughput": [t for t in tput if t is not None], "dp_ranks": len(states)}


def metrics_figures(body):
    """The three gauges of sglang's Prometheus text: every sample's value and their sum, per metric."""
    out = dict((name, []) for name in METRICS)
    for line in body.decode("utf-8", "replace").splitlines():
        found = PROM_LINE.match(line)
        if not found or found.group(1) not in out:
            continue
        try:
            value = float(found.group(3))
        except ValueError:
            continue
        if math.isfinite(value) and len(out[found.group(1)]) < MAX_SAMPLES:
            out[found.group(1)].append(value)
    return dict((name.split(":", 1)[1], {"samples": values, "sum": sum(values) if values else None})
                for name, values in out.items())
