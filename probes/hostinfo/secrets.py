"""Which flag and variable names carry secrets, and argv with their values replaced, on the host.

Names are judged by their parts (`--db-pass`, `SGL_SECRETKEY`, `--tool-server-token`); values are hidden
whatever they look like (starting with `-`, several words, `--flag=value`), also inside shell-wrapped
launches (`bash -c "... --api-key X"`, `exec -a NAME ...`) and `NAME=value` assignments. Every other value
is judged by its shape (redact_value): JSON is parsed and redacted key by key, and credentials are hidden
whatever name carries them (URL userinfo, `Bearer`/`Basic` schemes, `sk-`/`hf_`/`ghp_`-style tokens, JWTs,
private keys, `name=value` pairs with secret names, long random-looking tokens).
"""
import json
import math
import re
import shlex

REDACTED = "<redacted>"
SHELLS = ("sh", "bash", "dash", "zsh", "ash", "ksh", "mksh", "fish", "tcsh", "csh")

# sglang 0.4.10-0.5.23 take secrets in --api-key, --admin-api-key, --ssl-keyfile-password and
# --watermark-config (an inline JSON object may hold the watermark keys).
SECRET_FLAGS = frozenset(("api_key", "admin_api_key", "ssl_keyfile_password", "watermark_config",
                          "watermark_key", "watermark_key_b"))
# Flags of their own that are also prefixes of a secret flag.
NOT_ABBREVIATIONS = frozenset(("ssl_keyfile",))
# A name part that is a secret wherever it stands.
SECRET_PARTS = frozenset(("secret", "secrets", "password", "passwords", "passwd", "passphrase", "credential",
                          "credentials", "cookie", "cookies", "auth", "hmac", "apikey", "privatekey", "private",
                          "pat", "license", "licence", "licensekey", "sk", "authorization", "bearer", "jwt"))
# Secrets as the last part only: `--db-pass`, `SGLANG_DB_PASS`, but `--forward-pass-metrics-...`.
LAST_PART_SECRETS = frozenset(("pass", "pw", "pwd", "key", "token", "session", "sessionid", "sig",
                               "signature"))
# ... unless they count or place something: `bucket_time_to_first_token`, `experts_per_token`.
NOT_SECRET_BEFORE_LAST = frozenset(("first", "last", "per", "next", "each", "special", "eos", "bos", "pad", "stop",
                                    "end", "start", "draft", "max", "min", "num", "image", "video", "audio",
                                    "mask", "sep", "unk", "cls", "forward", "backward", "single", "multi",
                                    "streaming", "sticky", "cache", "sort", "hash", "routing", "shard", "partition"))
# Switches (`--enable-streaming-session`) carry no value, so no secret.
SWITCH_PREFIXES = frozenset(("enable", "disable", "use", "no", "allow", "skip"))
# `key` and `token` inside a name, after a qualifier: `hf_token_value`, `api_key_b`.
SECRET_QUALIFIERS = frozenset(("api", "admin", "access", "secret", "private", "auth", "bearer", "refresh",
                               "session", "id", "hf", "hub", "github", "gh", "git", "gitlab", "wandb", "oauth",
                               "jwt", "client", "signing", "encryption", "hmac", "license", "watermark",
                               "personal"))
# Parts that only point at a secret (a file holding it): `--ssl-keyfile`, `--token-path` keep their values.
POINTER_PARTS = frozenset(("file", "path", "dir", "keyfile", "certfile", "map", "len", "length", "size", "id",
                           "ids", "limit", "num", "count", "budget", "usage", "type", "format", "template"))
# One word run together: SGL_SECRETKEY, DB_ROOTPASS, AUTHTOKEN.
_COMPOUND = re.compile(r"^(?:api|secret|private|access|auth|session|client|admin|hf|db|root|user|master|"
                       r"signing|encryption|bearer|refresh|app|bot|service|license|licence)"
                       r"(?:key|keys|token|tokens|pass|passwd|password|pw|pwd|secret)$")
_FLAG = re.compile(r"^--?[A-Za-z]")
_ASSIGNMENT = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)$", re.S)


def name_parts(name):
    return [part for part in re.split(r"[_\-.]+", name.strip().lower()) if part]


def looks_secret(name):
    """True for a flag or variable name that carries a secret: `api_key`, `HF_TOKEN`, `--db-pass`,
    `AWS_SECRET_ACCESS_KEY`, `SGL_SECRETKEY`; False for `max_total_tokens`, `tokenizer_path`,
    `speculative_token_map`, `ssl_keyfile`."""
    parts = name_parts(name.lstrip("-"))
    if not parts:
        return False
    if "_".join(parts) in SECRET_FLAGS:
        return True
    if parts[0] in SWITCH_PREFIXES:
        return False
    if any(part in SECRET_PARTS or _COMPOUND.match(part) for part in parts):
        return True
    if parts[-1] in LAST_PART_SECRETS and (len(parts) == 1 or parts[-2] not in NOT_SECRET_BEFORE_LAST):
        return True
    for number, part in enumerate(parts[:-1]):
        if part in ("key", "token") and number and parts[number - 1] in SECRET_QUALIFIERS \
                and parts[number + 1] not in POINTER_PARTS:
            return True
    return False


def secret_flag(name):
    """A flag name whose value is a secret, abbreviated or not: argparse takes any unique prefix of a long
    option (`--admin-api X` is `--admin-api-key X`), so a prefix of a secret flag counts too, except a
    flag of its own that it names exactly (`--ssl-keyfile` is a path)."""
    if looks_secret(name):
        return True
    short = "_".join(name_parts(name.lstrip("-")))
    if len(short) < 3 or short in NOT_ABBREVIATIONS:
        return False
    return any(flag.startswith(short) for flag in SECRET_FLAGS)


def looks_secret_env(name):
    """Stricter for environment variables, which are dropped (not shown redacted): any key, token or
    session part counts, wherever it stands."""
    return looks_secret(name) or any(part in ("key", "token", "session")
                                     for part in name_parts(name))


def without_credentials(value):
    """The value with every credential-shaped part hidden (redact_value), in strings, lists and dicts."""
    return redact_value(value)


# Credentials by shape, whatever their name. Hex digests are left alone: commit and snapshot hashes in
# model paths and versions are identifiers that diagnostics need.
_PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)", re.S)
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][\w+.-]*://)[^/\s@]*@")
# `Authorization: Token X`, `"authorization": "ApiKey X"`: whatever the scheme, the header's value goes.
_AUTH_HEADER = re.compile(r"""(?i)(?P<head>\b(?:proxy-)?authori[sz]ation["']?\s*(?:[:=]|,)\s*["']?)"""
                          r"""(?P<value>(?:[A-Za-z][\w-]*[ \t]+)?[^\s"',;]+)""")
# `--api-key X`, `--admin-api=X` anywhere in a text (an environment value, a log line).
_FLAG_IN_TEXT = re.compile(r"""(?<![\w-])(?P<flag>--?[A-Za-z][\w.-]*)(?P<sep>=|[ \t]+)"""
                           r"""(?P<value>"[^"]*"|'[^']*'|[^\s"',;]+)""")
# `password X`, `passphrase: X` in prose: the next word, unless it is one of prose's own.
_PASSWORD_WORD = re.compile(r"(?i)\b(?P<name>password|passwd|passphrase)(?P<sep>\s*[:=]?\s+)(?P<value>[^\s,;]+)")
_PROSE = frozenset(("for", "of", "is", "was", "to", "the", "a", "an", "and", "or", "not", "in", "on", "must",
                    "cannot", "can", "has", "have", "does", "did", "will", "should", "with", "from", "by", "set",
                    "changed", "required", "incorrect", "wrong", "invalid", "expired", "authentication", REDACTED))
_AUTH_SCHEME = re.compile(r"(?i)\b(?P<scheme>bearer|basic|digest|negotiate)(?P<sep>\s+|%20)[A-Za-z0-9._~+/=:-]{6,}")
_TOKEN_SHAPES = re.compile(
    r"\b(?:(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}|hf_[A-Za-z0-9]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}"
    r"|glpat-[\w-]{16,}|xox[abposr]-[\w-]{10,}|(?:AKIA|ASIA)[0-9A-Z]{16}|AIza[\w-]{30,}|ya29\.[\w-]{20,}"
    r"|npm_[A-Za-z0-9]{30,}|pypi-[\w-]{30,}|eyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]*)")
# `name=value` or `name: value` inside a value; a value never runs into the next `name=`.
_PAIR = re.compile(r"""(?<![\w.-])(?P<name>[A-Za-z_][\w.-]*)(?P<sep>\s*[=:]\s*)"""
                   r"""(?P<value>"[^"]*"|'[^']*'|[^\s&,;"'?=]+(?![^\s&,;"'?=]*=))""")
_CANDIDATE = re.compile(r"[A-Za-z0-9+/_=-]{24,}")
_HEX_ID = re.compile(r"(?:[A-Za-z]+-)*[0-9a-fA-F-]+(?:/[0-9]+)*")


def redact_value(value):
    """A value from a host with credentials hidden: strings by shape, JSON text key by key, lists and
    dicts item by item (a dict's secret-named keys lose their values)."""
    if isinstance(value, list):
        if len(value) == 2 and all(isinstance(item, str) for item in value) and _names_secret(value[0]):
            return [value[0], REDACTED]  # a header as a [name, value] pair: ["Authorization", "Bearer x"]
        return [redact_value(item) for item in value]
    if isinstance(value, dict):
        return {key: REDACTED if _secret_entry(key, item) else redact_value(item) for key, item in value.items()}
    if not isinstance(value, str):
        return value
    parsed = _as_json(value)
    if parsed is not None:
        redacted = redact_value(parsed)
        return value if redacted == parsed else json.dumps(redacted)
    return _redact_text(value)


def _names_secret(name):
    return looks_secret(name) or name_parts(name)[-1:] in (["authorization"], ["signature"])


def _secret_entry(key, item):
    """A JSON entry whose name carries a secret; a switch (true/false) or null holds none."""
    return isinstance(key, str) and looks_secret(key) and not (isinstance(item, bool) or item is None)


def _as_json(text):
    if not text.lstrip().startswith(("{", "[")):
        return None
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return parsed if isinstance(parsed, (dict, list)) else None


def _redact_text(text):
    text = _URL_USERINFO.sub(lambda m: m.group("scheme") + REDACTED + "@", text)
    text = redact_shapes(text)
    return _PAIR.sub(lambda m: m.group("name") + m.group("sep") + REDACTED
                     if looks_secret(m.group("name")) and m.group("value") != REDACTED else m.group(0), text)


def redact_shapes(text):
    """Private keys, URL userinfo, `Authorization` values of any scheme, `Bearer`/`Basic` credentials, the
    values of secret flags (`--api-key X`, abbreviated too) and of `password X`, known token shapes and
    random-looking tokens hidden."""
    text = _PRIVATE_KEY.sub(REDACTED, text)
    text = _URL_USERINFO.sub(lambda m: m.group("scheme") + REDACTED + "@", text)
    text = _AUTH_HEADER.sub(lambda m: m.group("head") + REDACTED, text)
    text = _FLAG_IN_TEXT.sub(_hide_flag_value, text)
    text = _PASSWORD_WORD.sub(lambda m: m.group(0) if m.group("value").lower().strip("\"'") in _PROSE
                              else m.group("name") + m.group("sep") + REDACTED, text)
    text = _AUTH_SCHEME.sub(lambda m: m.group("scheme") + m.group("sep") + REDACTED, text)
    text = _TOKEN_SHAPES.sub(REDACTED, text)
    return _CANDIDATE.sub(lambda m: REDACTED if random_looking(m.group(0)) else m.group(0), text)


def _hide_flag_value(match):
    value = match.group("value")
    if not secret_flag(match.group("flag")) or value.startswith("-") or value == REDACTED:
        return match.group(0)
    return match.group("flag") + match.group("sep") + REDACTED


def random_looking(word):
    """A long token that reads as random: upper, lower and digits mixed in short runs, with high entropy
    (a key or a base64 secret); words, paths and model names run in longer same-class stretches."""
    if _HEX_ID.fullmatch(word):  # GPU-/MIG- UUIDs, digests: identifiers, not secrets
        return False
    classes = ["u" if c.isupper() else "l" if c.islower() else "d" for c in word if c.isalnum()]
    if not {"u", "l", "d"} <= set(classes):
        return False
    runs = 1 + sum(1 for a, b in zip(classes, classes[1:]) if a != b)  # separators do not break a run
    counts = {c: word.count(c) for c in set(word)}
    entropy = -sum(n / len(word) * math.log2(n / len(word)) for n in counts.values())
    return len(classes) / runs <= 2.2 and entropy >= 3.8


def _is_long_flag(word):
    return word.startswith("--") and len(word) > 2 and word[2] != "-"


def redact_argv(argv, depth=0):
    """The command line with secret values replaced: `--api-key X`, `--hf-token=X`, `--db-pass -x y`
    (every word up to the next `--flag`), `HF_TOKEN=x`, and shell command strings (`bash -c "…"`)."""
    out, hiding = [], False
    shell = bool(argv) and _basename(argv[0]) in SHELLS
    for index, word in enumerate(argv):
        if hiding and not _is_long_flag(word):
            out.append(REDACTED)
            continue
        hiding = False
        if shell and index and _shell_command_follows(argv[index - 1]):
            out.append(redact_shell_command(word, depth + 1))
            continue
        if _is_long_flag(word) and secret_flag(word[2:].partition("=")[0]):
            name, eq, _ = word.partition("=")
            if eq:
                out.append(name + "=" + REDACTED)
                continue
            out.append(word)
            hiding = True
            continue
        assignment = _ASSIGNMENT.match(word)
        if assignment and looks_secret_env(assignment.group("name")):
            out.append(assignment.group("name") + "=" + REDACTED)
            continue
        if depth < 4 and re.search(r"\s-", word):  # one word holding a command line: `exec -a "x --api-key K"`
            out.append(redact_shell_command(word, depth + 1))
            continue
        out.append(without_credentials(word))
    return out


def redact_shell_command(text, depth=0):
    """A shell command string with every word redacted as argv is; a string the shell lexer cannot
    split is hidden whole when it names anything secret-looking."""
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        words = None
    if words is None:
        names = re.findall(r"[A-Za-z_][A-Za-z0-9_-]*", text)
        return REDACTED if any(looks_secret_env(n) for n in names) else without_credentials(text)
    redacted = redact_argv(words, depth)
    if redacted == words:
        return without_credentials(text)
    return " ".join(w if w and set(w) <= set(";&|()<>") else shlex.quote(w) for w in redacted)


def _shell_command_follows(word):
    """`-c`, `-lc`, `-ec`…: the next word is a command string."""
    return word.startswith("-") and not word.startswith("--") and word.endswith("c")


def _basename(word):
    return word.rsplit("/", 1)[-1]
