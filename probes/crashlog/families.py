"""The family of a crash, from its exception, markers and frames, so a crash without a known signature
still lands in the right place. Precedence (first that holds): not a graph problem, OOM in capture,
device fault, collective (NCCL/Gloo) error or hang, capture failure, replay failure, other OOM, native crash.
"""
import re

from probes.crashlog import markers

FAMILIES = ("not_a_graph_problem", "oom_in_capture", "device_fault", "nccl", "capture_failure", "replay_failure",
            "capture_hang", "out_of_memory", "native_crash", "unclassified")
# capture_hang: capture began and the log ends without its end, a crash or the server coming up.
GRAPH_FAMILIES = ("oom_in_capture", "device_fault", "nccl", "capture_failure", "replay_failure", "capture_hang")

NOT_GRAPH = (
    ("import_error", re.compile(r"\b(ModuleNotFoundError|ImportError)\b|undefined symbol|cannot import name")),
    ("model_config", re.compile(r"Model architectures? .*not supported|Unsupported architectures?|does not recognize "
                                r"this architecture|model type .* (is not|not) (supported|recognized)|"
                                r"(config\.json|tokenizer_config\.json).*(not found|No such file)|"
                                r"Can't load the configuration of|is not a local folder and is not a valid model")),
    ("port_in_use", re.compile(r"Address already in use|EADDRINUSE|error while attempting to bind|"
                               r"port\b.* is (not available|already in use)|is used by a process already")),
)
OOM = re.compile(r"out of memory|OutOfMemoryError|cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY", re.I)
DEVICE_FAULT = markers.DEVICE_FAULT
COLLECTIVE = re.compile(r"NCCL|Watchdog caught collective|ProcessGroup\w*|DistBackendError|gloo|"
                        r"collective operation timeout|all_?reduce.*(timed out|timeout)", re.I)
COLLECTIVE_FAILURE = markers.COLLECTIVE
CAPTURE_FUNCS = frozenset(("capture", "capture_one_batch_size", "init_cuda_graphs", "capture_end", "capture_one",
                           "capture_decode_graph", "capture_cuda_graphs", "_end_current_segment",
                           "init_all_cuda_graphs", "capture_begin"))
# Text that only a capture prints. Not a bare "StreamCapture": the allocator's
# currentStreamCaptureStatusMayInitCtx is on the stack of every replay and forward fault too.
CAPTURE_TEXT = re.compile(r"Capture (?:[\w-]+ ){0,4}?(?:cuda|CUDA) graph failed|Capture single-CG [\w ]+failed|"
                          r"stream is capturing|cudaErrorStreamCapture\w+|\bcapture_end\b|num_active_captures_|"
                          r"captures_underway|PCG capture", re.I)
# A graph runner being built: its constructor, or a compile, warm-up or capture step of a graph runner or
# backend (the piecewise backend's torch.compile pass runs the model before any capture begins).
GRAPH_BUILD_FILE = re.compile(r"graph_runner|graph_backend|piecewise|runner_backend", re.I)
GRAPH_BUILD_FUNC = re.compile(r"^__init__$|compile|warmup|capture", re.I)
# sglang's own message when a piecewise (prefill) graph fails: at start-up (capture and compile) or on a batch.
PIECEWISE_FAILED = re.compile(r"Piecewise CUDA Graph failed", re.I)
# The scheduler's loop frames: the crash came on a batch the running server was given.
SERVING_FUNCS = re.compile(r"^(?:run_event_loop|dispatch_event_loop|event_loop\w*|run_batch|process_batch_result\w*)$")
REPLAY_FUNCS = frozenset(("replay", "replay_prepare", "populate_from_forward_batch", "fill_from", "load_batch"))
NATIVE = re.compile(r"Fatal Python error|Segmentation fault|SIG(SEGV|ABRT|BUS|ILL)|Aborted \(core dumped\)|"
                    r"terminate called after throwing|core dumped", re.I)


def _frame_funcs(crash):
    return [func.split(".")[-1] for _, _, func in crash.frames]


def in_capture(crash):
    funcs = _frame_funcs(crash)
    return any(f in CAPTURE_FUNCS for f in funcs) or bool(CAPTURE_TEXT.search(crash.text())) or \
        any(GRAPH_BUILD_FILE.search(path) and GRAPH_BUILD_FUNC.search(func.split(".")[-1])
            for path, _, func in crash.frames)


def in_serving_loop(crash):
    return any(SERVING_FUNCS.match(f) for f in _frame_funcs(crash))


def in_replay(crash):
    for path, _, func in crash.frames:
        name = func.split(".")[-1]
        if name in REPLAY_FUNCS or (name == "execute" and "graph" in path.lower()):
            return True
    return False


def family_of(crash, capture_open=False, serving=False):
    """(family, detail): detail names the sub-kind of `not_a_graph_problem` and the phase of a fault.
    `serving`: the log shows the server serving batches before the crash (and no restart since)."""
    text = crash.text()
    exception = crash.exception.text if crash.exception else ""
    for kind, pattern in NOT_GRAPH:
        if pattern.search(text) and not in_capture(crash):
            return "not_a_graph_problem", kind
    capturing = in_capture(crash) or capture_open
    replaying = in_replay(crash)
    if PIECEWISE_FAILED.search(text):
        # sglang says a piecewise graph failed: on a batch of the running server it is the graph's run (replay),
        # before any it is the graph being compiled and captured at start-up.
        replaying = serving or in_serving_loop(crash)
        capturing = not replaying
    phase = "capture" if capturing else "replay" if replaying else ""
    if OOM.search(text) and capturing:
        return "oom_in_capture", "capture"
    if DEVICE_FAULT.search(text):
        return "device_fault", phase
    if COLLECTIVE_FAILURE.search(text) or (COLLECTIVE.search(exception) and "Error" in exception):
        return "nccl", phase
    if capturing:
        return "capture_failure", "capture"
    if phase == "replay":
        return "replay_failure", "replay"
    if OOM.search(text):
        return "out_of_memory", ""
    if NATIVE.search(text):
        return "native_crash", ""
    return "unclassified", ""
