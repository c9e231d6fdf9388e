"""Every way a CUDA, device or collective failure is printed, in one place: crashes.py starts or joins a
crash on these lines, families.py names the family from them, and the tests check that no log holding
one of them reads clean.

Shapes, by who prints them: torch (`CUDA error: …`, `torch.AcceleratorError`, `cudaError…`, the ATen
device-side asserts `…/aten/…/IndexKernel.cu:93: …: Assertion `…` failed.`), sgl-kernel
(`CUDA error (file:line): …`), flashinfer (`CUDA Error: … (700) …`, `BatchPrefill… failed with error …`),
triton (`triton.runtime.errors.OutOfResources`, `CUDA driver error: …`), NCCL and c10d (watchdog
timeouts, `NCCL WARN Cuda failure`, `nccl…Error`), the driver (`NVRM: Xid`), and CUDA core dumps.
"""
import re

# A kernel's own assert, as CUDA prints it from the device: `file.cu:LINE: [function: ]block: [...],
# thread: [...] Assertion `cond` failed.` (ATen, sgl-kernel, flashinfer, Windows paths alike).
DEVICE_ASSERT = r"\.cuh?:\d+: .*Assertion .+ failed\.|device-side assert(?:ion)? triggered|cudaErrorAssert|" \
                r"CUDA_ERROR_ASSERT|Assertion failed: \S*\.cuh?:\d+, condition: "
# The GPU faulted or the context is lost: never blamed on graphs without capture or replay evidence.
DEVICE_FAULT_TEXT = (r"illegal memory access|cudaErrorIllegalAddress|CUDA_ERROR_ILLEGAL_ADDRESS|illegal address|"
                     r"misaligned address|cudaErrorMisalignedAddress|unspecified launch failure|"
                     r"cudaErrorLaunchFailure|an illegal instruction was encountered|cudaErrorIllegalInstruction|"
                     r"uncorrectable ECC|cudaErrorECCUncorrectable|\bXid \d+|NVRM: Xid|"
                     r"Starting GPU coredump generation|Memory access fault by GPU node|HSA_STATUS_ERROR_(?:MEMORY_\w+|EXCEPTION)|"
                     r"hipErrorIllegalAddress|" + DEVICE_ASSERT)
# Lines that report a CUDA or device failure, whatever the library; each one is a crash.
CUDA_FAILURE = (r"\bCUDA error: |\bCUDA error \([^()\n]*:\d+\): |\bCUDA Error: .*\(\d+\)|CUDA driver error: |"
                r"\bcudaError(?!_t\b)\w+|\bCUDA_ERROR_\w+|"
                r"\b(?:Batch|Single)(?:Prefill|Decode|MLA)\w* failed with error\b|\bHIP error: |\bhipError(?!_t\b)\w+|"
                r"\bHSA_STATUS_ERROR\w*|"
                r"\btriton\.(?:runtime|compiler)\.errors\.\w+|" + DEVICE_FAULT_TEXT)
# Collective failures as NCCL and torch's c10d print them (not NCCL's INFO lines, which name timeouts too).
COLLECTIVE_MARKER = (r"NCCL error|NCCL WARN Cuda failure|\bnccl(?:SystemError|InternalError|UnhandledCudaError|"
                      r"InvalidUsage|RemoteError|InvalidArgument)\b|Watchdog caught collective|"
                      r"watchdog (?:thread terminated|got stuck|timeout)|detected by watchdog|"
                      r"Timeout at NCCL work|Some NCCL operations have failed or timed out|DistBackendError|"
                      r"gloo.*(?:Timed out|Connection closed|Connection reset)|gloo/transport/|"
                      r"collective operation timeout")
# Inside a crash, any NCCL line that says it timed out counts as well.
COLLECTIVE_FAILURE = COLLECTIVE_MARKER + r"|NCCL.*(?:timed out|timeout)"
# Plain words, besides crashes.CANDIDATE_WORDS ("error", "Error", "fault", ...), at least one of which is on
# every line the patterns above match: lines without any are skipped unless a crash is open (a test holds it).
WORDS = ("ssert", "llegal", "HIP", "hipError", "HSA_STATUS", "isaligned", "aunch failure", "ECC", "Xid", "coredump", "NCCL", "nccl", "atchdog",
         "gloo", "ollective", "DistBackendError")

# Lower-case pieces at least one of which every match of CUDA_FAILURE or COLLECTIVE_MARKER holds: a line
# without any is not searched with the patterns (a log has many lines, and the patterns are long).
TOKENS = ("cuda error", "cuda driver error", "cudaerror", "cuda_error", "failed with error", "triton.", "assert",
          "hip error", "hiperror", "hsa_status_error", "memory access fault",
          "illegal", "misaligned", "launch failure", "ecc", "xid", "coredump", "nccl error", "nccl warn cuda",
          "ncclsystem", "ncclinternal", "ncclunhandled", "ncclinvalid", "ncclremote", "timeout at nccl",
          "nccl operations have failed", "watchdog", "distbackenderror", "gloo", "collective operation")

DEVICE_FAULT = re.compile(DEVICE_FAULT_TEXT, re.I)
FAULT = re.compile(CUDA_FAILURE + "|" + COLLECTIVE_MARKER, re.I)
COLLECTIVE = re.compile(COLLECTIVE_FAILURE, re.I)
