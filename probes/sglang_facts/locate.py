"""Where sglang lives for the chosen interpreter, found without importing it.

The interpreter is the host's one choice, made by the caller (probes/hostinfo/interpreter.py: --python, else the
live server's, else the probing one). Another interpreter is asked for its sys.path in a child process; the package and its dist-info
are then looked up in those paths with PathFinder and a directory listing, editable installs included.
Eggs: a directory egg (`sglang-X.egg/` on the path, its metadata in EGG-INFO) is read like any copy; a zipped
egg (or any zip archive on the path) is recognised, its version read from the archive's PKG-INFO, and said
unreadable with why: the source facts are read from files on disk.
"""
import ast
import json
import os
import sys
import zipfile
from importlib.machinery import PathFinder

from probes.context import run_command
from probes.sglang_facts import ownership

PACKAGE = "sglang"
QUERY = ("import sys, json, site\n"
         "try:\n    user = site.getusersitepackages()\nexcept Exception:\n    user = None\n"
         "print(json.dumps({'path': sys.path, 'user_site': user, 'executable': sys.executable}))")


def same_interpreter(path):
    """Only the very same path: a venv's python links to the base binary yet has its own sys.path."""
    try:
        return os.path.abspath(path) == os.path.abspath(sys.executable)
    except (OSError, ValueError, TypeError):
        return False


def search_paths(interpreter, env_pythonpath=None, timeout=20.0):
    """(paths, error): the interpreter's sys.path as its server would see it.

    The probes run with -I, which drops PYTHONPATH and the user site; a server started normally
    sees both, so they are added back.
    """
    extra = [p for p in (env_pythonpath or os.environ.get("PYTHONPATH", "")).split(os.pathsep) if p]
    if same_interpreter(interpreter):
        paths, user = list(sys.path), _user_site()
    else:
        answer = run_command([interpreter, "-I", "-c", QUERY], timeout=timeout)
        if not answer["ok"]:
            return [], "could not ask %s for its sys.path: %s" % (interpreter, answer["error"])
        try:
            doc = json.loads(answer["stdout"].strip().splitlines()[-1])
        except (ValueError, IndexError):
            return [], "%s printed no sys.path" % interpreter
        paths, user = list(doc.get("path") or []), doc.get("user_site")
    paths = extra + [p for p in paths if p]
    if user and os.path.isdir(user):
        paths.append(user)
    seen, ordered = set(), []
    for path in paths:  # folders, and zip archives (zipped eggs), as the import system takes them
        if path not in seen and (os.path.isdir(path) or _is_zip(path)):
            seen.add(path)
            ordered.append(path)
    return ordered, None


def _user_site():
    try:
        import site
        return site.getusersitepackages()
    except Exception:
        return None


def find_package(paths):
    """The first sglang package in paths: {site_packages, package_dir, dist_info, editable, dist_infos} or None."""
    # As Python imports: every path entry first, then setuptools' editable finders, which are appended to
    # sys.meta_path after the path finder.
    for entry in paths:
        if not os.path.isdir(entry):
            zipped = zipped_copy(entry)
            if zipped:
                return zipped
            continue
        spec = PathFinder.find_spec(PACKAGE, [entry])
        if spec is not None and spec.submodule_search_locations:
            return describe_copy(list(spec.submodule_search_locations)[0], paths)
    for entry in paths:
        editable = editable_in(entry)
        if editable:
            return editable
    return None


def describe_copy(package_dir, paths):
    """The copy that imports and the one dist-info that belongs to it (None when none does).

    A dist-info elsewhere on the path, or one whose RECORD is another release's leftover, says nothing
    about this copy: its version and hashes would be another copy's. A copy no dist-info owns that sits
    in a git work tree (a checkout put on the path by a plain .pth file or PYTHONPATH) is checked with git.
    """
    site = os.path.dirname(package_dir)
    candidates = []
    for path in find_dist_infos([site] + list(paths)):
        candidates.append({"path": path, "belongs": ownership.belongs(path, package_dir)})
    owners = [c for c in candidates if c["belongs"]]
    chosen = ownership.best_owner(owners, site) if owners else None
    editable = None
    url = direct_url(chosen["path"]) if chosen else None
    if url:
        editable = {"path": url["dir"], "via": "direct_url"}
    elif chosen is None:
        checkout = ownership.git_work_tree(package_dir)
        if checkout:
            editable = {"path": checkout, "via": "git"}
    return {"site_packages": site, "package_dir": package_dir, "dist_info": chosen["path"] if chosen else None,
            "editable": editable, "dist_infos": candidates}


MAX_ZIP_MEMBERS = 100000
MAX_PKG_INFO = 65536


def _is_zip(path):
    try:
        return os.path.isfile(path) and zipfile.is_zipfile(path)
    except OSError:
        return False


def zipped_copy(archive):
    """An sglang package inside a zip archive on the path: where, its version, and why it is not read."""
    try:
        with zipfile.ZipFile(archive) as handle:
            names = handle.namelist()[:MAX_ZIP_MEMBERS]
            if PACKAGE + "/__init__.py" not in names:
                return None
            version = None
            if "EGG-INFO/PKG-INFO" in names and handle.getinfo("EGG-INFO/PKG-INFO").file_size <= MAX_PKG_INFO:
                for line in handle.read("EGG-INFO/PKG-INFO").decode("utf-8", "replace").splitlines():
                    if line.startswith("Version:"):
                        version = line.split(":", 1)[1].strip()
                        break
                    if not line.strip():
                        break
    except (OSError, zipfile.BadZipFile, KeyError, ValueError, RuntimeError):
        return None
    return {"zipped": archive, "version": version, "package_dir": None, "site_packages": None,
            "unreadable": "sglang is imported from the zip archive %s (a zipped egg); its sources are not read: "
                          "gpudiag reads an installed sglang from files on disk (reinstall it unzipped, "
                          "e.g. pip install sglang==%s, to check it)" % (archive, version or "VERSION")}


def find_dist_infos(paths):
    """Every sglang dist-info / egg-info directly inside the given folders (and a directory egg's EGG-INFO),
    each once, in path order."""
    found = []
    for folder in paths:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        egg_info = os.path.join(folder, "EGG-INFO")
        if os.path.basename(folder).lower().startswith(PACKAGE + "-") and folder.lower().endswith(".egg") \
                and os.path.isdir(egg_info) and egg_info not in found:
            found.append(egg_info)
        for name in names:
            base = name.lower()
            path = os.path.join(folder, name)
            if base.startswith(PACKAGE + "-") and base.endswith((".dist-info", ".egg-info")) and path not in found:
                found.append(path)
    return found


def editable_in(site):
    """An editable install recorded in a site directory: direct_url.json or a setuptools finder map.

    With several sglang dist-info folders in the site, the editable one (direct_url) is the install."""
    dists = find_dist_infos([site])
    if not dists:
        return None
    with_url = [(d, direct_url(d)) for d in dists if direct_url(d)]
    dist_info, url = with_url[0] if with_url else (dists[0], None)
    package_dir = finder_mapping(site) or (url and _package_under(url["dir"]))
    if not package_dir:
        return None
    return {"site_packages": os.path.dirname(package_dir), "package_dir": package_dir,
            "dist_info": dist_info, "dist_infos": [{"path": d, "belongs": "direct_url" if d == dist_info and url
                                                    else ("finder" if d == dist_info else None)} for d in dists],
            "editable": {"path": url["dir"] if url else os.path.dirname(package_dir),
                         "via": "direct_url" if url else "finder"}}


def direct_url(dist_info):
    try:
        with open(os.path.join(dist_info, "direct_url.json"), "rb") as handle:
            doc = json.loads(handle.read().decode("utf-8"))
    except (OSError, ValueError):
        return None
    url = doc.get("url") or ""
    if not url.startswith("file://") or not (doc.get("dir_info") or {}).get("editable"):
        return None
    return {"dir": url[len("file://"):], "url": url}


def finder_mapping(site):
    """setuptools' `__editable___*_finder.py` keeps MAPPING = {'sglang': '/checkout/python/sglang'}."""
    try:
        names = [n for n in os.listdir(site) if n.startswith("__editable__") and n.endswith("finder.py")]
    except OSError:
        return None
    for name in names:
        try:
            with open(os.path.join(site, name), "rb") as handle:
                tree = ast.parse(handle.read())
        except (OSError, SyntaxError, ValueError):
            continue
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "MAPPING" for t in node.targets):
                try:
                    mapping = ast.literal_eval(node.value)
                except ValueError:
                    continue
                if isinstance(mapping, dict) and os.path.isdir(mapping.get(PACKAGE, "")):
                    return mapping[PACKAGE]
    return None


def _package_under(checkout):
    """The sglang package inside a checkout (the repository keeps it under python/)."""
    for sub in ("", "python", "src"):
        candidate = os.path.join(checkout, sub, PACKAGE)
        if os.path.isfile(os.path.join(candidate, "__init__.py")):
            return candidate
    return None
