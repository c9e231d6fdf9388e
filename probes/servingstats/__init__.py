"""Serving figures of a live sglang server from its own log: decode and prefill lines parsed in every
release's format, grouped by concurrency. Stdlib only, Python 3.9; nothing here imports sglang."""
