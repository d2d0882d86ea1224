"""TNL209 where-unselected-branch: a log, root or reciprocal computed on every entry of a
`torch.where` / `masked_fill` branch whose condition tests its input; the double where fix; the
look-alikes left alone."""

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent

TNL209_FLAGGED = [
    Flagged(  # a safe log by hand, in a loss
        """\
        import torch

        def log_l1_loss(pred, target):
            log_pred = torch.where(pred > 0, torch.log(pred), torch.zeros_like(pred))
            return (log_pred - target).abs().mean()
        """,
        (4,),
        """\
        import torch

        def log_l1_loss(pred, target):
            log_pred = torch.where(pred > 0, torch.log(torch.where(pred > 0, pred, 1)), torch.zeros_like(pred))
            return (log_pred - target).abs().mean()
        """,
    ),
    Flagged(  # the hazard in the second branch: kept where the condition is False
        """\
        import torch

        class InverseDepth(torch.nn.Module):
            def forward(self, depth):
                return torch.where(depth == 0, torch.zeros_like(depth), 1.0 / depth)
        """,
        (5,),
        """\
        import torch

        class InverseDepth(torch.nn.Module):
            def forward(self, depth):
                return torch.where(depth == 0, torch.zeros_like(depth), 1.0 / torch.where(depth == 0, 1, depth))
        """,
    ),
    Flagged(  # a root, method form, through a named condition
        """\
        import torch

        def radius_loss(v, r):
            valid = v > 0
            radius = torch.where(valid, v.sqrt(), 0.0)
            return (radius - r).pow(2).mean()
        """,
        (5,),
        """\
        import torch

        def radius_loss(v, r):
            valid = v > 0
            radius = torch.where(valid, torch.where(valid, v, 1).sqrt(), 0.0)
            return (radius - r).pow(2).mean()
        """,
    ),
    Flagged(  # an entropy made safe in the forward only
        """\
        import torch

        def entropy_loss(p):
            h = torch.where(p > 0, p * torch.log(p), torch.zeros_like(p))
            return -h.sum(-1).mean()
        """,
        (4,),
        """\
        import torch

        def entropy_loss(p):
            h = torch.where(p > 0, p * torch.log(torch.where(p > 0, p, 1)), torch.zeros_like(p))
            return -h.sum(-1).mean()
        """,
    ),
    Flagged(  # masked_fill after the log
        """\
        import torch

        def rates_nll_loss(rates, counts):
            log_r = torch.log(rates).masked_fill(rates == 0, 0.0)
            return -(counts * log_r).sum()
        """,
        (4,),
        """\
        import torch

        def rates_nll_loss(rates, counts):
            log_r = torch.log(torch.where(rates == 0, 1, rates)).masked_fill(rates == 0, 0.0)
            return -(counts * log_r).sum()
        """,
    ),
    Flagged(  # masked_fill after a division, the log2 of a where
        """\
        import torch

        def bits_loss(scale, p):
            inv = (1 / scale).masked_fill(scale == 0, 0.0)
            bits = torch.where(p > 0, torch.log2(p), 0.0)
            return (inv * bits).sum()
        """,
        (4, 5),
        """\
        import torch

        def bits_loss(scale, p):
            inv = (1 / torch.where(scale == 0, 1, scale)).masked_fill(scale == 0, 0.0)
            bits = torch.where(p > 0, torch.log2(torch.where(p > 0, p, 1)), 0.0)
            return (inv * bits).sum()
        """,
    ),
    Flagged(  # a fractional power and rsqrt under a combined condition
        """\
        import torch

        def gamma_loss(x, y, valid):
            g = torch.where((x > 0) & valid, x ** 0.4, 0.0)
            r = torch.where(y > 0, torch.rsqrt(y), 0.0)
            return (g + r).mean()
        """,
        (4, 5),
        """\
        import torch

        def gamma_loss(x, y, valid):
            g = torch.where((x > 0) & valid, torch.where((x > 0) & valid, x, 1) ** 0.4, 0.0)
            r = torch.where(y > 0, torch.rsqrt(torch.where(y > 0, y, 1)), 0.0)
            return (g + r).mean()
        """,
    ),
    Flagged(  # a condition that calls a function: reported, no fix (it would be computed twice)
        """\
        import torch

        def log_ratio_loss(a, b):
            r = a / b
            return torch.where(torch.isfinite(r) & (r > 0), torch.log(r), 0.0).mean()
        """,
        (5,),
        None,
    ),
    Flagged(  # a reciprocal, function form, under an eps test of its absolute value (a call: no fix)
        """\
        import torch

        def inv_loss(d, eps: float = 1e-6):
            inv = torch.where(d.abs() > eps, torch.reciprocal(d), 0.0)
            return inv.pow(2).mean()
        """,
        (4,),
        None,
    ),
]

TNL209_SILENT = [
    Silent(  # the double where already
        "import torch\ndef log_loss(x):\n    return torch.where(x > 0, torch.log(torch.where(x > 0, x, 1)), 0.0).mean()\n"
    ),
    Silent(  # no gradient: evaluation code
        "import torch\n@torch.no_grad()\ndef log_depth(d):\n    return torch.where(d > 0, torch.log(d), 0.0)\n"
    ),
    Silent(  # detached
        "import torch\ndef log_loss(d):\n    return torch.where(d > 0, torch.log(d.detach()), 0.0).mean()\n"
    ),
    Silent(  # a condition that does not test the value
        "import torch\ndef log_loss(x, keep):\n    return torch.where(keep, torch.log(x), 0.0).mean()\n"
    ),
    Silent(  # a guarded input
        "import torch\ndef log_loss(x, eps=1e-6):\n    return torch.where(x > 0, torch.log(x + eps), 0.0).mean()\n"
    ),
    Silent(  # a positive input: exp never reaches 0 by construction
        "import torch\ndef loss(x):\n    e = x.exp()\n    return torch.where(x > 0, torch.log(e), 0.0).mean()\n"
    ),
    Silent(  # the hazard in the condition, not in a branch
        "import torch\ndef loss(x):\n    return torch.where(torch.log(x) > 0, x, 0.0).mean()\n"
    ),
    Silent(  # numpy's where
        "import numpy as np\nimport torch\ndef loss(x):\n    return np.where(x > 0, np.log(x), 0.0)\n"
    ),
    Silent(  # the edge is in the kept entries: not this hazard (JPEG's quality scale)
        "import torch\ndef scale_loss(q):\n    return torch.where(q < 50, 5000.0 / q, 200.0 - 2.0 * q).mean()\n"
    ),
    Silent(  # an average of accumulated values by their count: bookkeeping, strict mode only
        "import torch\ndef blend_loss(acc, num_times):\n    return torch.where(num_times > 0, acc / num_times, acc).mean()\n"
    ),
    Silent(  # a data tensor: no gradient to poison
        "import torch\ndef log_loss(pred, n):\n    counts = torch.arange(n)\n"
        "    return (pred - torch.where(counts > 0, torch.log(counts.float()), 0.0)).pow(2).mean()\n"
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL209", TNL209_FLAGGED, TNL209_SILENT))
def test_where_unselected_branch(code, case):
    harness.check(code, case)


def test_a_division_by_a_count_in_a_where_is_the_division_rules():
    """TNL201 knows why a count is 0 and reports the division inside the where; TNL209 leaves it
    while TNL201 is on (and reports it when TNL201 is off)."""
    source = (
        "import torch\ndef mean_loss(x, mask):\n    den = mask.sum(-1)\n"
        "    return torch.where(den > 0, (x * mask).sum(-1) / den, 0.0).mean()\n"
    )
    assert [f.code for f in harness.findings("TNL209", source, together=("TNL201",))] == ["TNL201"]
    assert [f.code for f in harness.findings("TNL209", source)] == ["TNL209"]


def test_unguarded_log_leaves_a_where_tested_log_alone():
    """A log selected away by a where that tests its input has a finite forward: TNL207 is silent
    (the gradient is TNL209's), even for a value TNL207 would otherwise report."""
    source = (
        "import torch\nimport torch.nn.functional as F\ndef log_energy_loss(x):\n    e = F.relu(x)\n"
        "    return torch.where(e > 0, torch.log(e), 0.0).mean()\n"
    )
    assert [f.code for f in harness.findings("TNL207", source, together=("TNL209",))] == ["TNL209"]
