"""TNL202 normalize-manual: `h / h.norm(...)` is 0/0 = NaN on an all-zero row; F.normalize clamps
the norm at eps."""

from __future__ import annotations

from torchnumlint.runtime_check.context import FP32, Repro
from torchnumlint.runtime_check.repros.inputs import constant_row, put, randn

REPRO = Repro(
    "TNL202", "NF", "unit_rows", FP32,
    adversarial=lambda ctx: put(ctx, x=constant_row(202, 0.0)),
    benign=randn("x", (4, 16), 2.0, 2021), grad=("x",),
    thresholds={"*": "4 x 16, row 1 all zeros (norm 0: 0/0 = NaN), other rows randn"},
    note="float32 only: F.normalize's default eps 1e-12 is 0 in float16 (TNL303's territory)",
)
