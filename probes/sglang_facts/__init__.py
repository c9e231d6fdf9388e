"""Facts about an installed sglang, read from its source as bytes and AST; sglang is never imported.

Each module answers one question (where the package is, its version, the grouped copies, the EAGLE
runners, speculative decoding, graph runners, server flags, integrity) from a shared SourceTree.
"""
