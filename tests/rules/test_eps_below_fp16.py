"""TNL303 eps-below-fp16: an eps float16 cannot hold, guarding a float16 value in fp16 code."""

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent

CODE = "TNL303"

FLAGGED = [
    # a module's eps from __init__'s default, a linear output's spread as divisor; TNL301 leaves it
    Flagged(
        """\
        import torch
        from torch import nn


        class PeakNorm(nn.Module):
            def __init__(self, dim, eps=1e-12):
                super().__init__()
                self.proj = nn.Linear(dim, dim)
                self.eps = eps

            def forward(self, x):
                h = self.proj(x)
                return h / (h.abs().amax(dim=-1, keepdim=True) + self.eps)


        def fit(loader, dim):
            model = PeakNorm(dim)
            for x in loader:
                with torch.autocast("cuda"):
                    loss = model(x).square().mean()
                loss.backward()
        """,
        lines=(13,),
        together=("TNL301",),
        message="example.py:19",
    ),
    # a log of a float16 mean with an eps that rounds to 0; clamp_min as a divisor
    Flagged(
        """\
        import torch


        @torch.autocast("cuda")
        def scores(x, w):
            h = (x @ w).relu()
            energy = torch.log(h.mean(dim=-1) + 1e-10)
            return h / h.amax(dim=-1, keepdim=True).clamp_min(1e-12), energy
        """,
        lines=(7, 8),
        fixed="""\
        import torch


        @torch.autocast("cuda")
        def scores(x, w):
            h = (x @ w).relu()
            energy = torch.log(h.mean(dim=-1) + torch.finfo(torch.float16).tiny)
            return h / h.amax(dim=-1, keepdim=True).clamp_min(torch.finfo(torch.float16).tiny), energy
        """,
    ),
]

SILENT = [
    # float32 values: an eps of 1e-8 is fine there
    Silent(
        """\
        import torch


        def peak_normalize(x, w):
            with torch.autocast("cuda"):
                h = (x @ w).float()
                return h / (h.abs().amax(dim=-1, keepdim=True) + 1e-8)
        """
    ),
    # a subnormal eps under a log keeps the log finite
    Silent(
        """\
        import torch


        def energy(x, w):
            with torch.autocast("cuda"):
                return torch.log((x @ w).relu().mean(dim=-1) + 1e-6)
        """
    ),
    # sum and pow run in float32 under CUDA autocast
    Silent(
        """\
        import torch


        def rms(x, w):
            with torch.autocast("cuda"):
                h = x @ w
                return h / torch.sqrt(h.pow(2).sum(-1, keepdim=True) + 1e-12)
        """
    ),
    # no fp16 region
    Silent(
        """\
        import torch


        def peak_normalize(x, w):
            h = x @ w
            return h / (h.abs().amax(dim=-1, keepdim=True) + 1e-8)
        """
    ),
    # an eps float16 holds
    Silent(
        """\
        import torch


        def peak_normalize(x, w):
            with torch.autocast("cuda"):
                h = x @ w
                return h / (h.abs().amax(dim=-1, keepdim=True) + 1e-4)
        """
    ),
]


@pytest.mark.parametrize("code, case", harness.params(CODE, FLAGGED, SILENT))
def test_eps_below_fp16(code, case):
    harness.check(code, case)
