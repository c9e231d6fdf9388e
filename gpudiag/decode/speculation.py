"""Speculation economics: the fixed per-step overhead fitted per mode at the lowest measured bucket, the
predicted step of each mode at any batch, the speedup S(B) = τ·T_base(B) / T_spec(B), the break-even running
requests, and what a smaller block, a cap on running requests or CUDA graphs would change.

Step model (Sequoia and MoESD use the same measured-cost shape): T(B) = max(mem, compute) + collectives (+ draft)
+ F, F fitted at the lowest bucket where the mode was measured (so the prediction there equals the measurement by
construction; every other bucket is predicted blind). Acceptance: for a chain of γ = block − 1 drafts with i.i.d.
acceptance α, τ = (1 − α^(γ+1)) / (1 − α) (Leviathan et al., https://arxiv.org/abs/2211.17192), inverted to
carry τ to another block size.
"""

from __future__ import annotations

from gpudiag.decode.roofline import Setup, step

SCAN = tuple(range(1, 17)) + tuple(range(20, 129, 4)) + tuple(range(136, 513, 8))


def fitted_overhead(setup: Setup, running: int, block: int, measured_s: float) -> float:
    """F: the measured step less what the model explains, at the fit bucket (≥ 0)."""
    return max(measured_s - step(setup, running, block).seconds, 0.0)


def predicted_step(setup: Setup, running: int, block: int, overhead_s: float) -> float:
    return step(setup, running, block).seconds + overhead_s


def speedup(setup: Setup, running: int, block: int, tau: float, f_base: float, f_spec: float) -> float:
    """Tokens per second with speculation over without, at `running` requests."""
    base = predicted_step(setup, running, 1, f_base)
    spec = predicted_step(setup, running, block, f_spec)
    return tau * base / spec


def break_even(setup: Setup, block: int, tau: float, f_base: float, f_spec: float, limit: int = 512) -> int | None:
    """The largest running-request count (scanned up to `limit`) at which speculation still pays (S ≥ 1); 0 when
    it never pays; None when it pays everywhere scanned."""
    paying = [b for b in SCAN if b <= limit and speedup(setup, b, block, tau, f_base, f_spec) >= 1]
    if not paying:
        return 0
    return None if paying[-1] == max(b for b in SCAN if b <= limit) else paying[-1]


def acceptance_rate(tau: float, block: int) -> float | None:
    """α such that (1 − α^block) / (1 − α) = τ (γ + 1 = block), by bisection; None outside (1, block)."""
    if not 1 < tau < block:
        return None
    low, high = 0.0, 1.0 - 1e-12
    for _ in range(100):
        mid = (low + high) / 2
        if (1 - mid**block) / (1 - mid) < tau:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def tau_at(alpha: float, block: int) -> float:
    return (1 - alpha**block) / (1 - alpha)
