"""One synthetic cell's result as a cell of the cuda_graph probe: a failed one is classified by the crash-log
classifier from what the child left (its stderr, traceback, how it ended), as `repro --log` reads a log.
"""
from probes.crashlog.cell import cell_fields, classify_cell
from probes.graphrepro.cells import cell as new_cell

LOG_EXCERPT_LINES = 60   # the text the classifier read, for `repro --log` and the report


def failure_text(result):
    """What a failed synthetic cell left, in the order it was printed: the child's stderr, then its
    traceback (or the error line), then how the child ended."""
    parts = [result.get("log_tail") or ""]
    parts += [str(line) for line in result.get("traceback") or []] or [str(result.get("detail") or "")]
    if result.get("status") == "died":
        parts.append(str(result.get("detail") or ""))
    return "\n".join(p for p in parts if p)


def synthetic_cell(result, path, algorithm, batch_size, draft_tokens, release, known, worker):
    status = result.get("status")
    cell = new_cell(path, algorithm, batch_size, draft_tokens, status, result.get("detail", ""), "synthetic",
                    max_abs_diff=_number(result.get("max_abs_diff")), capture_s=_number(result.get("capture_s")),
                    memory_cap_mib=result.get("memory_cap_mib"), estimated_mib=result.get("estimated_mib"))
    status = cell["status"]
    if status in ("ok", "skipped"):
        return cell
    worker.close()  # the CUDA context may be poisoned: the next cell gets a fresh child
    if status == "mismatch":   # measured wrong numbers, not a crash: nothing to classify
        return cell
    text = failure_text(result)
    verdict = classify_cell(text, release, known)
    if status == "died" or verdict["family"] == "device_fault":
        status = "device_fault"  # a native crash of the child (SIGSEGV, SIGABRT) or a fault while it ran
    cell.update(cell_fields(verdict), status=status)
    cell["log_excerpt"] = text.strip().splitlines()[-LOG_EXCERPT_LINES:]
    return cell


def _number(value):
    """A figure the child reported, or None when it sent something else (the cell keeps its declared shape)."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
