"""The cuda_graph probe's record of its sweeps: the labels a plan sweeps (replay paths in synthetic mode,
algorithms with sglang), the skipped cells of a plan that cannot run, a sweep's cells and boundary rows folded into
the probe's data, and the summary read from them (boundary sentences, the signatures seen and their advice).
"""
from probes.graphrepro import cells, specs, sweep


def planned_labels(settings, mode):
    """(label, algorithm, path) for each sweep: replay paths in synthetic mode, algorithms with sglang."""
    out, seen = [], set()
    for algorithm in settings["algorithms"]:
        if mode == "sglang":
            out.append((algorithm, algorithm, "sglang"))
            continue
        for path in specs.ALGORITHM_PATHS[algorithm]:
            if path not in seen:  # EAGLE3 replays the same buffers as EAGLE
                seen.add(path)
                out.append((path, algorithm, path))
    return out


def skipped_cells(settings, mode, reason):
    values = sweep.draft_token_values(*settings["draft_tokens"])
    return [cells.cell(path, algorithm, bs, values[-1], "skipped", reason, mode)
            for _, algorithm, path in planned_labels(settings, mode) for bs in settings["batch_sizes"]]


def absent_algorithm_cells(settings, algorithm, version, draft_tokens):
    """An algorithm the installed release does not have: its cells are skipped, never launched (argparse
    would reject it and every draft-token count would look like a failure)."""
    detail = "sglang %s has no %s" % (version or "(version unknown)", algorithm)
    return [cells.cell("sglang", algorithm, b, draft_tokens, "skipped", detail, "sglang")
            for b in settings["batch_sizes"]]


def record(data, label, result, mode):
    for cell in result["cells"]:
        cell.setdefault("path", label)
        cell.setdefault("mode", mode)
    data["cells"] += result["cells"]
    data["boundaries"].append({"label": label, "mode": mode, "rows": result["rows"]})


def summarise(data, where):
    """Boundary sentences, the signatures seen and their advice, deduplicated."""
    for entry in data["boundaries"]:
        entry.update(sweep.describe_boundary(entry["label"], entry["rows"], where))
    failing = [b for b in data["boundaries"] if b.get("failing_from_batch_size") is not None]
    data["boundary"] = (failing or data["boundaries"] or [None])[0]
    seen = {}
    for cell in data["cells"]:
        signature = cell.get("signature")
        if signature and signature.get("name") not in seen:   # with the release its advice is worded for
            seen[signature["name"]] = dict(signature, advice_assumes=cell.get("advice_assumes"))
    data["signatures"] = list(seen.values())
    data["advice"] = [s["recommendation"] for s in seen.values() if s.get("recommendation")]
