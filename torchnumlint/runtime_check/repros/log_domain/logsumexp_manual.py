"""TNL109 logsumexp-manual: `-log(exp(-e).sum(-1))` is -inf (and its gradient NaN) once every
energy of a row is past the point where exp underflows to 0; torch.logsumexp stays finite.

Examples 2 (`log(mean(exp(t)))`, the MINE bound: exp overflows) and 3 (`log(exp(a) + exp(b))`,
a mixture of log-probabilities: both exps underflow) are reproduced too."""

from __future__ import annotations

import math

import torch

from torchnumlint.runtime_check.context import PRECISION, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, lifted, put, rescaled, spanning

# energies from which exp(-e) is exactly 0, measured on torch 2.13 (CPU): 103.98 fp32, 93.0 bf16,
# 17.34 fp16; row 0 sits just past it (log 0 = -inf there, logsumexp -101.7 / -90.5 / -15.0)
UNDERFLOW_ENERGY = {"float32": 104.0, "bfloat16": 94.0, "float16": 17.5}
# exp(t) is Inf from 88.72 fp32, 89.0 bf16, 11.09 fp16 (measured, torch 2.13 CPU)
EXP_OVERFLOW = {"float32": 88.75, "bfloat16": 89.0, "float16": 11.1}


def log_sum_exp(x: torch.Tensor, dim: int, keepdim: bool = False) -> torch.Tensor:
    """ln sum_j e^(x_j) along `dim`, written as m + ln sum_j e^(x_j - m) with m the largest x_j
    (an identity for any constant m, hence detached): no term exceeds 1 and the largest is 1."""
    top = x.detach().amax(dim, keepdim=True)
    out = top + torch.log(torch.exp(x - top).sum(dim, keepdim=True))
    return out if keepdim else out.squeeze(dim)


def free_energy(energies: torch.Tensor) -> torch.Tensor:
    """F = -ln sum_j e^(-E_j) over the last dimension: the free energy of a row of energies."""
    return -log_sum_exp(-energies, -1)


def mine_bound(t_joint: torch.Tensor, t_marginal: torch.Tensor) -> torch.Tensor:
    """The MINE (Donsker-Varadhan) bound E_joint[T] - ln E_marginal[e^T], the mean over dim 0:
    ln mean_i e^(t_i) = ln sum_i e^(t_i) - ln n."""
    return t_joint.mean() - (log_sum_exp(t_marginal, 0) - math.log(t_marginal.shape[0]))


def log_mixture(log_a: torch.Tensor, log_b: torch.Tensor) -> torch.Tensor:
    """ln(a + b) from ln a and ln b: the log-sum-exp of the pair."""
    return log_sum_exp(torch.stack([log_a, log_b]), 0)


def adversarial(ctx: ReproContext) -> Inputs:
    energies = torch.randn(4, 10, generator=gen(109))
    energies[0] = UNDERFLOW_ENERGY[ctx.dtype_name] + torch.rand(10, generator=gen(1090))
    return put(ctx, energies=energies)


def benign_energies(ctx: ReproContext) -> Inputs:
    """Energies of magnitude 1e-3 to 10, either sign (exp(10) is finite in float16): row sums of
    e^-E from 9.0 to 1.1e3, where an eps or a clamp in the fix changes the values."""
    return put(ctx, energies=spanning((4, 10), 1e-3, 10.0, 1091))


def overflowing_critic(ctx: ReproContext) -> Inputs:
    """16 x 3 critic scores, randn; t_marginal[0, 0] just past exp's overflow."""
    t_joint, t_marginal = torch.randn(16, 3, generator=gen(1092)), torch.randn(16, 3, generator=gen(1093))
    t_marginal[0, 0] = EXP_OVERFLOW[ctx.dtype_name] + 0.5
    return put(ctx, t_joint=t_joint, t_marginal=t_marginal)


def benign_critic(ctx: ReproContext) -> Inputs:
    """Critic scores of magnitude 1e-3 to 8, either sign: column means of e^t from 1.2 to 44."""
    return put(ctx, t_joint=spanning((16, 3), 1e-3, 8.0, 1094), t_marginal=spanning((16, 3), 1e-3, 8.0, 1095))


def underflowing_mixture(ctx: ReproContext) -> Inputs:
    """16 log-probabilities each, -3 * rand; entries 0-3 of both past exp's underflow."""
    log_a, log_b = -3 * torch.rand(16, generator=gen(1096)), -3 * torch.rand(16, generator=gen(1097))
    log_a[:4] -= UNDERFLOW_ENERGY[ctx.dtype_name]
    log_b[:4] -= UNDERFLOW_ENERGY[ctx.dtype_name]
    return put(ctx, log_a=log_a, log_b=log_b)


def benign_mixture(ctx: ReproContext) -> Inputs:
    """Log-probabilities from -1e-3 to -10: probabilities from 4.5e-5 to nearly 1."""
    return put(ctx, log_a=-spanning((16,), 1e-3, 10.0, 1098, signed=False), log_b=-spanning((16,), 1e-3, 10.0, 1099, signed=False))


REPRO = Repro(
    "TNL109",
    "NF",
    "free_energy",
    PRECISION,
    adversarial=adversarial,
    benign=benign_energies,
    grad=("energies",),
    reference=free_energy,
    shapes=lifted(benign_energies) + rescaled(benign_energies, 1e-3),
    thresholds={d: f"4 x 10 energies, randn; row 0 all in [{v:g}, {v + 1:g}) (every exp(-e) is 0)" for d, v in UNDERFLOW_ENERGY.items()},
)

FURTHER = (
    Repro(
        "TNL109",
        "NF",
        "mine_lower_bound",
        PRECISION,
        example=1,
        adversarial=overflowing_critic,
        benign=benign_critic,
        grad=("t_joint", "t_marginal"),
        reference=mine_bound,
        shapes=lifted(benign_critic) + rescaled(benign_critic, 1e-3),
        thresholds={
            d: f"16 x 3 critic scores, randn; t_marginal[0, 0] = {v + 0.5:g} (exp is Inf from {v:g})" for d, v in EXP_OVERFLOW.items()
        },
    ),
    Repro(
        "TNL109",
        "NF",
        "log_mix",
        PRECISION,
        example=2,
        adversarial=underflowing_mixture,
        benign=benign_mixture,
        grad=("log_a", "log_b"),
        reference=log_mixture,
        shapes=lifted(benign_mixture) + rescaled(benign_mixture, 1e-3),
        thresholds={
            d: f"16 log-probabilities each in (-3, 0]; entries 0-3 of both {v:g} lower (exp is 0 below -{v:g})"
            for d, v in UNDERFLOW_ENERGY.items()
        },
    ),
)
