"""The lines an sglang server prints when it is up, shared by the crash reader (a crash after them is not during
start-up) and the serving reader (a run of the server starts there when its launch line was lost): one pattern,
kept apart from both packages so neither imports the other for it. Standard library only (runs on hosts too)."""
import re

READY = re.compile(r"The server is fired up and ready to roll|Uvicorn running on|Application startup complete")
