"""What a `repro cuda-graph-crash` run will try: parsed, validated options and the probe options they become."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

ALGORITHMS = ("EAGLE", "EAGLE3", "DFLASH")
MODES = ("auto", "sglang", "synthetic", "both")
MAX_DRAFT_TOKENS = 64
MAX_BATCH_SIZE = 4096  # far above any captured CUDA-graph batch size; more is a typo
DEFAULT_MAX_MEM_MIB = 4096  # the synthetic harness's allocator cap per child


class PlanError(ValueError):
    """An option value that cannot be used; the message names the option."""


def parse_model_override(text: str | None) -> dict[str, Any] | None:
    """--model-override JSON → dict; it goes to --json-model-override-args (target and, in 0.5.x, draft)."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanError(f"--model-override: not valid JSON: {exc.msg} at char {exc.pos}") from None
    if not isinstance(value, dict):
        raise PlanError("--model-override: expected a JSON object, e.g. '{\"max_position_embeddings\": 4096}'")
    return value


def parse_algorithms(text: str) -> tuple[str, ...]:
    names = [p.strip().upper() for p in text.split(",") if p.strip()]
    if not names or names == ["ALL"]:
        return ALGORITHMS
    unknown = [n for n in names if n not in ALGORITHMS]
    if unknown:
        raise PlanError(f"--algorithm: unknown {', '.join(unknown)} (known: {', '.join(ALGORITHMS)}, all)")
    return tuple(dict.fromkeys(names))


def parse_batch_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = sorted({int(p) for p in text.split(",") if p.strip()})
    except ValueError:
        raise PlanError(f"--batch-sizes {text!r}: expected comma-separated integers like 1,4,16,64") from None
    if not sizes or sizes[0] < 1 or sizes[-1] > MAX_BATCH_SIZE:
        raise PlanError(f"--batch-sizes {text!r}: batch sizes must be positive integers up to {MAX_BATCH_SIZE}")
    return tuple(sizes)


def parse_draft_tokens(text: str) -> tuple[int, int]:
    """'2-16' → (2, 16); '8' → (8, 8)."""
    low, sep, high = text.partition("-")
    try:
        lo, hi = int(low), int(high) if sep else int(low)
    except ValueError:
        raise PlanError(f"--draft-tokens {text!r}: expected N or LOW-HIGH, e.g. 2-16") from None
    if not 1 <= lo <= hi <= MAX_DRAFT_TOKENS:
        raise PlanError(f"--draft-tokens {text!r}: need 1 <= LOW <= HIGH <= {MAX_DRAFT_TOKENS}")
    return lo, hi


@dataclass(frozen=True)
class ReproPlan:
    algorithms: tuple[str, ...] = ALGORITHMS
    # None: the live server's (its largest captured batch size, draft tokens, TP), else the probe's default.
    batch_sizes: tuple[int, ...] | None = None
    draft_tokens: tuple[int, int] | None = None
    layers: int = 2
    tp: int | None = None
    topk: int = 1
    mode: str = "auto"
    model: str | None = None
    draft_model: str | None = None
    force: bool = False
    cell_timeout: float = 120.0
    model_override: dict[str, Any] | None = None
    judge_acceptance: bool = False
    max_mem_mib: int = DEFAULT_MAX_MEM_MIB
    plan_only: bool = False  # --plan: list the launches, start nothing

    def probe_options(self) -> dict[str, Any]:
        """The cuda_graph probe's options; an unset value is left out so the probe takes the live server's."""
        options = {
            "algorithms": list(self.algorithms),
            "batch_sizes": list(self.batch_sizes) if self.batch_sizes else None,
            "draft_tokens": list(self.draft_tokens) if self.draft_tokens else None,
            "layers": self.layers,
            "tp": self.tp,
            "topk": self.topk,
            "mode": self.mode,
            "model": self.model,
            "draft_model": self.draft_model,
            "force": self.force,
            "cell_timeout": self.cell_timeout,
            "model_override": self.model_override,
            "judge_acceptance": self.judge_acceptance,
            "max_mem_mib": self.max_mem_mib,
            "plan": self.plan_only or None,
        }
        return {key: value for key, value in options.items() if value is not None}

    def to_dict(self) -> dict[str, Any]:
        return self.probe_options()

    def request_options(self) -> dict[str, Any]:
        """Every probe's options for the run; --plan touches no GPU, so env skips its torch.cuda query too."""
        options: dict[str, Any] = {"cuda_graph": self.probe_options(), "force": self.force}
        if self.plan_only:
            options["env"] = {"torch": False}
        return options


def from_options(
    algorithm: str, batch_sizes: str | None, draft_tokens: str | None, model_override: str | None, **plain: Any
) -> ReproPlan:
    """The plan from the command line's text options (parsed here, PlanError on a bad one) and plain values;
    unset sizes and draft tokens stay None for the live server's."""
    return ReproPlan(
        algorithms=parse_algorithms(algorithm),
        batch_sizes=parse_batch_sizes(batch_sizes) if batch_sizes else None,
        draft_tokens=parse_draft_tokens(draft_tokens) if draft_tokens else None,
        model_override=parse_model_override(model_override),
        **plain,
    )
