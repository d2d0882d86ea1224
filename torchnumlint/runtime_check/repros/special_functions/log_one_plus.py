"""TNL106 log-one-plus: `log(1 + x)` rounds `1 + x` first and is 0 for small x; `log1p(x)` is
right against a float64 reference."""

from __future__ import annotations

from torchnumlint.runtime_check.context import PRECISION, Repro
from torchnumlint.runtime_check.repros.inputs import ROUNDS_TO_ONE, below_rounding, randn

REPRO = Repro(
    "TNL106", "WV", "log_growth", PRECISION,
    adversarial=below_rounding("rate"), benign=randn("rate", (64,), 0.2, 1061),
    thresholds={d: f"rate from {v * 1e-3:.1e} to {v * 0.99:.1e} (1 + rate rounds to 1 below {v:g} in {d})"
                for d, v in ROUNDS_TO_ONE.items()},
)
