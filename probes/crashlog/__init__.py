"""Crash-log classification, shared by the host probe (live server logs) and `gpudiag repro --log`.

Standard library only and Python 3.9+, like every probe module: `classify(text)` turns a server log into
one of three outcomes (a known signature, an unclassified crash, clean), with a family for each crash.
"""
