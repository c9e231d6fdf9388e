"""Helpers of the cuda_graph probe: child isolation, the synthetic graph harness, the sglang launcher."""
