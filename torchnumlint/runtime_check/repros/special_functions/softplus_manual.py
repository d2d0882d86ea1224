"""TNL108 softplus-manual: `log(1 + exp(rho))` is Inf (gradient NaN) once exp overflows;
`F.softplus(rho)` is finite and equal where the original is finite.

Example 2 (`log1p(exp(neg - pos))` and `(-pos).exp().add(1).log()`, the log1p and method-chain
forms) is reproduced too: a margin past the overflow makes both means Inf."""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import PRECISION, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, lifted, put, rescaled, spanning
from torchnumlint.runtime_check.repros.special_functions.log_one_plus import log_one_plus

# exp(x) overflows from log(finfo.max): 88.72 in float32 and bfloat16, 11.09 in float16
# (measured on torch 2.13, CPU: log(1 + exp(88.8)) is Inf in float32, at 11.1 in float16).
EXP_OVERFLOW = {"float32": 88.72, "bfloat16": 88.72, "float16": 11.09}


def softplus(x: torch.Tensor) -> torch.Tensor:
    """ln(1 + e^x) by cases: x + ln(1 + e^-x) for x > 0, ln(1 + e^x) otherwise, so e^t is only
    taken of t <= 0 and ln(1 + u) of a small u keeps its precision. Each branch sees 0 where the
    other is selected, so the branch not taken has a finite gradient (ln(1 + e^40) by the atanh
    identity would be atanh(1) = inf, and 0 * inf = NaN through torch.where)."""
    positive = x > 0
    above, below = torch.where(positive, x, 0.0), torch.where(positive, 0.0, x)
    return torch.where(positive, above + log_one_plus(torch.exp(-above)), log_one_plus(torch.exp(below)))


def margin(pos: torch.Tensor, neg: torch.Tensor) -> torch.Tensor:
    """mean softplus(neg - pos) + mean softplus(-pos): a pairwise and a positive-only logistic loss."""
    return softplus(neg - pos).mean() + softplus(-pos).mean()


def adversarial(ctx: ReproContext) -> Inputs:
    limit = EXP_OVERFLOW[ctx.dtype_name]
    rho = torch.cat([torch.linspace(-5.0, 5.0, 11), torch.tensor([limit + 0.5, 2 * limit])])
    return put(ctx, rho=rho)


def benign_rho(ctx: ReproContext) -> Inputs:
    """rho of magnitude 1e-3 to 10, either sign: softplus from 4.5e-5 to 10, where a threshold or a
    clamp in the fix changes the values (exp(10) is finite in every dtype)."""
    return put(ctx, rho=spanning((64,), 1e-3, 10.0, 1081))


def overflowing_margin(ctx: ReproContext) -> Inputs:
    """pos, neg randn; entry 0 has pos = -(limit + 0.5): exp(-pos) and exp(neg - pos) overflow."""
    pos, neg = torch.randn(16, generator=gen(1082)), torch.randn(16, generator=gen(1083))
    pos[0] = -(EXP_OVERFLOW[ctx.dtype_name] + 0.5)
    return put(ctx, pos=pos, neg=neg)


def benign_margin(ctx: ReproContext) -> Inputs:
    """Scores of magnitude 1e-3 to 5, either sign: margins up to 10."""
    return put(ctx, pos=spanning((64,), 1e-3, 5.0, 1084), neg=spanning((64,), 1e-3, 5.0, 1085))


REPRO = Repro(
    "TNL108",
    "NF",
    "positive_scale",
    PRECISION,
    adversarial=adversarial,
    benign=benign_rho,
    grad=("rho",),
    reference=softplus,
    shapes=lifted(benign_rho) + rescaled(benign_rho, 1e-3),
    thresholds={d: f"rho in -5..5 plus {v + 0.5:g}, {2 * v:g} (exp overflows from {v:g} in {d})" for d, v in EXP_OVERFLOW.items()},
)

FURTHER = (
    Repro(
        "TNL108",
        "NF",
        "margin_loss",
        PRECISION,
        example=1,
        adversarial=overflowing_margin,
        benign=benign_margin,
        grad=("pos", "neg"),
        reference=margin,
        shapes=lifted(benign_margin) + rescaled(benign_margin, 1e-3),
        thresholds={
            d: f"16 pos, neg randn; pos[0] = {-(v + 0.5):g} (exp(-pos) overflows from {v:g} in {d})" for d, v in EXP_OVERFLOW.items()
        },
    ),
)
