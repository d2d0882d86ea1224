"""Input builders that several reproductions share.

Inputs are built on the CPU from a fixed seed, in float32, then cast to the run's dtype and moved,
so every device and every dtype sees the same numbers (up to the cast).
"""

from __future__ import annotations

from typing import Tuple

import torch

from torchnumlint.runtime_check.context import Builder, Inputs, ReproContext


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def put(ctx: ReproContext, **tensors: torch.Tensor) -> Inputs:
    """Tensors built in float32/float64 on the CPU, cast to the run's dtype and moved."""
    return {k: (v.to(ctx.dtype) if v.is_floating_point() else v).to(ctx.device) for k, v in tensors.items()}


def randn(name: str, shape: Tuple[int, ...], scale: float, seed: int) -> Builder:
    """One input `name`, standard normal times `scale`: the benign inputs of most reproductions."""

    def build(ctx: ReproContext) -> Inputs:
        return put(ctx, **{name: torch.randn(*shape, generator=gen(seed)) * scale})

    return build


def constant_row(seed: int, value: float) -> torch.Tensor:
    """4 x 16 standard normal rows, row 1 all `value`: a row whose spread is 0 (its std, variance,
    centred norm) or, for `value` 0, whose norm is 0 — the edge of every division and root rule."""
    x = torch.randn(4, 16, generator=gen(seed))
    x[1] = value
    return x


# Measured on torch 2.13 (CPU): `1 + x` (and `exp(x)`) round to exactly 1 below half an ulp of 1:
# 2^-24 = 6e-8 in float32, 2^-11 = 4.9e-4 in float16, 2^-8 = 3.9e-3 in bfloat16.
ROUNDS_TO_ONE = {"float32": 6e-8, "float16": 4.9e-4, "bfloat16": 3.9e-3}


def below_rounding(name: str) -> Builder:
    """One input `name` from 1e-3 of the dtype's `ROUNDS_TO_ONE` threshold to just below it: where
    `1 + x` and `exp(x)` are exactly 1, so `log(1 + x)` and `exp(x) - 1` are 0."""

    def build(ctx: ReproContext) -> Inputs:
        limit = ROUNDS_TO_ONE[ctx.dtype_name]
        return put(ctx, **{name: torch.logspace(-3, 0, 10) * 0.99 * limit})

    return build


def spanning(shape: Tuple[int, ...], low: float, high: float, seed: int, signed: bool = True) -> torch.Tensor:
    """Magnitudes log-uniform from `low` to `high` (random signs when `signed`): benign inputs that
    span the scales where a wrong guard (an eps, a clamp, a threshold) would change the values."""
    g = gen(seed)
    u = torch.rand(*shape, generator=g)
    magnitude = low * (high / low) ** u
    sign = torch.where(torch.rand(*shape, generator=g) < 0.5, -1.0, 1.0) if signed else 1.0
    return magnitude * sign


def rows_spanning(rows: int, cols: int, low: float, high: float, seed: int) -> torch.Tensor:
    """`rows` x `cols` standard normal rows, row i scaled by the i-th of `rows` log-spaced factors
    from `low` to `high`: benign inputs whose per-row spread (std, variance, norm) spans the scales
    where a wrong guard on it (an eps, a clamp) would change the values."""
    return torch.randn(rows, cols, generator=gen(seed)) * (low * (high / low) ** torch.linspace(0, 1, rows))[:, None]
