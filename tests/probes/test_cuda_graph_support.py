"""Shared helpers for the cuda_graph tests (no tests here): process-group inspection, a stand-in server."""
import os
import time

STANDIN_SERVER = r'''
import json, os, subprocess, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
mode, port = sys.argv[1], int(sys.argv[2])
print("stand-in server: mode=%s port=%d pid=%d" % (mode, port, os.getpid()), flush=True)
# A grandchild, as sglang's scheduler would be: it must die with the group.
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
if mode == "crash":
    print("[2026-03-02 10:11:23 TP0] Capture cuda graph begin. This can take up to several minutes.", flush=True)
    print("Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 1.25 GiB.", flush=True)
    sys.exit(1)
if mode == "hang":
    time.sleep(600)
import threading
in_flight, lock = [0], threading.Lock()
class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if mode == "crash_on_request":
            print("torch.AcceleratorError: CUDA error: an illegal memory access was encountered", flush=True)
            os._exit(1)
        if mode == "hang_on_request":
            time.sleep(600)
        if mode == "crash_when_busy":   # concurrent requests (batch size >= 2) crash the replay
            with lock:
                in_flight[0] += 1
            time.sleep(0.3)
            if in_flight[0] >= 2:
                print("torch.AcceleratorError: CUDA error: an illegal memory access was encountered", flush=True)
                os._exit(1)
            with lock:
                in_flight[0] -= 1
        steps = 32 if mode == "no_acceptance" else 10
        answer = {"meta_info": {"completion_tokens": body["sampling_params"]["max_new_tokens"],
                                "spec_verify_ct": steps}}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
'''


def group_members(pgid):
    """Live (non-zombie) pids whose process group is `pgid`, read from /proc."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state != "Z":
            members.append(int(entry))
    return members


def wait_group_empty(pgid, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not group_members(pgid):
            return True
        time.sleep(0.1)
    return not group_members(pgid)
