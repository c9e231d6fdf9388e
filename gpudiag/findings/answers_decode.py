"""Q11-Q14: where each decode step goes, whether it is bandwidth-bound, what verifying the draft block costs and
where speculation stops paying, and what the collectives cost — per live server and per #running-req bucket of
its own decode lines, from the analysis decode_view computes once per host. Each answer's value holds the
sourced figures (`{v, src}`) and its sentence is rendered from that value."""

from __future__ import annotations

from typing import Any, Callable

from gpudiag.findings.answers import ANSWERED, PARTIAL, Answer, _not_checked, probe_gap
from gpudiag.findings.decode_server import ServerDecode
from gpudiag.findings.decode_view import host_decode
from gpudiag.models import HostResult

COMMAND = "gpudiag scan HOST --probes env,deployment"


def _v(figure: Any) -> Any:
    return figure.get("v") if isinstance(figure, dict) else figure


def _gb(value: float) -> str:
    return f"{value / 1e9:.3g} GB"


def _size(value: float) -> str:
    """Bytes in the unit that reads best: 14.3 kB, 29.4 MB, 1.2 GB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} B"


def _servers(host: HostResult, qid: str, speculative_only: bool = False) -> tuple[list[ServerDecode], Answer | None]:
    gap = probe_gap(host, "deployment", "--probes deployment")
    if gap:
        return [], _not_checked(qid, gap, COMMAND)
    analysed = host_decode(host)
    if speculative_only:
        analysed = [a for a in analysed if a.item.algorithm]
    if not analysed:
        what = "no live sglang server with speculative decoding" if speculative_only else "no live sglang server"
        return [], _not_checked(qid, what)
    if all(a.value is None for a in analysed):
        reasons = sorted({a.reason for a in analysed})
        return [], _not_checked(qid, "; ".join(reasons), COMMAND)
    if all(not a.value["buckets"] for a in analysed if a.value is not None):
        reasons = sorted({a.item.why or "no steady decode line with a throughput" for a in analysed})
        return [], _not_checked(qid, "no measured decode bucket: " + "; ".join(reasons), COMMAND)
    return analysed, None


# The per-bucket figures each question carries (Q11 carries them all).
BUCKET_KEYS = {
    "Q12": (
        "bucket",
        "mode",
        "running_req",
        "step_ms",
        "tokens",
        "experts_touched",
        "busiest_rank_experts",
        "bytes_per_gpu",
        "kv_bytes_per_gpu",
        "achieved_gbps",
        "mbu",
        "mbu_copy",
        "tflop_per_gpu",
        "mfu",
        "verdict",
    ),
    "Q13": ("bucket", "running_req", "accept_len", "gen_tps", "step_ms", "verify", "verdict"),
    "Q14": ("bucket", "mode", "running_req", "step_ms", "tokens", "collectives", "verdict"),
}


def _entry(found: ServerDecode, qid: str, keys: tuple[str, ...]) -> dict[str, Any]:
    if found.value is None:
        return {"server": found.item.label, "pid": found.item.server.get("pid"), "reason": found.reason}
    entry = {k: found.value[k] for k in ("server", "pid", "algorithm") + keys}
    if qid in BUCKET_KEYS:
        entry["buckets"] = [{k: b.get(k) for k in BUCKET_KEYS[qid]} for b in found.value["buckets"]]
    return entry


def _answer(qid: str, analysed: list[ServerDecode], keys: tuple[str, ...], text: Callable[[dict], str]) -> Answer:
    value = {"servers": [_entry(a, qid, keys) for a in analysed]}
    complete = all(a.value is not None and a.value["buckets"] for a in analysed)
    return Answer(qid, ANSWERED if complete else PARTIAL, text(value), COMMAND, value)


def _clauses(value: dict[str, Any], render: Callable[[dict[str, Any]], str]) -> str:
    parts = []
    for server in value["servers"]:
        if server.get("reason"):
            parts.append(f"{server['server']}: not checked — {server['reason']}")
        elif not server.get("buckets"):
            parts.append(f"{server['server']}: no measured decode bucket")
        else:
            parts.append(f"{server['server']}: {render(server)}")
    return "; ".join(parts)


def _mode(server: dict[str, Any]) -> str:
    return server["algorithm"] or "no speculation"


# Q11 ---------------------------------------------------------------------------------------------------------
def _q11_server(server: dict[str, Any]) -> str:
    cells = []
    for b in server["buckets"]:
        ms = b["model_ms"]
        draft = f", draft {ms['draft']:g}" if b["mode"] == "spec" else ""
        cells.append(
            f"#running-req {b['bucket']}: step {_v(b['step_ms']):g} ms = weights+KV {ms['mem']:g}, compute "
            f"{ms['compute']:g}, GPU-to-GPU {ms['comm']:g}{draft}, fixed {ms['fixed']:g} ({b['verdict']})"
        )
    return f"{_mode(server)}, " + ", ".join(cells)


def q11_text(value: dict[str, Any]) -> str:
    return _clauses(value, _q11_server) + " (ms per step; memory at effective bandwidth, model figures in the value)"


def q11_step_time(host: HostResult) -> Answer:
    analysed, gap = _servers(host, "Q11")
    if gap:
        return gap
    return _answer("Q11", analysed, ("model", "parallel", "gpu", "context_tokens", "graphs", "buckets"), q11_text)


# Q12 ---------------------------------------------------------------------------------------------------------
def _q12_server(server: dict[str, Any]) -> str:
    gpu = server["gpu"]
    copy = _v(gpu["bw_copy_gbps"])
    head = f"{_v(gpu['name'])}, {_v(gpu['bw_peak_gbps']):g} GB/s datasheet" + (
        f", {copy:g} GB/s measured copy" if copy else ", copy bandwidth not measured"
    )
    cells = [
        f"#running-req {b['bucket']}: {_gb(_v(b['bytes_per_gpu']))} per GPU per step, {_v(b['achieved_gbps']):g} GB/s "
        f"= {_v(b['mbu']):.0%} of peak, {_v(b['mfu']):.1%} of BF16 compute ({b['verdict']})"
        for b in server["buckets"]
    ]
    return f"{_mode(server)} ({head}): " + ", ".join(cells)


def q12_text(value: dict[str, Any]) -> str:
    return _clauses(value, _q12_server)


def q12_bandwidth(host: HostResult) -> Answer:
    analysed, gap = _servers(host, "Q12")
    if gap:
        return gap
    return _answer("Q12", analysed, ("model", "gpu", "context_tokens", "buckets"), q12_text)


# Q13 ---------------------------------------------------------------------------------------------------------
def _q13_server(server: dict[str, Any]) -> str:
    spec = server["speculation"]
    if spec.get("reason"):
        return spec["reason"]
    block = _v(spec["block"])
    cells = []
    for b in server["buckets"]:
        verify = b.get("verify") or {}
        amp = verify.get("expert_amplification")
        cells.append(
            f"#running-req {b['bucket']}: verify of {verify.get('tokens')} tokens {verify.get('ms'):g} ms + draft "
            f"{verify.get('draft_ms'):g} ms against a {verify.get('decode_ms'):g} ms decode step"
            + (f", up to {amp:g}× the experts" if amp else "")
        )
    pairs = []
    for p in spec["pairs"]:
        measured = f"measured {_v(p['s_meas']):.2f}× vs " if p.get("s_meas") else ""
        pairs.append(f"{p['bucket']}: {measured}predicted {_v(p['s_pred']):.2f}×" + (" (fit)" if p["fit"] else ""))
    even = _v(spec["break_even_running_req"])
    even_text = (
        "pays at every batch scanned"
        if even is None
        else ("never pays" if even == 0 else f"pays up to about {even} running requests")
    )
    out = (
        f"{server['algorithm']}, block {block}: "
        + "; ".join(cells)
        + "; speedup "
        + ", ".join(pairs)
        + f"; {even_text} (τ {_v(spec['tau']):g}, overhead fitted at #running-req {spec['fit']['bucket']}"
        + ("" if spec.get("baseline") else ", no baseline server: its overhead assumed")
        + ")"
    )
    what = spec["what_if"]
    if "block_size" in what:
        w = what["block_size"]
        out += (
            f"; block {w['block']} (τ {_v(w['tau']):g} at the same per-token acceptance): "
            f"{_v(w['s_pred_at_top']):.2f}× at the top bucket"
        )
    if "cap_running" in what:
        w = what["cap_running"]
        out += f"; capped at {w['cap']} running: {_v(w['spec_tps_pred']):g} vs {_v(w['base_tps_pred']):g} tok/s"
    graphs = what.get("cuda_graphs") or {}
    if "recoverable_ms" in graphs:
        out += (
            f"; CUDA graphs: at most {_v(graphs['recoverable_ms']):g} of {_v(graphs['of_step_ms']):g} ms per step "
            f"at the fit bucket, {_v(graphs['spec_tps_pred']):g} tok/s"
        )
    return out


def q13_text(value: dict[str, Any]) -> str:
    return _clauses(value, _q13_server)


def q13_speculation_cost(host: HostResult) -> Answer:
    analysed, gap = _servers(host, "Q13", speculative_only=True)
    if gap:
        return gap
    return _answer("Q13", analysed, ("speculation", "buckets"), q13_text)


# Q14 ---------------------------------------------------------------------------------------------------------
def _q14_server(server: dict[str, Any]) -> str:
    par = server["parallel"]
    if _v(par["tp"]) == 1:
        return "TP 1: no GPU-to-GPU collectives in the decode step"
    head = (
        f"TP {_v(par['tp'])}, EP {_v(par['ep'])} over {_v(par['link'])} ({par['link'].get('note')}), "
        f"bus bandwidth {_v(par['busbw_gbps']):g} GB/s and {_v(par['alpha_us']):g} µs per collective (assumed)"
    )
    cells = []
    for b in server["buckets"]:
        c = b["collectives"]
        cells.append(
            f"#running-req {b['bucket']}: {c['all_reduces']} all-reduces of {_size(c['all_reduce_bytes'])} and a "
            f"{_size(c['logits_gather_bytes'])} logits all-gather = {c['ms']:.3g} ms, {c['share']:.0%} of the step"
        )
    return f"{head}: " + ", ".join(cells)


def q14_text(value: dict[str, Any]) -> str:
    return _clauses(value, _q14_server)


def q14_collectives(host: HostResult) -> Answer:
    analysed, gap = _servers(host, "Q14")
    if gap:
        return gap
    return _answer("Q14", analysed, ("parallel", "buckets"), q14_text)
