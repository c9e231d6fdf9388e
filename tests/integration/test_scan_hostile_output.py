"""Hosts that print what they should not, through `gpudiag scan` on the sshd fleet: a flood is cut off
at the output cap, odd frames and odd servers get a precise status, and what is stored is strict JSON."""
import json
import time

import pytest

from gpudiag.probe_data import fitted
from tests.integration.conftest import loopback_listener

STAND_IN = """exec {python} -c '
import sys, json
nonce = json.loads(sys.stdin.readline())["nonce"]
print("GPUDIAG-BEGIN " + nonce)
print({body})
print("GPUDIAG-END " + nonce)
'"""


def frame_printer(fleet, name, body):
    """A stand-in interpreter that answers the payload with a frame holding `body` (Python text
    evaluating to the frame's text)."""
    return fleet.script(name, STAND_IN.format(python=fleet.system_python, body=body))


def scan(fleet, tmp_path, variants, *args, names=("h0",), expect=3):
    inventory = fleet.write_inventory(tmp_path / "inventory.yaml", list(names), variants=variants)
    reports = tmp_path / "reports"
    proc = fleet.run_gpudiag("scan", "-i", str(inventory), "all", *fleet.fast_scan_args, "--json", *args,
                             env=fleet.env(GPUDIAG_REPORTS=str(reports)), timeout=120)
    assert proc.returncode == expect, proc.stderr
    return fleet.load_run(proc, reports)[1]


def test_a_host_streaming_yes_is_cut_off_at_the_output_cap(sshd_fleet, tmp_path):
    flood = sshd_fleet.script("yes-python", "exec yes")
    started = time.monotonic()
    hosts = scan(sshd_fleet, tmp_path, {"flood": ("h1", {"python": str(flood)})},
                 "--max-output", "16", "--timeout", "90")
    assert hosts["h0"]["status"] == "ok", hosts["h0"]["reason"]
    assert hosts["flood"]["status"] == "frame_error"
    assert hosts["flood"]["reason"] == "output exceeded 16 MiB; the connection was closed there"
    assert hosts["flood"]["duration_s"] < 60 and time.monotonic() - started < 80   # the cap, not the deadline
    assert hosts["flood"]["output_tail"]["stdout"].startswith("y\n")


@pytest.mark.parametrize("body, reason", [
    ('"[" * 5000 + "]" * 5000', "nested deeper than 100 levels"),
    ('"{\\"schema\\": 1, \\"probes\\": {}, \\"n\\": " + "9" * 5000 + "}"', "a number is out of range"),
    ('"{\\"schema\\": 1, \\"probes\\": {}, \\"n\\": 1e999}"', "number 1e999 is out of range"),
    # valid JSON within the output cap, over the parse budget: refused before it is built
    ('"{\\"schema\\": 1, \\"probes\\": {}, \\"dense\\": [" + ",".join(["{}"] * 1200000) + "]}"',
     "the frame is not readable: more than 1,000,000 values (the limit)"),
    ('"{\\"schema\\": 1, \\"probes\\": {}, \\"s\\": \\"" + "x" * (9 * 2**20) + "\\"}"',
     "the frame is not readable: a string is longer than 8 Mi characters (the limit)"),
])
def test_deep_nesting_huge_numbers_and_frames_over_the_parse_budget_are_frame_error(sshd_fleet, tmp_path, body, reason):
    odd = frame_printer(sshd_fleet, "odd-frame-python", body)
    hosts = scan(sshd_fleet, tmp_path, {"odd": ("h1", {"python": str(odd)})})
    assert hosts["odd"]["status"] == "frame_error"
    assert reason in hosts["odd"]["reason"]


def test_nan_and_infinity_from_a_host_are_stored_as_null_readable_by_a_strict_parser(sshd_fleet, tmp_path):
    # env's data fits its declaration; the odd numbers sit in keys it adds (readers ignore added keys).
    env = fitted("env", {"hostname": "odd"})
    data = json.dumps(env)[:-1] + ', "ratio": Infinity, "drop": -Infinity, "ok": 1.5}'
    frame = '{"schema": 1, "probes": {"env": {"status": "ok", "duration_s": NaN, "data": %s}}}' % data
    body = json.dumps(frame)
    odd = frame_printer(sshd_fleet, "nan-frame-python", body)
    reports = tmp_path / "reports"
    hosts = scan(sshd_fleet, tmp_path, {"odd": ("h1", {"python": str(odd)})}, expect=0)
    assert hosts["odd"]["status"] == "ok"

    def refuse(name):
        raise ValueError(f"{name} in a stored file")
    for path in reports.rglob("*.json"):
        doc = json.loads(path.read_text(), parse_constant=refuse)    # any JSON parser reads it
        if doc.get("name") == "odd":
            stored = doc["probes"]["env"]["data"]
            assert (stored["hostname"], stored["ratio"], stored["drop"], stored["ok"]) == ("odd", None, None, 1.5)
    report = sshd_fleet.run_gpudiag("report", "--json", env=sshd_fleet.env(GPUDIAG_REPORTS=str(reports)))
    json.loads(report.stdout, parse_constant=refuse)


def test_a_probe_whose_data_misfits_is_that_probes_error_and_the_host_is_kept(sshd_fleet, tmp_path):
    """A null where env declares a string: env is the error naming the field, the host is still ok."""
    frame = '{"schema": 1, "probes": {"env": {"status": "ok", "duration_s": 0.1, "data": %s}}}' % json.dumps(
        dict(fitted("env", {}), hostname=None))
    odd = frame_printer(sshd_fleet, "misfit-frame-python", json.dumps(frame))
    hosts = scan(sshd_fleet, tmp_path, {"odd": ("h1", {"python": str(odd)})}, expect=4)
    assert hosts["odd"]["status"] == "ok"
    env = hosts["odd"]["probes"]["env"]
    assert env["status"] == "error" and env["error"]["type"] == "ProbeDataError"
    assert "probes.env.data.hostname" in env["error"]["message"]


@pytest.fixture
def garbage_port():
    """A loopback port that answers every connection with an HTTP error, then waits."""
    with loopback_listener("127.0.0.21", b"HTTP/1.1 400 Bad Request\r\nServer: \x1b]0;pwned\x07nginx\r\n\r\n") as address:
        yield address


def test_a_port_sending_garbage_says_what_it_sent(sshd_fleet, tmp_path, garbage_port):
    address, port = garbage_port
    hosts = scan(sshd_fleet, tmp_path, {"web": ("h0", {"address": address, "port": port})},
                 "--connect-timeout", "3")
    reason = hosts["web"]["reason"]
    assert hosts["web"]["status"] == "unreachable"
    assert reason.startswith(f"{address}:{port} answered, but not with SSH: it sent 'HTTP/1.1 400 Bad Request")
    assert "\x1b" not in reason and "\\x1b" in reason            # escaped, never raw
    assert "no SSH banner" not in reason
