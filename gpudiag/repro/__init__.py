"""Control side of `gpudiag repro`: plan parsing, result summaries, log runs and crash-log classification."""
