"""The flags a log shows its server running with: the true booleans of its last `server_args=ServerArgs(…)`
dump and the flags of its last `sglang.launch_server` command line, so that advice on a log read offline
never proposes what that server already ran with."""
import re

SERVER_ARGS = re.compile(r"server_args=ServerArgs\(([^\n]*)")
TRUE_ARG = re.compile(r"\b([a-z][a-z0-9_]*)=True\b")
COMMAND = re.compile(r"sglang\.launch_server\b([^\n]*)")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]+")
MAX_FLAGS = 200


def flags_in_log(whole):
    """Sorted `--flag` names the log's last start-up shows in use; [] when it shows none."""
    flags = set()
    dumps = [m.group(1) for m in SERVER_ARGS.finditer(whole)] if "ServerArgs(" in whole else []
    if dumps:
        flags.update("--" + name.replace("_", "-") for name in TRUE_ARG.findall(dumps[-1]))
    commands = [m.group(1) for m in COMMAND.finditer(whole)] if "launch_server" in whole else []
    if commands:
        flags.update(f.split("=", 1)[0] for f in FLAG.findall(commands[-1]))
    return sorted(flags)[:MAX_FLAGS]
