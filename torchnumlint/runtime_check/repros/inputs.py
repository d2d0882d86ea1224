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
