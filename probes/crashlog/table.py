"""Known CUDA-graph crash signatures, most specific first (the first match is the primary one).

A signature matches a crash when one `match` pattern matches one of its lines and every `requires`
pattern matches somewhere in the log. `context` patterns pick the other log lines worth quoting
(the ones that show which algorithm and which graphs were on). `recommendation` names flags through
{max_bs}, {prefill_graphs_off}, {graphs_off} and {mem_fraction}, spelled for the release that wrote
the log (releases.flag_words). Patterns are case-insensitive regular expressions. `phases`, when given,
lists the phases (crash detail "capture", "replay", or "" for none) the log must show for the signature to
name the crash: a signature that names a graph or a phase needs that evidence, and one that says the log
shows no graph names only a crash without a phase.
"""

SIGNATURES = [{'name': 'replay_input_copy_none',
  'kind': 'replay',
  'family': 'replay_failure',
  'phases': ['replay'],
  'severity': 'error',
  'match': ["NoneType' object has no attribute '(copy_|shape|dtype|size|numel|to)'",
            '_foreach_copy_\\(\\).*(NoneType|None)',
            'expected (a )?Tensor.*(got|but found|but got) NoneType',
            'must be (a )?Tensor, not NoneType',
            '(argument|src|self).*NoneType'],
  'requires': ['replay|foreach_copy|graph_runner|cuda_graph'],
  'meaning': 'An optional input buffer is None on one speculative path, so the grouped input copy before graph '
             'replay fails (the buffer exists for the captured shape but the batch does not carry it).',
  'recommendation': 'The traceback names the copy, not the field: find which optional input the crashing batch '
                    "left None (a scan of the host lists the fields this copy takes in the installed release); "
                    '{graphs_off} keeps the replay out of the way until a release skips absent optional fields.',
  'reference': 'sglang PR #18558 / PR #28465 (grouped foreach copy of graph inputs)'},
 {'name': 'capture_end_no_active_capture',
  'kind': 'capture',
  'family': 'capture_failure',
  'severity': 'error',
  'match': ['num_active_captures_ > 0',
            'capture_end.*INTERNAL ASSERT',
            'captures_underway.empty\\(\\) INTERNAL ASSERT'],
  'requires': [],
  'meaning': 'CUDA-graph capture ended on an allocator with no active capture: DFlash with prefill (piecewise) '
             'CUDA graphs breaks capture at start-up or on the first request.',
  'recommendation': 'Run DFlash without prefill CUDA graphs ({prefill_graphs_off}) until the release carries the '
                    'fix; decode graphs can stay on.',
  'reference': 'sglang #35437',
  'context': ["speculative_algorithm='?DFLASH|--speculative-algorithm DFLASH",
              'dflash_worker',
              'breakable_cuda_graph|piecewise|prefill CUDA graph|enable_piecewise_cuda_graph=True']},
 {'name': 'piecewise_cuda_graph_failed',
  'kind': 'capture',
  'families': ['capture_failure', 'replay_failure'],
  'phases': ['capture', 'replay'],
  'severity': 'error',
  'match': ['Piecewise CUDA Graph failed'],
  'requires': [],
  'meaning': "sglang's piecewise (prefill) CUDA graph failed: at start-up while it was compiled and captured, or "
             'on a batch of the running server (the crash says which). Decode CUDA graphs are a separate runner.',
  'recommendation': 'Serve without piecewise prefill graphs ({piecewise_off}) until a release fixes it; decode '
                    'graphs can stay on. Report the error line sglang printed with the model and GPU.',
  'reference': 'sglang PR #27811, sglang PR #23351 (piecewise CUDA graph failures)'},
 {'name': 'sm103_eagle_draft_capture',
  'kind': 'capture',
  'family': 'capture_failure',
  'families': ['capture_failure', 'device_fault'],
  'phases': ['capture'],
  'severity': 'error',
  'match': ['Capture (cuda|CUDA) graph failed', 'CUDA error.*(capture|graph)', 'graph capture.*(failed|error)'],
  'requires': ['sm_?103|B300|compute capability:? ?10\\.3|capability.*\\(10, 3\\)', 'eagle|draft'],
  'meaning': 'The EAGLE draft-graph capture crashes on sm_103 (B300), a regression since sglang 0.5.12.',
  'recommendation': 'On sm_103, pin an sglang release before 0.5.12 or one with the fix, or run EAGLE with '
                    '{graphs_off} until then.',
  'reference': 'sglang #25563'},
 {'name': 'oom_during_capture',
  'kind': 'capture',
  'family': 'oom_in_capture',
  'severity': 'error',
  'match': ['CUDA out of memory', 'OutOfMemoryError', 'cudaErrorMemoryAllocation', 'out of memory'],
  'requires': ['capture|cuda graph|cuda_graph|graph_runner'],
  'meaning': 'The GPU ran out of memory while capturing CUDA graphs (one graph per batch size, plus the draft '
             'graphs with speculative decoding).',
  'recommendation': 'Lower {max_bs} (or capture fewer batch sizes) and leave more room outside {mem_fraction} (a '
                    'lower value).',
  'reference': 'sglang #3395 (capture advice)'},
 {'name': 'illegal_memory_access_capture',
  'kind': 'capture',
  'family': 'device_fault',
  'phases': ['capture'],
  'severity': 'critical',
  'match': ['an illegal memory access was encountered',
            'cudaErrorIllegalAddress',
            'CUDA_ERROR_ILLEGAL_ADDRESS',
            'illegal address',
            'misaligned address',
            'Memory access fault by GPU node'],
  'requires': [],
  'meaning': 'A kernel read or wrote out of bounds while CUDA graphs were being captured at start-up: a kernel or '
             'attention-backend bug for this model or GPU, hit by one of the captured batch sizes; the CUDA context '
             'is lost.',
  'recommendation': 'Rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel; try another attention backend; capture '
                    'fewer batch sizes ({max_bs}); start with {graphs_off} to serve while the cause is found.',
  'reference': 'sglang #1467, sglang #5029 (faults in capture)'},
 {'name': 'illegal_memory_access_replay',
  'kind': 'replay',
  'family': 'device_fault',
  'phases': ['replay'],
  'severity': 'critical',
  'match': ['an illegal memory access was encountered',
            'cudaErrorIllegalAddress',
            'CUDA_ERROR_ILLEGAL_ADDRESS',
            'illegal address',
            'misaligned address',
            'Memory access fault by GPU node'],
  'requires': [],
  'meaning': 'A kernel read or wrote out of bounds while graphs replayed: stale addresses in a captured graph (a '
             'shared graph pool, a buffer resized after capture) or an attention-backend bug; the CUDA context is '
             'lost.',
  'recommendation': 'Reproduce with CUDA_LAUNCH_BLOCKING=1; retry with {graphs_off} to confirm it is '
                    'graph-specific; try another attention backend; lower concurrency or the draft-token budget '
                    'until the boundary is found.',
  'reference': 'sglang #26957, sglang #22930, z-lab/dflash #146'},
 {'name': 'device_side_assert',
  'kind': 'device',
  'family': 'device_fault',
  'severity': 'critical',
  'match': ['\\.cuh?:\\d+: .*Assertion .+ failed\\.', 'device-side assert(ion)? triggered', 'cudaErrorAssert',
            'Assertion failed: \\S*\\.cuh?:\\d+, condition: '],
  'requires': [],
  'meaning': 'A kernel assert fired on the GPU (an index out of range in gather, index_select or indexing: a token '
             'id beyond the vocabulary, a page or draft index past its buffer); the CUDA context is lost. The crash '
             'names a phase (capture, replay) only when the log shows one.',
  'recommendation': 'Rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel and the tensor; retry with {graphs_off} '
                    'to see whether graph replay is involved; lower concurrency until it stops.',
  'reference': 'sglang #15638, sglang #13051, sglang #15399 (index out of bounds in speculative decoding)'},
 {'name': 'illegal_memory_access',
  'kind': 'device',
  'family': 'device_fault',
  'phases': [''],
  'severity': 'critical',
  'match': ['an illegal memory access was encountered',
            'cudaErrorIllegalAddress',
            'CUDA_ERROR_ILLEGAL_ADDRESS',
            'illegal address',
            'misaligned address',
            'Memory access fault by GPU node',
            'an illegal instruction was encountered',
            'unspecified launch failure'],
  'requires': [],
  'meaning': 'A kernel faulted on the GPU (illegal address or instruction) and the CUDA context is lost; the log '
             'shows no capture or graph replay around it, so it is not known to be a CUDA-graph problem.',
  'recommendation': 'Rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel; retry with {graphs_off} to see whether '
                    'graphs are involved; try another attention backend; lower concurrency until it stops.',
  'reference': 'sglang #3696, sglang #22987 (faults under load)'},
 {'name': 'nccl_in_graph_hang',
  'kind': 'hang',
  'family': 'nccl',
  'phases': ['capture', 'replay'],
  'severity': 'critical',
  'match': ['Watchdog caught collective operation timeout',
            'ProcessGroupNCCL.*[Tt]imeout',
            'NCCL.*(timed out|timeout)',
            'NCCL error.*(graph|capture)'],
  'requires': [],
  'meaning': 'An NCCL collective captured inside a CUDA graph hangs on replay (tensor parallelism with graphs on).',
  'recommendation': 'Use an sglang release that keeps NCCL out of captured graphs or uses the custom all-reduce; '
                    'as a workaround run TP=1 repros or {graphs_off}.',
  'reference': 'sglang PR #31852'},
 {'name': 'nccl_collective_timeout',
  'kind': 'hang',
  'family': 'nccl',
  'phases': [''],
  'severity': 'critical',
  'match': ['Watchdog caught collective operation timeout',
            'ProcessGroupNCCL.*[Tt]imeout',
            'NCCL.*(timed out|timeout)',
            'detected by watchdog',
            'Timeout at NCCL work'],
  'requires': [],
  'meaning': 'An NCCL collective timed out and the watchdog stopped the process. No CUDA-graph capture was open and '
             'no graph replay is on the stack, so this log does not tie it to graphs: a rank that stopped or '
             'crashed first, a network or peer-to-peer problem, or a very long step.',
  'recommendation': 'Find the first rank that stopped (its own error comes before the timeouts); rerun with '
                    'NCCL_DEBUG=INFO; check the interconnect between the ranks and that every node started.',
  'reference': 'sglang #3836, sglang #3932 (watchdog timeouts at start-up and under load)'},
 {'name': 'stream_capture_invalidated',
  'kind': 'capture',
  'family': 'capture_failure',
  'severity': 'error',
  'match': ['operation not permitted when stream is capturing',
            'cudaErrorStreamCaptureUnsupported',
            'cudaErrorStreamCaptureInvalidated',
            'cudaErrorStreamCaptureImplicit',
            'operation would make the legacy stream depend on a capturing blocking stream'],
  'requires': [],
  'meaning': 'Something synchronised with the host or used a forbidden stream during capture (.item(), .cpu(), a '
             'pinned allocation, the legacy stream).',
  'recommendation': 'Find the host sync in the captured forward (rerun with CUDA_LAUNCH_BLOCKING=1 to localise '
                    'it); it is a bug in the path being captured, so {graphs_off} is the only workaround.',
  'reference': 'PyTorch CUDA graphs documentation (constraints on capture)'},
 {'name': 'capture_failed',
  'kind': 'capture',
  'family': 'capture_failure',
  'severity': 'error',
  'match': ['Capture (cuda|CUDA) graph failed', 'Exception: Capture cuda graph failed'],
  'requires': [],
  'meaning': "sglang's CUDA-graph capture raised at start-up; the server exits before it serves.",
  'recommendation': 'Lower {max_bs} (e.g. 32 or 16), lower {mem_fraction} for more headroom, or start with '
                    '{graphs_off} to serve while the cause is found.',
  'reference': 'sglang #3395 (fixed by PR #3430)'},
 {'name': 'kernel_run_failed',
  'kind': 'kernel',
  'families': ['unclassified'],
  'severity': 'error',
  'match': ['Error occurred when running GEMM'],
  'requires': [],
  'meaning': 'A kernel library (TRT-LLM gen, FlashInfer, CUTLASS) refused or failed to run a GEMM for this shape '
             'and GPU; the log shows no CUDA-graph capture or replay around it, so it is not known to be a graph '
             'problem.',
  'recommendation': 'Report the kernel name and the GEMM shape sglang printed upstream with the model and GPU; '
                    'until it is fixed, serve with another MoE runner or GEMM backend for that quantisation.',
  'reference': 'sglang #31864 (TRT-LLM batched GEMM on sm100)'},
 {'name': 'native_crash',
  'kind': 'crash',
  'families': ['native_crash', 'capture_failure', 'replay_failure'],
  'phases': ['capture', 'replay'],
  'severity': 'critical',
  'match': ['Fatal Python error: (Segmentation fault|Aborted|Bus error)',
            'Segmentation fault',
            'SIGSEGV',
            'core dumped',
            'terminate called after throwing'],
  'requires': [],
  'meaning': 'A native crash (segfault, abort) killed the process while CUDA graphs were captured or replayed (the '
             'frames or the capture lines show it): often a replay on freed memory.',
  'recommendation': 'Rerun with CUDA_LAUNCH_BLOCKING=1 to localise the kernel, and with {graphs_off} to see '
                    'whether graphs are involved.',
  'reference': 'sglang #26957 (class of graph replay crashes)'},
 {'name': 'native_crash_outside_graphs',
  'kind': 'crash',
  'family': 'native_crash',
  'phases': [''],
  'severity': 'critical',
  'match': ['Fatal Python error: (Segmentation fault|Aborted|Bus error)',
            'Segmentation fault',
            'SIGSEGV',
            'core dumped',
            'terminate called after throwing'],
  'requires': [],
  'meaning': 'A native crash (segfault, abort) killed the process. The log shows no CUDA-graph capture or replay '
             'around it, so it is not known to be a graph problem: the native frames or the line before it say '
             'where it died (NCCL initialisation, a C++ extension, the allocator).',
  'recommendation': "Read the frames the crash printed (faulthandler's Python frames, the C++ frames): rerun with "
                    'NCCL_DEBUG=INFO when NCCL is on them, with CUDA_LAUNCH_BLOCKING=1 when a kernel is, and report '
                    'the frames upstream.',
  'reference': 'sglang #28299 (segfault in NCCL initialisation), sglang #36495 (abort in the NGRAM trie)'},
 {'name': 'acceptance_stuck_at_one',
  'kind': 'silent',
  'family': None,
  'severity': 'warning',
  'match': ['accept len: 1\\.00?\\b', 'accept_length[=: ]+1\\.00?\\b', 'avg_accept_len(gth)?[=: ]+1\\.00?\\b'],
  'requires': [],
  'meaning': 'Speculative decoding runs but accepts no draft tokens (acceptance length 1.00). One known cause is a '
             'draft graph replaying wrong inputs (e.g. garbage topk_index) without crashing; a draft that does not '
             'fit the target is another. Meaningless with random (dummy) weights.',
  'recommendation': 'Compare acceptance with {graphs_off} on the same prompts; a jump means the draft graph '
                    'replays wrong inputs.',
  'reference': 'sglang #15399, vLLM PR #52816'},
 {'name': 'dflash_draft_graph_disabled',
  'kind': 'info',
  'family': None,
  'severity': 'info',
  'match': ['Disable DFLASH draft cuda graph because'],
  'requires': [],
  'meaning': 'sglang chose to run the DFlash draft without a CUDA graph; the log line says why. Not a crash.',
  'recommendation': 'Expect slower drafting; if the reason is a config choice, change it to get the draft graph '
                    'back.',
  'reference': 'sglang DFlash worker (0.5.11+)'}]
