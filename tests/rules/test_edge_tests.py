"""TNL201 and the code's own edge test (issue 16 items 1 and 5): `out[n == 0] = 0`,
`r.masked_fill(den == 0, 0.0)`, `torch.where(n > 0, x / n, 0)` show that the author expects the
divisor to reach 0, and they mend the forward. What is left is the gradient's NaN, claimed by
default where a gradient is shown to reach the division (the module's own layers, a caller in the
project passing a value with a gradient, named), in strict mode where one merely may; never in
gradient-free code (a guard right after the division in evaluation code is a guard).

Measured on torch 2.13 CPU: `torch.where(n > 0, x / n, 0)` with n = [0, 1, 2] gives the forward
[0, x1, x2 / 2] and the gradient [nan, 1.0, 0.5]; `(a * b).sum(-1) / den` re-filled by
`masked_fill(den == 0, 0.0)` gives a finite forward and NaN gradients of a and b. `atan(x / n)` at
n = 0, x = 1 gives pi/2 (the Inf absorbed) but NaN gradients of x and n: absorbed in the forward
only, so in gradient-free code it is no hazard."""

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Project, Silent

# a pooling layer that overwrites the empty rows; its inputs are parameters
POOL = """\
    import torch
    from torch import nn


    class KeptMean(nn.Module):
        def forward(self, h, keep):
            n = keep.sum(-1, keepdim=True)
            out = (h * keep).sum(-1, keepdim=True) / n
            out[n == 0] = 0
            return out
    """
POOL_FIXED = POOL.replace("/ n\n", "/ n.clamp_min(1e-12)\n")

# the same with the module's own layer in the numerator: a gradient is shown here
OWN_LAYER = """\
    import torch
    from torch import nn


    class ScoredMean(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.score = nn.Linear(dim, 1)

        def forward(self, h, w):
            den = w.sum(-1)
            ratio = (self.score(h).squeeze(-1) * w).sum(-1) / den
            return ratio.masked_fill(den == 0, 0.0)
    """

EVALUATION = """\
    import torch


    @torch.no_grad()
    def kept_mean(h, keep):
        n = keep.sum(-1, keepdim=True)
        out = (h * keep).sum(-1, keepdim=True) / n
        out[n == 0] = 0
        return out


    @torch.no_grad()
    def mean_heading(v, keep):
        n = keep.sum(-1)
        return torch.atan(v.sum(-1) / n)
    """

FLAGGED = [
    Flagged(OWN_LAYER, (12,), message="as the code's own test `den == 0` on line 13 expects"),
    Flagged(POOL, (8,), POOL_FIXED, strict=True, message="strict mode"),
]

SILENT = [
    # parameters that no caller in the project gives a gradient
    Silent(POOL),
    # gradient-free code: the test right after the division guards all there is
    Silent(EVALUATION),
]

PROJECTS = [
    # a training step passes a model's output: the gradient reaches the overwritten entries
    Project(
        {
            "layers/pool.py": POOL,
            "train.py": """\
        import torch
        from layers.pool import KeptMean


        def fit(encoder, opt, loader):
            pool = KeptMean()
            for x, keep, y in loader:
                pooled = pool(encoder(x), keep)
                loss = torch.nn.functional.mse_loss(pooled.squeeze(-1), y)
                loss.backward()
                opt.step()
        """,
        },
        lines={"layers/pool.py": (8,)},
        fixed={"layers/pool.py": POOL_FIXED},
        message="a gradient reaches it: `h` is given a value with a gradient by the call (train.py:8)",
    ),
    # its callers evaluate finished features under no_grad
    Project(
        {
            "layers/pool.py": POOL,
            "evaluate.py": """\
        import torch
        from layers.pool import KeptMean


        @torch.no_grad()
        def embed(encoder, loader):
            pool = KeptMean()
            return [pool(encoder(x), keep) for x, keep in loader]
        """,
        }
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL201", FLAGGED, SILENT, PROJECTS))
def test_an_edge_test_supports_a_gradient_claim_where_a_gradient_is_shown(code, case):
    harness.check(code, case)
