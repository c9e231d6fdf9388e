"""Each live server's interpreter and the sglang it imports, read once per interpreter (servers that share a
Python share its facts), so a fact can name the servers (port, pid, GPUs) it describes.

Reading only: the interpreter is asked for its sys.path (a short child), the package is found on it and its
version read from the dist-info METADATA and the `__version__` literal. sglang is never imported.
"""
import os
import re

from probes.sglang_facts import locate, version

VERSION_FILES = ("version.py", "_version.py", "__init__.py")


def server_identity(server):
    """What names one server in a fact: pid, port, GPUs as it was told to use them."""
    args = server.get("args") or {}
    return {"pid": server.get("pid"), "port": args.get("port"), "gpus": server.get("cuda_visible_devices"),
            "tp_size": args.get("tp_size"), "speculative_algorithm": args.get("speculative_algorithm")}


def interpreters(servers, timeout=20.0):
    """[{path, servers: [identity], sglang: {...}}], one per distinct interpreter, in pid order."""
    groups = {}
    for server in sorted(servers, key=lambda s: s.get("pid") or 0):
        path = server.get("python")
        if not path:
            continue
        group = groups.setdefault(path, {"path": path, "servers": [], "pythonpath": None, "usable": True})
        group["servers"].append(server_identity(server))
        group["pythonpath"] = group["pythonpath"] or (server.get("env") or {}).get("PYTHONPATH")
        if not server.get("python_exists") or server.get("same_root") is False:
            group["usable"] = False
    out = []
    for group in groups.values():
        if group.pop("usable"):
            group["sglang"] = sglang_of(group["path"], group.pop("pythonpath"), timeout)
        else:
            group.pop("pythonpath")
            group["sglang"] = {"found": None, "reason": "interpreter not reachable from here (another container, "
                                                        "or it vanished)"}
        out.append(group)
    return out


def sglang_of(python, pythonpath, timeout):
    """{found, version, version_from, site_packages, package_dir} or {found: False|None, reason}."""
    paths, error = locate.search_paths(python, pythonpath, timeout=timeout)
    if error:
        return {"found": None, "reason": error}
    location = locate.find_package(paths)
    if location is not None and location.get("unreadable"):  # a zipped egg: where and which, but not read
        return {"found": None, "version": location.get("version"), "reason": location["unreadable"]}
    if location is None or not location.get("package_dir"):
        return {"found": False, "reason": "no sglang package in the %d import paths of %s" % (len(paths), python)}
    literal = version_literal(location["package_dir"])
    metadata = version.metadata_version(location.get("dist_info"))
    chosen = literal or (metadata or {}).get("version")
    return {"found": True, "version": chosen,
            "version_from": "literal" if literal else ("metadata" if metadata else None),
            "site_packages": location.get("site_packages"), "package_dir": location["package_dir"]}


def version_literal(package_dir):
    """The `__version__` literal of the package itself (a checkout without one has none)."""
    pattern = re.compile(version.LITERAL, re.M)
    for name in VERSION_FILES:
        try:
            with open(os.path.join(package_dir, name), "rb") as handle:
                found = pattern.search(handle.read(65536))
        except OSError:
            continue
        if found:
            return found.group(1).decode("utf-8", "replace")
    return None
