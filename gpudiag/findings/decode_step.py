"""Findings on the decode step of each live server, from the one analysis decode_view computes (Q11-Q14 read the
same): what bounds a bucket (bandwidth, GPU-to-GPU communication, fixed overhead with graphs off), what verifying
a draft block costs in experts, where speculation is past its break-even, the latent KV cache replicated on every
TP rank, and running requests held at sglang's default cap for speculative servers. Thresholds are gpudiag.decode's
(docs/decode-model.md)."""

from __future__ import annotations

from typing import Any

from gpudiag.decode.roofline import BANDWIDTH, COMMUNICATION
from gpudiag.findings.common import source
from gpudiag.findings.decode_server import SPEC_CAPPED, SPEC_RUNNING_CAP, ServerDecode
from gpudiag.findings.decode_view import host_decode
from gpudiag.findings.server_flags import command_line, server_args
from gpudiag.models import Evidence, Finding, HostResult

OVERHEAD_GRAPHS_OFF = 0.3  # share of the step the model leaves unexplained, with decode graphs off
AMPLIFIES = 3.0  # verify reads this many times the experts of a decode step, or more
LOSES = 0.95  # measured speculative / baseline tok/s below this: speculation loses in the bucket


def _v(figure: Any) -> Any:
    return figure.get("v") if isinstance(figure, dict) else figure


def _finding(fid: str, severity: str, title: str, found: ServerDecode, texts: list[str], advice: str) -> Finding:
    host = found.item.host
    evidence = [
        Evidence(kind="measurement", host=host.name, text=texts[0], snippet=command_line(found.item.server) or None)
    ]
    evidence += [Evidence(kind="measurement", host=host.name, text=t) for t in texts[1:]]
    return Finding(fid, severity, title, (host.name,), tuple(evidence), advice, (source(host, "deployment"),))


def _bucket_line(found: ServerDecode, b: dict[str, Any]) -> str:
    ms = b["model_ms"]
    return (
        f"{found.item.label} #running-req {b['bucket']} ({b['mode']}): step {_v(b['step_ms'])} ms, "
        f"{_v(b['bytes_per_gpu']) / 1e9:.3g} GB per GPU = {_v(b['mbu']):.0%} of datasheet bandwidth; model ms: "
        f"memory {ms['mem']}, compute {ms['compute']}, GPU-to-GPU {ms['comm']}, draft {ms['draft']}, fixed {ms['fixed']}"
    )


def _analysed(hosts: list[HostResult]) -> list[ServerDecode]:
    return [a for h in hosts for a in host_decode(h) if a.value is not None]


def bound_buckets(hosts: list[HostResult]) -> list[Finding]:
    """Bandwidth-bound and communication-bound buckets, and fixed overhead with decode graphs off."""
    out = []
    for found in _analysed(hosts):
        value = found.value or {}
        gpu = value["gpu"]
        by_verdict: dict[str, list[dict[str, Any]]] = {}
        for b in value["buckets"]:
            by_verdict.setdefault(b["verdict"], []).append(b)
        if by_verdict.get(BANDWIDTH):
            names = ", ".join(b["bucket"] for b in by_verdict[BANDWIDTH])
            out.append(
                _finding(
                    "decode_step.bandwidth_bound",
                    "info",
                    f"decode is memory-bandwidth-bound at #running-req {names} ({_v(gpu['name'])}, "
                    f"{_v(gpu['bw_peak_gbps']):g} GB/s)",
                    found,
                    [_bucket_line(found, b) for b in by_verdict[BANDWIDTH]],
                    "More bandwidth per token is what helps here: quantized weights or KV cache, fewer bytes per "
                    "step; a faster interconnect or less fixed overhead would not.",
                )
            )
        if by_verdict.get(COMMUNICATION):
            names = ", ".join(b["bucket"] for b in by_verdict[COMMUNICATION])
            link = value["parallel"]
            out.append(
                _finding(
                    "decode_step.communication_bound",
                    "warning",
                    f"decode is bound by GPU-to-GPU collectives at #running-req {names} "
                    f"(TP {_v(link['tp'])} over {_v(link['link'])}, {_v(link['busbw_gbps']):g} GB/s assumed)",
                    found,
                    [_bucket_line(found, b) for b in by_verdict[COMMUNICATION]],
                    "The all-reduces and the logits all-gather grow with running requests × tokens per request: fewer "
                    "tokens per step (a smaller draft block, a cap on running requests) or a faster link helps; "
                    "memory bandwidth does not.",
                )
            )
        eager = [b for b in value["buckets"] if b["shares"]["fixed"] >= OVERHEAD_GRAPHS_OFF]
        if value["graphs"] == "off" and eager:
            out.append(
                _finding(
                    "decode_step.overhead_graphs_off",
                    "warning",
                    f"{eager[0]['shares']['fixed']:.0%} of the decode step at #running-req {eager[0]['bucket']} is "
                    "fixed overhead, with CUDA graphs off",
                    found,
                    [_bucket_line(found, b) for b in eager],
                    "Launch and host overhead is what CUDA graphs remove: find why graphs are off (Q4, Q6) before "
                    "tuning anything else.",
                )
            )
    return out


def speculation_costs(hosts: list[HostResult]) -> list[Finding]:
    """Verify amplifies experts; speculation past its break-even; running requests at sglang's default cap."""
    out = []
    for found in _analysed(hosts):
        value = found.value or {}
        if not value.get("algorithm"):
            continue
        amplified = [b for b in value["buckets"] if (b.get("verify") or {}).get("expert_amplification") or 0]
        amplified = [b for b in amplified if b["verify"]["expert_amplification"] >= AMPLIFIES]
        if amplified:
            b = max(amplified, key=lambda x: x["verify"]["expert_amplification"])
            out.append(
                _finding(
                    "decode_step.verify_amplifies_experts",
                    "info",
                    f"verifying a {b['verify']['tokens'] // int(_v(b['running_req']))}-token block reads up to "
                    f"{b['verify']['expert_amplification']:g}× the experts of a decode step at #running-req "
                    f"{b['bucket']}",
                    found,
                    [
                        f"{found.item.label}: {_v(b['experts_touched'])} of {_v(value['model']['experts'])} experts "
                        f"per layer touched by {b['verify']['tokens']} tokens (upper bound, uniform routing; "
                        "correlated routing touches fewer)"
                    ],
                    "Speculation on a sparse MoE pays less than its acceptance suggests at small batches: the verify "
                    "step reads more expert weights than decode does.",
                )
            )
        out += _past_break_even(found, value)
        out += _capped(found, value)
    return out


def _past_break_even(found: ServerDecode, value: dict[str, Any]) -> list[Finding]:
    spec = value["speculation"]
    if spec.get("reason"):
        return []
    even = _v(spec["break_even_running_req"])
    losing = [
        p
        for p in spec["pairs"]
        if (p.get("s_meas") and _v(p["s_meas"]) < LOSES) or (even is not None and _v(p["running_req"]) > even)
    ]
    if not losing:
        return []
    texts = [
        f"{found.item.label} #running-req {p['bucket']}: speedup "
        + (f"measured {_v(p['s_meas']):.2f}×, " if p.get("s_meas") else "")
        + f"predicted {_v(p['s_pred']):.2f}×"
        for p in losing
    ]
    texts.append(f"predicted break-even: {even} running requests ({spec['break_even_running_req'].get('note')})")
    return [
        _finding(
            "decode_step.past_break_even",
            "warning",
            f"speculation ({value['algorithm']}) is past its break-even at #running-req {losing[0]['bucket']}: "
            f"it pays up to about {even} running requests",
            found,
            texts,
            f"Cap running requests near {even} (--max-running-requests) or serve the high-concurrency traffic "
            "without speculation; a smaller draft block moves the break-even up (Q13 gives the figures).",
        )
    ]


def _capped(found: ServerDecode, value: dict[str, Any]) -> list[Finding]:
    args = server_args(found.item.server)
    if value["algorithm"] not in SPEC_CAPPED or args.get("max_running_requests"):
        return []
    if any(_v(b["running_req"]) > SPEC_RUNNING_CAP for b in value["buckets"]):
        return []  # the release did not cap it
    top = max((_v(b["running_req"]) for b in value["buckets"]), default=0)
    return [
        _finding(
            "decode_step.running_capped",
            "warning",
            f"running requests are capped at sglang's default of {SPEC_RUNNING_CAP} for {value['algorithm']} "
            "(--max-running-requests unset)",
            found,
            [f"{found.item.label}: highest #running-req in its decode lines {top}; no --max-running-requests"],
            "sglang resets an unset --max-running-requests to 48 for speculative algorithms: clients above that "
            "queue rather than batch. Set --max-running-requests if more concurrency should batch.",
        )
    ]


def kv_replicated(hosts: list[HostResult]) -> list[Finding]:
    """MLA's latent KV cache read whole by every TP rank (no DP attention)."""
    out = []
    for found in _analysed(hosts):
        value = found.value or {}
        if not value["model"]["kv_replicated_tp"]:
            continue
        tp = _v(value["parallel"]["tp"])
        per = _v(value["model"]["kv_bytes_per_token_per_gpu"])
        out.append(
            _finding(
                "decode_step.kv_replicated_across_tp",
                "info",
                f"every one of the {tp} TP ranks reads the whole MLA latent KV cache ({per:g} bytes per token per GPU)",
                found,
                [f"{found.item.label}: MLA model, TP {tp}, no --enable-dp-attention"],
                "DP attention splits the latent cache across ranks; DFLASH refuses DP attention, so with DFLASH this "
                "cost stays.",
            )
        )
    return out
