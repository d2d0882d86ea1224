"""TNL206 unguarded-sqrt-or-pow: rsqrt of a constant row's variance is rsqrt(0) = inf."""

from __future__ import annotations

from torchnumlint.runtime_check.context import FP32, Repro
from torchnumlint.runtime_check.repros.inputs import constant_row, put, randn

REPRO = Repro(
    "TNL206", "NF", "inv_std", FP32,
    adversarial=lambda ctx: put(ctx, x=constant_row(206, 3.0)),
    benign=randn("x", (4, 16), 2.0, 2061), grad=("x",),
    thresholds={"*": "4 x 16, row 1 constant (var 0: rsqrt(0) = inf), other rows randn"},
    note="float32 only: the fix's clamp_min(1e-12) rounds to 0 in float16 (TNL303's territory)",
)
