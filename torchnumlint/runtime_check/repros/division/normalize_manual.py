"""TNL202 normalize-manual: `h / h.norm(...)` is 0/0 = NaN on an all-zero row; F.normalize clamps
the norm at eps.

Example 2 (`Head.forward`) is not reproduced: it is a method of an nn.Module that reads
`self.proj`, which the example never defines, and a reproduction runs a function the example
defines.

float32 only: F.normalize's default eps 1e-12 is 0 in float16 (TNL303's territory).
"""

from __future__ import annotations

import torch

from torchnumlint.runtime_check.context import FP32, Repro
from torchnumlint.runtime_check.repros.inputs import constant_row, put, rows_spanning


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


REPRO = Repro(
    "TNL202", "NF", "unit_rows", FP32,
    adversarial=lambda ctx: put(ctx, x=constant_row(202, 0.0)),
    benign=lambda ctx: put(ctx, x=rows_spanning(8, 16, 1e-3, 1e3, 2021)), grad=("x",),
    reference=unit_relu_rows,
    thresholds={"*": "4 x 16, row 1 all zeros (norm 0: 0/0 = NaN), other rows randn; benign: 8 rows whose "
                     "relu has norm 3.0e-3 .. 3.3e3 (an eps above 3e-3 changes them)"},
)
