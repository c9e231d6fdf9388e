"""Every way a CUDA, device or collective failure is printed is a crash: a property test over real fault
lines (from the corpus and other public reports) put into the corpus's clean logs, at any place, under any
collector's prefix; fault lines next to a traceback join it; device-side asserts are device faults."""
import random
import re
from pathlib import Path

import pytest

from probes.crashlog import markers
from probes.crashlog.classify import classify
from probes.crashlog.crashes import CANDIDATE_WORDS

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "corpus"

# Fault lines as printed, each from the public report named in the comment above it.
FAULT_LINES = [
    # torch / c10 (sglang #3696, #8296, #22987)
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
    "  what():  [PG ID 2 PG GUID 3 Rank 1] Process group watchdog thread terminated with exception: CUDA error: an "
    "illegal memory access was encountered",
    "Search for `cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html "
    "for more information.",
    "RuntimeError: CUDA error: device-side assert triggered",
    "RuntimeError: CUDA error: an illegal instruction was encountered",           # sglang #4188
    # ATen device-side asserts (sglang #15638, PR #5390, accelerate #2539, a Windows build's path)
    '/pytorch/aten/src/ATen/native/cuda/IndexKernelUtils.cu:16: vectorized_gather_kernel: block: [64,0,0], thread: '
    '[224,0,0] Assertion `ind >=0 && ind < ind_dim_size && "vectorized gather kernel index out of bounds"` failed.',
    "/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1504: indexSelectSmallIndex: block: [30,0,0], thread: [1,0,0] "
    "Assertion `srcIndex < srcSelectDimSize` failed.",
    "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:93: operator(): block: [0,0,0], thread: [93,0,0] Assertion "
    '`index >= -sizes[i] && index < sizes[i] && "index out of bounds"` failed.',
    "C:\\actions-runner\\_work\\pytorch\\pytorch\\builder\\windows\\pytorch\\aten\\src\\ATen\\native\\cuda\\"
    "IndexKernel.cu:91: block: [26,0,0], thread: [32,0,0] Assertion `index >= -sizes[i] && index < sizes[i] && "
    '"index out of bounds"` failed.',
    # the `CUDA error (file:line): …` shape of sgl-kernel's checks (no public quote of it was found: the path and
    # line are illustrative); flashinfer (flashinfer #924); triton (sglang #2384, triton #7967)
    "RuntimeError: CUDA error (/sgl-kernel/csrc/allreduce/custom_all_reduce.cuh:364): invalid argument",
    "CUDA Error: an illegal memory access was encountered (700) /app/include/flashinfer/attention/prefill.cuh: "
    "line 2340 at function cudaLaunchKernel((void*)kernel, nblks, nthrs, args, smem_size, stream)",
    "RuntimeError: BatchPrefillWithPagedKVCache failed with error an illegal memory access was encountered",
    "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 131072, Hardware limit: 65536. "
    "Reducing block sizes or `num_stages` may help.",
    "RuntimeError: CUDA driver error: invalid argument",
    # NCCL and c10d (sglang #3836, #3932, #6246, nccl #1410)
    "[rank4]:[E226 11:16:37.104512039 ProcessGroupNCCL.cpp:616] [Rank 4] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=5653, OpType=ALLREDUCE, NumelIn=58720256, NumelOut=58720256, Timeout(ms)=600000) ran "
    "for 600011 milliseconds before timing out.",
    "[rank3]:[E227 16:30:43.526290891 ProcessGroupNCCL.cpp:1785] [PG ID 2 PG GUID 3 Rank 3] Exception (either an error "
    "or timeout) detected by watchdog at work: 32, last enqueued NCCL work: 32, last completed NCCL work: 31.",
    "6f747114300646eb-5af0524bda8e4aee:4167:5269 [0] transport/p2p.cc:275 NCCL WARN Cuda failure 'invalid argument'",
    "[rank6]: ncclUnhandledCudaError: Call to CUDA function failed.",
    # the driver and CUDA core dumps (sglang #37936, #6590)
    "NVRM: Xid (PCI:0000:18:00): 43, pid=4242, name=python3, Ch 00000008",
    "Starting GPU coredump generation, set the CUDA_COREDUMP_SHOW_PROGRESS environment variable to 1 to enable more "
    "detailed output",
    # sglang's own parent process, with and without 0.4.3's typo
    "[2025-05-23 18:02:42] Received sigquit from a child process. It usually means the child failed.",
    "[2025-02-10 08:00:00] Received sigquit from a child proces. It usually means the child failed.",
]
PREFIXES = ["", "llm0-1  | ", "deepseek-r1-1  | ", "[llm0]    | ", "[pod/sglang-0/server] ",
            "Mar 07 10:00:00 gpu-1 python3[4242]: ", "2025-07-25T07:53:08.21748708+08:00 stderr F ",
            "2025-07-25T07:53:08.217487081Z ", "(SGLangEngine pid=952, ip=10.0.0.1) "]


def clean_logs():
    out = []
    for path in sorted(CORPUS.glob("clean_*.log")):
        out.append([ln for ln in path.read_text(encoding="utf-8").splitlines() if not ln.startswith("#fixture ")])
    return out


def test_every_fault_line_holds_a_word_the_classifier_looks_for():
    for line in FAULT_LINES:
        assert markers.FAULT.search(line) or "sigquit" in line, line
        assert any(word in line for word in CANDIDATE_WORDS), line


@pytest.mark.parametrize("seed", range(40))
def test_no_log_holding_a_fault_line_reads_clean(seed):
    rng = random.Random(seed)
    bases = clean_logs()
    for fault in rng.sample(FAULT_LINES, 6):
        base = list(rng.choice(bases))
        at = rng.randint(0, len(base))
        prefix = rng.choice(PREFIXES)
        lines = [prefix + ln for ln in base[:at] + [fault] + base[at:]]
        text = ("\r\n" if rng.random() < 0.3 else "\n").join(lines)
        result = classify(text)
        assert result["outcome"] != "clean", (seed, prefix, fault)
        number = at + 1
        assert any(c["line"] <= number <= c["last_line"] for c in result["crashes"]), (seed, prefix, fault)


@pytest.mark.parametrize("line", [ln for ln in FAULT_LINES if re.search(r"Assertion|device-side assert", ln)])
def test_device_side_asserts_are_device_faults_with_no_graph_blamed(line):
    crash = classify(line)["crashes"][0]
    assert (crash["family"], crash["detail"]) == ("device_fault", "")
    assert crash["signature"]["name"] == "device_side_assert"
    assert "graph" not in crash["signature"]["meaning"].lower() and crash["summary"].startswith("device_side_assert")


def test_a_fault_line_just_before_a_traceback_joins_it():
    """sglang #6590: the core dump starts, then the scheduler's traceback: one crash, the rank's, a device fault."""
    lines = (CORPUS / "sglang_6590_gpu_coredump_then_traceback.log").read_text().splitlines()[4:]
    result = classify("\n".join(lines))
    assert result["crashes_total"] == 1
    crash = result["crashes"][0]
    assert (crash["line"], crash["streams"], crash["family"]) == (1, ["TP4"], "device_fault")
    assert crash["last_frames"][-1]["function"] == "synchronize"
    # The same with torch's own hint line (`cudaErrorIllegalAddress`) just above an ordinary traceback.
    traceback = (CORPUS / "sglang_2468_warmup_failed_after_startup.log").read_text().splitlines()[4:]
    start = next(i for i, ln in enumerate(traceback) if "Traceback" in ln)
    joined = traceback[:start] + [FAULT_LINES[3]] + traceback[start:]
    crash = classify("\n".join(joined))["crashes"][0]
    assert crash["line"] == start + 1 and crash["family"] == "device_fault"
    assert crash["exception"]["text"].startswith("AssertionError")


def test_sgl_kernel_cuda_error_with_file_and_line_is_a_crash():
    text = "[2025-06-01 10:00:00 TP0] Decode batch. #running-req: 8\n" + FAULT_LINES[10]
    result = classify(text)
    assert result["outcome"] == "unclassified_crash"
    assert result["crashes"][0]["line"] == 2 and result["crashes"][0]["exception"]["text"] == FAULT_LINES[10]
