"""The probes gpudiag knows, their sets and what each reads from an earlier one.

One list for both sides: the runner orders and expands a selection with it, and the control side
(gpudiag/bundle.py) reads it to pack the modules a selection needs. Standard library only, no imports.
"""

# Light probes touch no GPU beyond torch_caps' few-kilobyte check on idle ones. deployment runs first: it
# makes the host's one interpreter choice (probes/hostinfo/interpreter.py), which every later probe follows.
LIGHT_PROBES = ("deployment", "env", "torch_caps", "sglang_source")
DEEP_PROBES = ("copy_bench", "cuda_graph")
ALL_PROBES = LIGHT_PROBES + DEEP_PROBES

# What a probe reads from an earlier one: the interpreter the live server uses (deployment), the release's
# field lists and definitions (sglang_source), the GPUs (env). Selecting a probe brings these along.
PROBE_NEEDS = {"env": ("deployment",), "torch_caps": ("deployment",), "sglang_source": ("deployment",),
               "copy_bench": ("sglang_source",), "cuda_graph": ("env", "sglang_source")}


def with_needs(probes, known=ALL_PROBES):
    """The probes and, transitively, what they read from, in run order; unknown names kept at the end."""
    wanted, pending = set(), list(probes)
    while pending:
        name = pending.pop()
        if name not in wanted:
            wanted.add(name)
            pending.extend(PROBE_NEEDS.get(name, ()))
    return [p for p in known if p in wanted] + [p for p in probes if p not in known]
