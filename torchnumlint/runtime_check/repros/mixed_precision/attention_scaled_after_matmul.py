"""TNL308 attention-scaled-after-matmul: `(q @ k.transpose(-2, -1)) * scale` under CUDA autocast
computes the unscaled dot products in float16, which leave its range before the scale applies.

Run under CUDA's autocast policy (cuda_policy.py, on the CPU): the matmul gets float16 inputs and
gives float16 scores; `softmax` runs in float32, but an Inf score is already there, and the softmax
of a row holding Inf is NaN. The fix scales q first: the same scores up to rounding, at most
4096 here, finite.

Measured (torch 2.13 CPU, CUDA policy): q = k with 256 channels ~N(0, 16^2), 64 tokens: 32 of 64
self-scores |q|^2 pass 65504 (Inf), those 32 rows of the softmax NaN (8192 of 16384 outputs); with q scaled first none.
q, k and v are on float16's grid, so the float64 reference sees the values the float16 matmul
gets.

Further: a batch of 3 sequences of 32 tokens x 128 channels (3-D), 2 x 4 heads of 16 tokens x 64
channels (4-D: where a transpose of dims 1 and 2, the same as -2 and -1 at 3-D, is another), and
q, k, v times 2^-10 (about 1e-3) and 8 (powers of two: on float16's grid still; scores times
about 1e-6 and 64, up to 2.2e3, within float16's range; the softmax from uniform to peaked). Times
1e3 the scores (3.4e7) overflow float16: the hazard itself.
"""

from __future__ import annotations

from typing import Tuple

import torch

from torchnumlint.runtime_check.context import Builder, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import gen, put, rescaled


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v, the scaled dot-product attention of the definition."""
    d = q.shape[-1]
    return torch.softmax(q @ k.transpose(-2, -1) / d**0.5, dim=-1) @ v


def on_half_grid(ctx: ReproContext, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Inputs:
    """The tensors rounded to float16's grid (then float32, autocast's input dtype)."""
    return put(ctx, q=q.half().float(), k=k.half().float(), v=v.half().float())


def overflowing(ctx: ReproContext) -> Inputs:
    """Self-attention scores of 64 tokens x 256 channels ~N(0, 16^2), q = k: 32 of the 64 self-scores
    |q_i|^2 pass 65504 in the float16 product (measured)."""
    g = gen(308)
    x = torch.randn(1, 64, 256, generator=g) * 16
    return on_half_grid(ctx, x, x.clone(), torch.randn(1, 64, 256, generator=g))


def spread_tokens(lead: Tuple[int, ...], tokens: int, channels: int, seed: int) -> Builder:
    """`lead` x `tokens` x `channels` q, k, v randn, token i of q and k of scale 1e-2 .. 1
    (log-spaced): every unscaled score small, the softmax from nearly uniform to peaked."""

    def build(ctx: ReproContext) -> Inputs:
        g = gen(seed)
        scales = (1e-2 * (1e2 ** torch.linspace(0, 1, tokens)))[:, None]
        q = torch.randn(*lead, tokens, channels, generator=g) * scales
        k = torch.randn(*lead, tokens, channels, generator=g) * scales
        return on_half_grid(ctx, q, k, torch.randn(*lead, tokens, channels, generator=g))

    return build


# 64 tokens x 256 channels: every unscaled score below 34 (measured: 33.6)
in_range = spread_tokens((1,), 64, 256, 3081)


REPRO = Repro(
    "TNL308",
    "NF",
    "attend",
    ("autocast",),
    adversarial=overflowing,
    benign=in_range,
    grad=("q", "k", "v"),
    reference=attention,
    shapes=(("3-D, a batch of 3 sequences", spread_tokens((3,), 32, 128, 3082)), ("4-D, 2 x 4 heads", spread_tokens((2, 4), 16, 64, 3083)))
    + rescaled(in_range, 2.0**-10, 8.0),
    thresholds={
        "*": "q = k: 64 tokens x 256 channels ~N(0, 16^2) on float16's grid: the self-scores |q|^2 "
        "pass 65504 in the float16 matmul (32 of 64 Inf) before the scale 1/16 applies"
    },
)
