"""Helpers of the copy_bench probe: workloads, copy strategies, timing and the isolated child.

Standard library only at import time; the modules that need torch import it inside their functions.
"""
