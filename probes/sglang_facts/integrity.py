"""Are the files the facts come from the ones the wheel installed? RECORD hashes, or git for a checkout."""
import base64
import hashlib
import os

from probes.context import run_command


def read_record(dist_info):
    """{path relative to site-packages: urlsafe-b64 sha256 without padding} from a dist-info RECORD."""
    record = {}
    try:
        with open(os.path.join(dist_info, "RECORD"), "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return None
    for line in text.splitlines():
        parts = line.rsplit(",", 2)
        if len(parts) == 3 and parts[1].startswith("sha256="):
            record[parts[0].strip('"')] = parts[1][len("sha256="):]
    return record


def file_digest(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii")


def check_record(site_packages, dist_info, files=None):
    """Hash the given files (all RECORD entries when files is None) against RECORD."""
    record = read_record(dist_info) if dist_info else None
    if record is None:
        return {"method": "unknown", "checked": 0, "modified": [], "missing": [], "unrecorded": [],
                "reason": "no RECORD with hashes in %s" % (dist_info or "any dist-info")}
    wanted = sorted(record) if files is None else sorted(set(files))
    modified, missing, unrecorded, checked = [], [], [], 0
    root = os.path.realpath(site_packages)
    for rel in wanted:
        expected = record.get(rel)
        if expected is None:
            unrecorded.append(rel)
            continue
        path = os.path.realpath(os.path.join(site_packages, rel))
        if not path.startswith(root + os.sep):
            continue  # scripts installed outside site-packages (../../bin)
        checked += 1
        try:
            if file_digest(path) != expected:
                modified.append(rel)
        except OSError:
            missing.append(rel)
    return {"method": "record", "checked": checked, "modified": modified, "missing": missing,
            "unrecorded": unrecorded, "record": os.path.basename(dist_info) + "/RECORD"}


def check_checkout(path, timeout=10.0):
    """Commit and local changes of an editable install's checkout, via git (each call time-limited)."""
    info = {"path": path, "commit": None, "dirty": None, "changed": [], "toplevel": None}
    head = run_command(["git", "-C", path, "rev-parse", "HEAD", "--show-toplevel"], timeout=timeout)
    if not head["ok"]:
        info["reason"] = "git rev-parse failed: %s" % head["error"]
        return info
    answer = head["stdout"].split()
    info["commit"] = answer[0] if answer else None
    info["toplevel"] = answer[1] if len(answer) > 1 else path
    status = run_command(["git", "-C", path, "status", "--porcelain"], timeout=timeout)
    if status["ok"]:
        # Porcelain paths are relative to the repository root (toplevel), whatever the -C folder.
        changed = [line[3:] for line in status["stdout"].splitlines() if len(line) > 3]
        info["dirty"] = bool(changed)
        info["changed"] = changed[:200]
    else:
        info["reason"] = "git status failed: %s" % status["error"]
    return info
