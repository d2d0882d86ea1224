"""TNL204 sqrt-of-sum-of-squares: the gradient of sqrt(sum(x**2)) is NaN at an all-zero row, and in
float16 the squares overflow; torch.linalg.vector_norm has neither problem."""

from __future__ import annotations

from torchnumlint.runtime_check.context import Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import constant_row, put, randn


def adversarial(ctx: ReproContext) -> Inputs:
    x = constant_row(204, 0.0)
    if ctx.dtype_name == "float16":
        x[2, ::2], x[2, 1::2] = 300.0, -300.0  # centred +-300: (+-300) ** 2 = 90000 overflows float16 (max 65504)
    return put(ctx, x=x)


REPRO = Repro(
    "TNL204", "NF", "embedding_norm_loss", ("float32", "float16"),
    adversarial=adversarial, benign=randn("x", (4, 16), 2.0, 2041), grad=("x",),
    thresholds={"float32": "4 x 16, row 1 all zeros (gradient of sqrt at 0), other rows randn",
                "float16": "4 x 16, row 1 all zeros, row 2 +-300 (x**2 overflows float16 above 255.9)"},
)
