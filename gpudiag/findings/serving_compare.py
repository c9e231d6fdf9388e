"""Speculation against its baseline: live servers of the same model, some with speculative decoding and some
without, compared bucket by bucket (#running-req) on the median steady gen throughput of their own decode
lines. The comparison is computed once here (`compare`); gpudiag/findings/serving_fleet.py renders the finding
from it.

A comparison is only as honest as its twins are alike: what differs besides speculation (CUDA graphs on or off,
TP, DP, the sglang release, --max-running-requests, the GPU model) is named beside the verdict, and a bucket
where either server has lines but no figure (every line after idle, or no line at that concurrency) is said to
be not judged, never counted as paid."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from gpudiag.findings.dflash import server_gpus
from gpudiag.findings.serving_view import ServerFigures, graph_state, serving_figures
from gpudiag.findings.server_flags import server_args
from gpudiag.derived import remembered
from gpudiag.models import HostResult
from gpudiag.probe_view import as_dict
from probes.servingstats.buckets import BUCKET_NAMES

MAX_PAIRS = 8


def _tok_s(bucket: dict[str, Any]) -> float | None:
    value = bucket.get("median_gen_throughput")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


@dataclass(frozen=True)
class BucketRow:
    """One #running-req bucket where either server logged decode lines; the two figures, or why not judged."""

    bucket: str
    spec: dict[str, Any]
    base: dict[str, Any]

    @property
    def spec_tok_s(self) -> float | None:
        return _tok_s(self.spec)

    @property
    def baseline_tok_s(self) -> float | None:
        return _tok_s(self.base)

    @property
    def accept_len(self) -> float | None:
        value = self.spec.get("median_accept_len")
        return float(value) if isinstance(value, (int, float)) else None

    @property
    def ratio(self) -> float | None:
        spec, base = self.spec_tok_s, self.baseline_tok_s
        return spec / base if spec is not None and base is not None else None

    @property
    def few_sample(self) -> bool:
        return bool(self.spec.get("few_sample") or self.base.get("few_sample"))

    def why_not(self, spec_name: str) -> str:
        """Why this bucket has no ratio ('' when it has one)."""
        if self.ratio is not None:
            return ""
        parts = []
        for name, figures in ((spec_name, self.spec), ("baseline", self.base)):
            if not figures:
                parts.append(f"{name} logged no line at this concurrency")
            elif _tok_s(figures) is None:
                parts.append(
                    f"{name}'s {figures.get('count', 0)} lines give no figure ({figures.get('why') or 'no rate'})"
                )
        return "; ".join(parts)


@dataclass(frozen=True)
class Difference:
    """Something other than speculation that differs between the two servers; `explains` says how it can
    account for a throughput gap on its own ('' when it cannot)."""

    what: str
    spec: str
    base: str
    explains: str
    detail: str = ""  # what shows each side's value, when more than the value itself


@dataclass(frozen=True)
class Comparison:
    model: str
    spec: ServerFigures
    baseline: ServerFigures
    rows: tuple[BucketRow, ...]
    differences: tuple[Difference, ...]

    @property
    def judged(self) -> tuple[BucketRow, ...]:
        return tuple(r for r in self.rows if r.ratio is not None)

    @property
    def not_judged(self) -> tuple[BucketRow, ...]:
        return tuple(r for r in self.rows if r.ratio is None)

    @property
    def stops_paying(self) -> BucketRow | None:
        """The first bucket (by concurrency) judged where speculation is slower than the baseline."""
        return next((r for r in self.judged if (r.ratio or 0) < 1.0), None)

    @property
    def confounds(self) -> tuple[Difference, ...]:
        return tuple(d for d in self.differences if d.explains)

    def to_value(self) -> dict[str, Any]:
        loses = self.stops_paying
        return {
            "model": self.model,
            "spec": _who(self.spec),
            "baseline": _who(self.baseline),
            "buckets": [
                {
                    "bucket": r.bucket,
                    "spec_tok_s": r.spec_tok_s,
                    "baseline_tok_s": r.baseline_tok_s,
                    "ratio": round(r.ratio, 3) if r.ratio is not None else None,
                    "accept_len": r.accept_len,
                    "few_sample": r.few_sample,
                    "not_judged": r.why_not(self.spec.algorithm) or None,
                }
                for r in self.rows
            ],
            "stops_paying_at": loses.bucket if loses else None,
            "differences": [
                {
                    "what": d.what,
                    "spec": d.spec,
                    "baseline": d.base,
                    "explains": d.explains or None,
                    "detail": d.detail or None,
                }
                for d in self.differences
            ],
        }


def _who(item: ServerFigures) -> dict[str, Any]:
    return {"host": item.host.name, "pid": item.server.get("pid"), "algorithm": item.algorithm or None}


def model_of(item: ServerFigures) -> str:
    """The served model, by its last path part (one checkpoint under different mount points is one model)."""
    path = str(server_args(item.server).get("model_path") or server_args(item.server).get("model") or "")
    return os.path.basename(path.rstrip("/")) or ""


def _bucket(item: ServerFigures, name: str) -> dict[str, Any]:
    return as_dict(as_dict((item.figures or {}).get("buckets")).get(name))


def _parallel(item: ServerFigures, *keys: str) -> str:
    args = server_args(item.server)
    for key in keys:
        if args.get(key) not in (None, ""):
            return str(args[key])
    return "1"


def _release(item: ServerFigures) -> str:
    return ".".join(str(n) for n in item.release) if item.release else ""


def _gpu_model(item: ServerFigures) -> str:
    names = sorted({str(d.get("name")) for d in server_gpus(item.host, item.server) if d.get("name")})
    return " + ".join(names)


def differences(spec: ServerFigures, base: ServerFigures) -> tuple[Difference, ...]:
    """What differs between the two servers besides speculation, with how each can explain a gap."""
    out = []
    spec_graphs, base_graphs = graph_state(spec), graph_state(base)
    if spec_graphs[0] != base_graphs[0] and "unknown" not in (spec_graphs[0], base_graphs[0]):
        out.append(
            Difference(
                "CUDA graphs",
                spec_graphs[0],
                base_graphs[0],
                "decode without graphs pays a kernel launch per op per step (speculation's draft and verify "
                "steps most of all): the server without them can lose on that alone",
                f"{spec.algorithm} server {spec_graphs[1]}; baseline {base_graphs[1]}",
            )
        )
    pairs = (
        (
            "tensor parallel size",
            _parallel(spec, "tp_size", "tensor_parallel_size"),
            _parallel(base, "tp_size", "tensor_parallel_size"),
            "a different TP splits each step over a different number of GPUs",
        ),
        (
            "data parallel size",
            _parallel(spec, "dp_size", "data_parallel_size"),
            _parallel(base, "dp_size", "data_parallel_size"),
            "each DP rank logs its own share of the load",
        ),
        ("sglang release", _release(spec), _release(base), "releases ship different kernels and schedulers"),
        ("GPU model", _gpu_model(spec), _gpu_model(base), "different GPUs decode at different speeds"),
        (
            "--max-running-requests",
            str(server_args(spec.server).get("max_running_requests") or "not set"),
            str(server_args(base.server).get("max_running_requests") or "not set"),
            "a cap changes how the load queues at high concurrency",
        ),
    )
    for what, a, b, why in pairs:
        if a and b and a != b:
            out.append(Difference(what, a, b, why))
    return tuple(out)


def compare(hosts: list[HostResult]) -> list[Comparison]:
    """Every (speculative, baseline) pair of one model where both logged decode lines."""
    items = [i for h in hosts for i in decode_figures(h)]
    out = []
    for spec in (i for i in items if i.algorithm):
        for base in (i for i in items if not i.algorithm and model_of(i) == model_of(spec)):
            rows = tuple(
                BucketRow(name, _bucket(spec, name), _bucket(base, name))
                for name in BUCKET_NAMES
                if _bucket(spec, name) or _bucket(base, name)
            )
            if any(r.ratio is not None for r in rows):
                out.append(Comparison(model_of(spec), spec, base, rows, differences(spec, base)))
    return out[:MAX_PAIRS]


@remembered
def decode_figures(host: HostResult) -> list[ServerFigures]:
    """The host's live servers that logged decode lines of a known model (each keeps its host whole)."""
    return [i for i in serving_figures(host) if i.figures and model_of(i)]
