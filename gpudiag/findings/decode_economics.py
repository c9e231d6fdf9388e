"""The economics of one speculative server: its fixed overhead fitted at the lowest bucket (and its baseline's,
from a plain server of the same model on the same host, else assumed), measured against predicted speedup per
bucket, the break-even batch, and what a smaller block, a running-request cap or CUDA graphs would change."""

from __future__ import annotations

import statistics
from typing import Any

from gpudiag.decode.roofline import Setup
from gpudiag.decode.sourced import ASSUMED, CONFIG, MEASURED, fig, mix
from gpudiag.decode.speculation import acceptance_rate, break_even, fitted_overhead, predicted_step, speedup, tau_at
from gpudiag.findings.decode_server import ServerDecode
from gpudiag.findings.server_flags import server_args

F_BASE_ASSUMED_S = 1.5e-3  # fixed overhead of a graph-replayed decode step when no baseline was measured


def _model_key(found: ServerDecode) -> str:
    return str(server_args(found.item.server).get("model_path") or "").rstrip("/")


def economics(spec: ServerDecode, analysed: list[ServerDecode]) -> dict[str, Any]:
    """Fit, measured-vs-predicted speedup per bucket, break-even and what-ifs for one speculative server."""
    assert spec.setup is not None and spec.value is not None
    setup, value = spec.setup, spec.value
    block = int(value["speculation"]["block"]["v"])
    spec_buckets = [b for b in value["buckets"] if b["accept_len"] and b["accept_len"]["v"]]
    if not spec_buckets:
        return {"reason": "not checked — no decode line with an accept len"}
    base = next(
        (
            a
            for a in analysed
            if a is not spec and not a.item.algorithm and a.value is not None and _model_key(a) == _model_key(spec)
        ),
        None,
    )
    base_buckets = {b["bucket"]: b for b in (base.value["buckets"] if base and base.value else [])}
    lowest = spec_buckets[0]
    b_low = int(lowest["running_req"]["v"])
    f_spec = fitted_overhead(setup, b_low, block, lowest["step_ms"]["v"] / 1e3)
    if lowest["bucket"] in base_buckets:
        f_base = fitted_overhead(setup, b_low, 1, base_buckets[lowest["bucket"]]["step_ms"]["v"] / 1e3)
        f_base_fig = fig(round(f_base * 1e3, 2), MEASURED, f"fitted at #running-req {lowest['bucket']}")
    else:
        f_base = F_BASE_ASSUMED_S
        f_base_fig = fig(F_BASE_ASSUMED_S * 1e3, ASSUMED, "no baseline server of this model on the host")
    taus = [b["accept_len"]["v"] for b in spec_buckets]
    tau = statistics.median(taus)
    pairs = []
    for bucket in spec_buckets:
        b = int(bucket["running_req"]["v"])
        predicted = speedup(setup, b, block, bucket["accept_len"]["v"], f_base, f_spec)
        paired = base_buckets.get(bucket["bucket"])
        measured = bucket["gen_tps"]["v"] / paired["gen_tps"]["v"] if paired else None
        pairs.append(
            {
                "bucket": bucket["bucket"],
                "running_req": bucket["running_req"],
                "s_meas": fig(round(measured, 3), MEASURED) if measured else None,
                "s_pred": fig(round(predicted, 3), mix(CONFIG, ASSUMED, MEASURED)),
                "fit": bucket is lowest,
                "spec_tps_pred": round(b * bucket["accept_len"]["v"] / predicted_step(setup, b, block, f_spec), 1),
            }
        )
    even = break_even(setup, block, tau, f_base, f_spec)
    out: dict[str, Any] = {
        "baseline": base.item.label if base else None,
        "fit": {
            "bucket": lowest["bucket"],
            "f_spec_ms": fig(round(f_spec * 1e3, 2), MEASURED, f"fitted at #running-req {lowest['bucket']}"),
            "f_base_ms": f_base_fig,
        },
        "tau": fig(round(tau, 3), MEASURED, "median of the buckets' accept len"),
        "pairs": pairs,
        "break_even_running_req": fig(even, mix(CONFIG, ASSUMED, MEASURED), _even_note(even)),
        "what_if": _what_if(setup, block, tau, f_base, f_spec, spec_buckets, base, value, lowest),
    }
    return out


def _even_note(even: int | None) -> str:
    if even is None:
        return "pays at every batch up to 512 running requests"
    if even == 0:
        return "never pays at the measured acceptance"
    return "largest #running-req with predicted S ≥ 1, τ held at its median, F fitted at the lowest bucket"


def _what_if(
    setup: Setup,
    block: int,
    tau: float,
    f_base: float,
    f_spec: float,
    spec_buckets: list[dict[str, Any]],
    base: ServerDecode | None,
    value: dict[str, Any],
    lowest: dict[str, Any],
) -> dict[str, Any]:
    top = spec_buckets[-1]
    b_top = int(top["running_req"]["v"])
    out: dict[str, Any] = {}
    smaller = max(2, block // 2)
    alpha = acceptance_rate(tau, block)
    if alpha is not None and smaller < block:
        tau2 = tau_at(alpha, smaller)
        out["block_size"] = {
            "block": smaller,
            "alpha": fig(round(alpha, 3), mix(MEASURED, ASSUMED), "i.i.d. acceptance, inverted from τ"),
            "tau": fig(round(tau2, 2), mix(MEASURED, ASSUMED)),
            "s_pred_at_top": fig(round(speedup(setup, b_top, smaller, tau2, f_base, f_spec), 3), mix(CONFIG, ASSUMED)),
            "break_even_running_req": fig(break_even(setup, smaller, tau2, f_base, f_spec), mix(CONFIG, ASSUMED)),
        }
    even = break_even(setup, block, tau, f_base, f_spec)
    if even:
        cap_s = predicted_step(setup, even, block, f_spec)
        out["cap_running"] = {
            "cap": even,
            "spec_tps_pred": fig(round(even * tau / cap_s, 1), mix(CONFIG, ASSUMED, MEASURED)),
            "base_tps_pred": fig(
                round(even / predicted_step(setup, even, 1, f_base), 1), mix(CONFIG, ASSUMED, MEASURED)
            ),
        }
    base_graphs = base.value["graphs"] if base and base.value else "unknown"
    if value["graphs"] == "off" and base_graphs == "on" and f_spec > f_base:
        saved = f_spec - f_base
        b_low = int(lowest["running_req"]["v"])
        low_s = lowest["step_ms"]["v"] / 1e3
        out["cuda_graphs"] = {
            "recoverable_ms": fig(round(saved * 1e3, 2), MEASURED, "at most F_spec − F_base, at the fit bucket"),
            "of_step_ms": lowest["step_ms"],
            "spec_tps_pred": fig(round(b_low * lowest["accept_len"]["v"] / (low_s - saved), 1), mix(MEASURED, ASSUMED)),
        }
    else:
        out["cuda_graphs"] = {
            "reason": "not checked — "
            + (
                "the speculative server's decode lines ran with graphs"
                if value["graphs"] != "off"
                else "no baseline server with graphs on to fit a graph-replayed overhead against"
            )
        }
    return out
