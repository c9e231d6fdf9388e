"""Which flag and variable names carry secrets, and argv with their values replaced, on the host.

Names are judged by their parts (`--db-pass`, `SGL_SECRETKEY`, `--tool-server-token`); values are hidden
whatever they look like (starting with `-`, several words, `--flag=value`), also inside shell-wrapped
launches (`bash -c "... --api-key X"`, `exec -a NAME ...`) and `NAME=value` assignments. URL userinfo
(`https://user:token@host`) is removed from every value.
"""
import re
import shlex

REDACTED = "<redacted>"
SHELLS = ("sh", "bash", "dash", "zsh", "ash", "ksh", "mksh", "fish", "tcsh", "csh")

# sglang 0.4.10-0.5.23 take secrets in --api-key, --admin-api-key, --ssl-keyfile-password and
# --watermark-config (an inline JSON object may hold the watermark keys).
SECRET_FLAGS = frozenset(("api_key", "admin_api_key", "ssl_keyfile_password", "watermark_config",
                          "watermark_key", "watermark_key_b"))
# A name part that is a secret wherever it stands.
SECRET_PARTS = frozenset(("secret", "secrets", "password", "passwords", "passwd", "passphrase", "credential",
                          "credentials", "cookie", "cookies", "auth", "hmac", "apikey", "privatekey", "private",
                          "pat"))
# Secrets as the last part only: `--db-pass`, `SGLANG_DB_PASS`, but `--forward-pass-metrics-...`.
LAST_PART_SECRETS = frozenset(("pass", "pw", "pwd", "key", "token", "session", "sessionid"))
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
                       r"signing|encryption|bearer|refresh|app|bot|service)"
                       r"(?:key|keys|token|tokens|pass|passwd|password|pw|pwd|secret)$")
_FLAG = re.compile(r"^--?[A-Za-z]")
_ASSIGNMENT = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)$", re.S)
_URL_CREDENTIALS = re.compile(r"(://)[^/@\s]+@")


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


def looks_secret_env(name):
    """Stricter for environment variables, which are dropped (not shown redacted): any key, token or
    session part counts, wherever it stands."""
    return looks_secret(name) or any(part in ("key", "token", "session")
                                     for part in name_parts(name))


def without_credentials(value):
    """`https://user:token@host/...` → `https://<redacted>@host/...`, in strings and lists of strings."""
    if isinstance(value, list):
        return [without_credentials(item) for item in value]
    if isinstance(value, str):
        return _URL_CREDENTIALS.sub(r"\1" + REDACTED + "@", value)
    return value


def _is_long_flag(word):
    return word.startswith("--") and len(word) > 2 and word[2] != "-"


def redact_argv(argv):
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
            out.append(redact_shell_command(word))
            continue
        if _is_long_flag(word) and looks_secret(word[2:].partition("=")[0]):
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
        out.append(without_credentials(word))
    return out


def redact_shell_command(text):
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
    redacted = redact_argv(words)
    if redacted == words:
        return without_credentials(text)
    return " ".join(w if w and set(w) <= set(";&|()<>") else shlex.quote(w) for w in redacted)


def _shell_command_follows(word):
    """`-c`, `-lc`, `-ec`…: the next word is a command string."""
    return word.startswith("-") and not word.startswith("--") and word.endswith("c")


def _basename(word):
    return word.rsplit("/", 1)[-1]
