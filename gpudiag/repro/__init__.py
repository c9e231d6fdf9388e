"""Control side of `gpudiag repro`: the crash-signature table, sweep planning and result summaries."""
