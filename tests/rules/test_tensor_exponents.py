"""TNL206 on powers to a tensor exponent in (0, 1) (`rules/exponents.py`): a learned exponent the
module creates at a fraction, or a sigmoid gate, is a root of its base, whose gradient is
infinite at 0 (measured: the variance of a constant batch raised to `nn.Parameter(0.5)` gives
12 of 12 NaN gradient entries; the exponent's own gradient is 0.0). An exponent that starts at 1
or above (GeM's `p = 3`) or a tensor of unknown value is no root."""

import functools

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent

DIVISION = ("TNL201", "TNL202", "TNL204", "TNL206")

flagged = functools.partial(Flagged, together=DIVISION)
silent = functools.partial(Silent, together=DIVISION)

LEARNED = """
    import torch
    from torch import nn


    class PowerNorm(nn.Module):
        def __init__(self, channels: int):
            super().__init__()
            self.p = nn.Parameter(torch.full((channels,), 0.5))

        def forward(self, x):
            spread = x.var(dim=0)
            return x / spread ** self.p
    """
GATED = """
    import torch
    from torch import nn


    class GatedScale(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = nn.Parameter(torch.zeros(1))

        def forward(self, x):
            return torch.pow(x.var(dim=0), torch.sigmoid(self.gate))
    """
FLAGGED = [
    flagged(
        LEARNED,
        (13,),
        LEARNED.replace("spread ** self.p", "spread.clamp_min(1e-12) ** self.p"),
        message="a fractional power of a variance",
    ),
    flagged(
        GATED,
        (12,),
        GATED.replace("torch.pow(x.var(dim=0),", "torch.pow(x.var(dim=0).clamp_min(1e-12),"),
        message="a fractional power of a variance",
    ),
]
SILENT = [
    # GeM pooling: an exponent created at 3 (and its base clamped), an exponent of unknown value
    silent("""
    import torch
    from torch import nn


    class GeM(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = nn.Parameter(torch.ones(1) * 3)

        def forward(self, x):
            pooled = x.clamp(min=1e-6).pow(self.p).mean((-2, -1))
            return pooled.pow(1.0 / self.p) + x.var(dim=0) ** self.p


    class Scaled(nn.Module):
        def __init__(self, alpha):
            super().__init__()
            self.alpha = nn.Parameter(alpha)

        def forward(self, x):
            return x.var(dim=0) ** self.alpha
    """),
    # a gated exponent of a guarded base
    silent("""
    import torch
    from torch import nn


    class GatedScale(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = nn.Parameter(torch.zeros(1))

        def forward(self, x):
            return torch.pow(x.var(dim=0) + 1e-5, torch.sigmoid(self.gate))
    """),
]


@pytest.mark.parametrize("code, case", harness.params("TNL206", FLAGGED, SILENT))
def test_tensor_exponents_in_the_unit_interval(code, case):
    harness.check(code, case)
