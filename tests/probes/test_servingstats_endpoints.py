"""A server's /server_info, /get_server_info and /metrics read on loopback, against a stand-in HTTP server on
127.0.0.1 whose answers have the shapes sglang's own http_server.py builds (0.4.6: internal state merged into
the top level; 0.4.7+: `internal_states[]` per DP rank; the server's arguments, api key included, beside
them) and the Prometheus names of its metrics_collector.py. The api key is checked as sglang's middleware
checks it, and never stored."""
import http.server
import json
import threading

import pytest

from probes.schemas import check
from probes.servingstats import endpoints
from probes.servingstats.shape import ENDPOINTS

KEY = "sk-endpoint-Secret0123456789"
INFO_0_5_23 = {"model_path": "/models/Qwen3-8B", "api_key": KEY, "speculative_algorithm": "DFLASH",
               "speculative_num_draft_tokens": 8, "launch_command": "python -m sglang.launch_server --api-key " + KEY,
               "internal_states": [{"avg_spec_accept_length": 3.52, "last_gen_throughput": 1146.2,
                                    "memory_usage": {"weight": 15.3}},
                                   {"avg_spec_accept_length": 3.61, "last_gen_throughput": 1101.0}],
               "version": "0.5.23"}
INFO_0_4_6 = {"model_path": "/models/Llama-3-8B", "api_key": None, "speculative_algorithm": "EAGLE",
              "speculative_num_draft_tokens": 4, "last_gen_throughput": 212.5, "avg_spec_accept_length": 2.9,
              "version": "0.4.6"}
METRICS = """# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{engine_type="unified",model_name="Qwen3-8B",tp_rank="0"} 3.52
sglang:spec_accept_length{engine_type="unified",model_name="Qwen3-8B",tp_rank="1"} 3.61
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{engine_type="unified",model_name="Qwen3-8B",tp_rank="0"} 1146.2
sglang:num_running_reqs{engine_type="unified",model_name="Qwen3-8B",tp_rank="0"} 128.0
sglang:num_queue_reqs{engine_type="unified",model_name="Qwen3-8B",tp_rank="0"} 3.0
"""


class Handler(http.server.BaseHTTPRequestHandler):
    routes, key, seen = {}, None, []

    def do_GET(self):  # noqa: N802 - http.server's name
        type(self).seen.append((self.command, self.path, self.headers.get("Authorization")))
        body = type(self).routes.get(self.path)
        # sglang's add_api_key_middleware: /health and /metrics open, every other path needs the bearer key.
        if type(self).key and not self.path.startswith("/metrics") and \
                self.headers.get("Authorization") != "Bearer " + type(self).key:
            status, body = 401, b'{"error": "Unauthorized"}'
        elif body is None:
            status, body = 404, b'{"detail": "Not Found"}'
        else:
            status = 200
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def standin():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Handler.routes, Handler.key, Handler.seen = {}, None, []
    yield server
    server.shutdown()
    server.server_close()


def proc_with(tmp_path, pid, argv):
    (tmp_path / str(pid)).mkdir()
    (tmp_path / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    return str(tmp_path)


def release_dir(tmp_path, with_server_info):
    folder = tmp_path / "sglang" / "srt" / "entrypoints"
    folder.mkdir(parents=True)
    routes = '@app.get("/get_server_info")\n' + ('@app.get("/server_info")\n' if with_server_info else "")
    (folder / "http_server.py").write_text(routes)
    return str(tmp_path / "sglang")


def test_server_info_with_the_servers_api_key_and_metrics(standin, tmp_path):
    Handler.routes = {"/server_info": json.dumps(INFO_0_5_23).encode(), "/metrics": METRICS.encode()}
    Handler.key = KEY
    port = standin.server_address[1]
    proc = proc_with(tmp_path, 4242, ["python", "-m", "sglang.launch_server", "--api-key", KEY, "--port", str(port)])
    server = {"pid": 4242, "args": {"port": port, "host": "0.0.0.0", "enable_metrics": True},
              "sglang": {"package_dir": release_dir(tmp_path, True)}}
    record = endpoints.read_one(server, proc)
    assert check(ENDPOINTS, record, "endpoints") is None
    assert record["info_route"] == "/server_info" and record["api_key_used"] is True
    assert record["avg_spec_accept_length"] == [3.52, 3.61] and record["last_gen_throughput"] == [1146.2, 1101.0]
    assert record["speculative_algorithm"] == "DFLASH" and record["version"] == "0.5.23" and record["dp_ranks"] == 2
    assert record["metrics"]["spec_accept_length"] == {"samples": [3.52, 3.61], "sum": 7.13}
    assert record["metrics"]["num_running_reqs"]["sum"] == 128.0
    assert KEY not in json.dumps(record)                        # neither the key nor the payload's args stored
    assert [s[:2] for s in Handler.seen] == [("GET", "/server_info"), ("GET", "/metrics")]
    assert Handler.seen[0][2] == "Bearer " + KEY


def test_older_release_route_and_shape(standin, tmp_path):
    Handler.routes = {"/get_server_info": json.dumps(INFO_0_4_6).encode()}
    port = standin.server_address[1]
    server = {"pid": 7, "args": {"port": port}, "sglang": {"package_dir": release_dir(tmp_path, False)}}
    record = endpoints.read_one(server, proc_with(tmp_path, 7, ["python", "-m", "sglang.launch_server"]))
    assert record["info_route"] == "/get_server_info" and record["api_key_used"] is False
    assert record["avg_spec_accept_length"] == [2.9] and record["last_gen_throughput"] == [212.5]
    assert "metrics" not in record                              # --enable-metrics not given: not asked
    assert [s[1] for s in Handler.seen] == ["/get_server_info"]


def test_unknown_release_falls_back_on_404(standin, tmp_path):
    Handler.routes = {"/get_server_info": json.dumps(INFO_0_4_6).encode()}
    port = standin.server_address[1]
    record = endpoints.read_one({"pid": 7, "args": {"port": port}}, proc_with(tmp_path, 7, ["python"]))
    assert record["info_route"] == "/get_server_info"
    assert [s[1] for s in Handler.seen] == ["/server_info", "/get_server_info"]


def test_refusals_and_bounds(standin, tmp_path, monkeypatch):
    port = standin.server_address[1]
    Handler.routes, Handler.key = {"/server_info": b"{}"}, "another-key"
    record = endpoints.read_one({"pid": 7, "args": {"port": port}}, proc_with(tmp_path, 7, ["python"]))
    assert record["info_error"] == "/server_info: HTTP 401 (the api key was refused)"
    Handler.key = None
    Handler.routes = {"/server_info": b"[" * (endpoints.MAX_BYTES + 10)}
    record = endpoints.read_one({"pid": 7, "args": {"port": port}}, str(tmp_path))
    assert record["info_error"] == "/server_info: response over 1 MiB"
    Handler.routes = {"/server_info": b"not json"}
    assert endpoints.read_one({"pid": 7, "args": {"port": port}}, str(tmp_path))["info_error"] == \
        "info response is not JSON"


def test_what_is_never_contacted(tmp_path):
    assert endpoints.read_one({"pid": 1, "args": {"host": "10.1.2.3"}}, str(tmp_path)) == {
        "contacted": False, "reason": "listens on 10.1.2.3, not on loopback: not contacted"}
    fake = endpoints.read_endpoints([{"pid": 1, "args": {}}], str(tmp_path))
    assert fake["1"]["contacted"] is False and "read from another /proc" in fake["1"]["reason"]
    closed = endpoints.read_one({"pid": 1, "args": {"port": 1}}, str(tmp_path))
    assert closed["contacted"] is True and closed["info_error"].startswith("/server_info: ")
