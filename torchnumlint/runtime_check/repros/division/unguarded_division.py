"""TNL201 unguarded-division: standardising by a row's std is 0/0 = NaN on a constant row."""

from __future__ import annotations

from torchnumlint.runtime_check.context import FP32, Repro
from torchnumlint.runtime_check.repros.inputs import constant_row, put, randn

REPRO = Repro(
    "TNL201", "NF", "standardize", FP32,
    adversarial=lambda ctx: put(ctx, x=constant_row(201, 3.0)),
    benign=randn("x", (4, 16), 2.0, 2011), grad=("x",),
    thresholds={"*": "4 x 16, row 1 constant (std 0: 0/0 = NaN), other rows randn"},
    note="float32 only: the fix's clamp_min(1e-12) rounds to 0 in float16 (TNL303's territory)",
)
