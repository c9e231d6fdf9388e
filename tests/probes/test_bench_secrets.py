"""The bench load never keeps the api key: a server that echoes the request's Authorization header (or the key
cut in the middle) in its error message gets an error text with the key hidden."""
import http.server
import json
import threading
import time

import pytest

from probes.servingbench.load import post, run_level, without_key

KEY = "sk-bench-EchoedKey0123456789"


@pytest.fixture
def echoing_server():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            header = self.headers.get("Authorization")
            message = {"/generate": f"bad request with headers {{'Authorization': '{header}'}} " + "x" * 3000}
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            event = {"error": {"message": message[self.path], "key_echo": KEY}}
            self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def test_an_echoed_key_never_reaches_the_level_record(echoing_server):
    answer, why = post("127.0.0.1", echoing_server, b"{}", KEY, time.monotonic() + 10)
    assert answer is None and why.startswith("server error: bad request") and KEY not in why
    level = run_level({"address": "127.0.0.1", "port": echoing_server, "key": KEY}, 2, 4, time.monotonic() + 10,
                      threading.Event(), 4, 4, 1000)
    text = json.dumps(level)
    assert level["failed"] == 4 and level["errors"] and KEY not in text and KEY[:8] not in text


@pytest.mark.parametrize("cut", [5, 12, len(KEY) - 1])
def test_a_key_cut_at_the_end_of_a_message_is_hidden_too(cut):
    text = without_key("server error: echo Bearer " + KEY[:cut], KEY)
    assert KEY[:5] not in text and text.endswith("<redacted>")


@pytest.mark.parametrize("host, address", [
    ("127.0.0.1", "127.0.0.1"), ("127.0.0.5", "127.0.0.5"), ("::1", "::1"), ("[::1]", "::1"), ("", "127.0.0.1"),
    ("0.0.0.0", "127.0.0.1"), ("localhost", "127.0.0.1"), ("127.0.0.1.nip.io", None), ("127.attacker.example", None),
    ("127.1", None), ("10.0.0.1", None), ("::ffff:10.0.0.1", None),
])
def test_endpoint_reads_go_only_to_a_literal_loopback_address(host, address):
    from probes.servingstats.endpoints import loopback_address
    assert loopback_address({"host": host}) == address
