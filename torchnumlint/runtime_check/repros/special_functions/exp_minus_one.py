"""TNL107 exp-minus-one: `(exp(h) - 1) / h` is 0 instead of 1 for small steps h; `expm1(h) / h`
is right against a float64 reference."""

from __future__ import annotations

from torchnumlint.runtime_check.context import PRECISION, Repro
from torchnumlint.runtime_check.repros.inputs import ROUNDS_TO_ONE, below_rounding, randn

REPRO = Repro(
    "TNL107", "WV", "phi_1", PRECISION,
    adversarial=below_rounding("h"), benign=randn("h", (64,), 1.0, 1071),
    thresholds={d: f"h from {v * 1e-3:.1e} to {v * 0.99:.1e} (exp(h) rounds to 1 below {v:g} in {d})"
                for d, v in ROUNDS_TO_ONE.items()},
)
