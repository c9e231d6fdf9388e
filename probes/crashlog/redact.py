"""Redacts secrets in quoted log lines before they leave the host: values of flags and keyword arguments
whose names look secret (the same rule as server command lines), URL credentials, bearer tokens and
credential shapes (the same rule as server flag values)."""
import re

from probes.hostinfo.secrets import redact_shapes
from probes.hostinfo.sglang_cmdline import REDACTED, looks_secret

ASSIGNMENT = re.compile(r"""(?P<name>--?[A-Za-z][\w-]*|\b[A-Za-z_][\w]*|"[A-Za-z_][\w-]*")(?P<sep>\s*[=:]\s*|\s+)"""
                        r"""(?P<value>'[^']*'|"[^"]*"|[^\s,()}\]=]+)""")
URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][\w+.-]*://)[^/\s:@]+(:[^/\s@]*)?@")
BEARER = re.compile(r"(?i)\b(bearer|token)\s+[A-Za-z0-9._~+/=-]{12,}")


def redact_line(text):
    text = URL_CREDENTIALS.sub(lambda m: m.group("scheme") + REDACTED + "@", text)
    text = BEARER.sub(lambda m: m.group(1) + " " + REDACTED, text)
    text = redact_shapes(text)  # keys, JWTs and random-looking tokens, whatever names them

    def replace(match):
        name = match.group("name").strip('"').lstrip("-")
        if match.group("sep").strip() == "" and not match.group("name").startswith("-"):
            return match.group(0)         # "word word": only flags take a value after a space
        if not looks_secret(name):
            return match.group(0)
        return match.group("name") + match.group("sep") + REDACTED
    return ASSIGNMENT.sub(replace, text)
