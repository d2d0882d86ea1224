"""TNL202 normalize-manual: `h / h.norm(...)` is 0/0 = NaN on an all-zero row; F.normalize clamps
the norm at eps.

Example 2 (`Head.forward`, a method of an nn.Module that reads `self.proj`, which the example
leaves to its owner) runs on an instance of `Head` given a bias-free `proj` of fixed weights
(`HEAD_WEIGHT`): a feature row of zeros is 0/0.

float32 only: F.normalize's default eps 1e-12 is 0 in float16 (TNL303's territory).
"""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import FP32, Builder, Inputs, Repro, ReproContext
from torchnumlint.runtime_check.repros.inputs import constant_row, gen, lifted, put, rescaled, rows_spanning, spanning


def unit_relu_rows(x: torch.Tensor) -> torch.Tensor:
    """u = h / ||h||_2 per row with h = relu(x): the direction of each row's positive part, the
    norm written from its definition sqrt(sum h^2). A zero row has no direction; its unit vector is
    taken as 0 (F.normalize's convention), and so is its gradient (relu'(0) = 0, and the
    square root is never taken of 0: no 0 * inf)."""
    h = torch.relu(x)
    squares = (h * h).sum(-1, keepdim=True)
    nonzero = squares > 0
    norm = torch.sqrt(torch.where(nonzero, squares, torch.ones_like(squares)))
    return torch.where(nonzero, h / norm, torch.zeros_like(h))


class _NoDerivative(torch.autograd.Function):
    """The identity, whose backward is NaN where `defined` is False: a value the mathematics
    defines by convention there has no derivative, and NaN keeps that gradient out of every
    comparison instead of adopting the fix's own (F.normalize's is 1/eps times the upstream)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, defined: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(defined)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (defined,) = ctx.saved_tensors
        return torch.where(defined, grad, float("nan")), None


def unit(v: torch.Tensor, dim: int) -> torch.Tensor:
    """v / ||v||_2 along `dim`; a zero vector has no direction: its value is taken as 0 (the
    convention of F.normalize) and its derivative, which does not exist, is NaN (not compared)."""
    squares = (v * v).sum(dim, keepdim=True)
    nonzero = squares > 0
    v = _NoDerivative.apply(v, nonzero.expand_as(v))
    return torch.where(nonzero, v / torch.sqrt(torch.where(nonzero, squares, torch.ones_like(squares))), 0.0)


DIM, PROTO = 8, 5  # Head's feature and prototype widths
HEAD_WEIGHT = torch.randn(DIM, PROTO, generator=gen(2022))  # proj.weight: columns of norm ~ 2.8


def head_scores(feats: torch.Tensor, protos: torch.Tensor) -> torch.Tensor:
    """unit(feats, dim 1) @ (HEAD_WEIGHT with unit columns) * unit(protos[0], last dim)."""
    w = HEAD_WEIGHT.to(feats.dtype)
    return unit(feats, 1) @ (w / torch.sqrt((w * w).sum(0, keepdim=True))) * unit(protos[0], -1)


def with_proj(cls: type) -> torch.nn.Module:
    """A `Head` whose `proj` is a bias-free Linear(PROTO, DIM) of weight HEAD_WEIGHT (DIM x PROTO)."""
    head = cls()
    head.proj = torch.nn.Linear(PROTO, DIM, bias=False)
    with torch.no_grad():
        head.proj.weight.copy_(HEAD_WEIGHT)
    return head


def head_inputs(zero_row: bool, seed: int, shape=(4, DIM)) -> Builder:
    """feats (`shape`, magnitudes 1e-3 .. 1e3, either sign; a 3-D shape puts dim 1, the one the
    example normalises, between the batch and the features), protos 3 x PROTO; `zero_row`: feature
    row 1 all zeros (its norm is 0: 0/0 = NaN)."""

    def build(ctx: ReproContext) -> Inputs:
        feats = spanning(shape, 1e-3, 1e3, seed)
        if zero_row:
            feats[1] = 0.0
        return put(ctx, feats=feats, protos=spanning((3, PROTO), 1e-3, 1e3, seed + 1))

    return build


REPRO = Repro(
    "TNL202",
    "NF",
    "unit_rows",
    FP32,
    adversarial=lambda ctx: put(ctx, x=constant_row(202, 0.0)),
    benign=lambda ctx: put(ctx, x=rows_spanning(8, 16, 1e-3, 1e3, 2021)),
    grad=("x",),
    reference=unit_relu_rows,
    convention="a row with no positive entry has no direction: its unit vector is taken "
    "as 0 (F.normalize's value); relu'(0) = 0 makes its gradient 0 whatever the norm's subgradient",
    shapes=lifted(lambda ctx: put(ctx, x=rows_spanning(8, 16, 1e-3, 1e3, 2021)))
    + rescaled(lambda ctx: put(ctx, x=rows_spanning(8, 16, 1e-3, 1e3, 2023)), 1e-3, 1e3),
    thresholds={
        "*": "4 x 16, row 1 all zeros (norm 0: 0/0 = NaN), other rows randn; benign: 8 rows whose "
        "relu has norm 3.0e-3 .. 3.3e3 (an eps above 3e-3 changes them)"
    },
)

FURTHER = (
    Repro(
        "TNL202",
        "NF",
        "Head.forward",
        FP32,
        example=1,
        instance=with_proj,
        adversarial=head_inputs(True, 2024),
        benign=head_inputs(False, 2026),
        grad=("feats", "protos"),
        reference=head_scores,
        convention="a zero feature row has no direction: its unit vector is taken as 0 "
        "(F.normalize's value) and its gradient, which does not exist there, is not compared",
        shapes=(("3-D, the normalised dim 1 not last", head_inputs(False, 2028, (3, 4, DIM))),) + rescaled(head_inputs(False, 2026), 1e-3),
        thresholds={
            "*": f"Head() with proj.weight {DIM} x {PROTO} randn; feats 4 x {DIM}, row 1 zeros (norm 0: 0/0 = NaN); protos 3 x {PROTO}"
        },
    ),
)
