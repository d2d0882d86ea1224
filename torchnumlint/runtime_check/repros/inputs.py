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


Shapes = Tuple[Tuple[str, Builder], ...]


def lifted(build: Builder, *ndims: int, keep: Tuple[str, ...] = ()) -> Shapes:
    """`build`'s inputs with leading batch dims, for an example that acts entry by entry or along
    its trailing dims: every tensor gets the same number of leading dims so that the widest has
    each of `ndims` dims (default 3 and 4). Each new dim stacks the tensor on a copy rolled by one
    along its first dim, so the slices differ (a fix that reduces the wrong dim, or broadcasts
    one slice over another, sees other numbers) and each is a benign input as it was. The inputs
    named in `keep` stay as they are: the ones a batch shares (a layer's weight, per-class
    weights that broadcast along the last dim)."""

    def at(ndim: int) -> Builder:
        def build_at(ctx: ReproContext) -> Inputs:
            inputs = build(ctx)
            widest = max(v.dim() for k, v in inputs.items() if isinstance(v, torch.Tensor) and k not in keep)
            out = {}
            for name, value in inputs.items():
                if isinstance(value, torch.Tensor) and name not in keep:
                    for _ in range(max(ndim - widest, 1)):
                        value = torch.stack([value, value.roll(1, 0)])
                out[name] = value
            return out

        return build_at

    return tuple((f"{n}-D (leading batch dims)", at(n)) for n in (ndims or (3, 4)))


def rescaled(build: Builder, *factors: float, only: Tuple[str, ...] = ()) -> Shapes:
    """`build`'s floating inputs times each of `factors`: the same example at other scales, for
    one whose benign region is closed under them (a division, a root, a norm: homogeneous). With
    `only`, just those inputs are scaled: the others have no scale (labels, 0/1 targets) or a
    benign range of their own (a log-variance, which exp bounds)."""

    def at(factor: float) -> Builder:
        def build_at(ctx: ReproContext) -> Inputs:
            return {
                k: v * factor if isinstance(v, torch.Tensor) and v.is_floating_point() and (not only or k in only) else v
                for k, v in build(ctx).items()
            }

        return build_at

    label = f" ({', '.join(only)})" if only else ""
    return tuple((f"x {f:g}{label}", at(f)) for f in factors)
