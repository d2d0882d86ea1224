"""TNL111 sigmoid-manual and TNL112 logit-manual: the forms training code writes, the exact
fixes, and the look-alikes left alone."""

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent

# ---------------------------------------------------------------------------------------------
# TNL111 sigmoid-manual

TNL111_FLAGGED = (
    # a gate in a forward, the logits from a submodule
    Flagged(
        """\
        import torch
        from torch import nn

        class Gate(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.proj = nn.Linear(d, d)

            def forward(self, h):
                gate = 1 / (1 + torch.exp(-self.proj(h)))
                return gate * h
        """,
        (10,),
        fixed="""\
        import torch
        from torch import nn

        class Gate(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.proj = nn.Linear(d, d)

            def forward(self, h):
                gate = torch.sigmoid(self.proj(h))
                return gate * h
        """,
    ),
    # a probability in a training step, read through the exp's name (the line goes with the fix)
    Flagged(
        """\
        import torch
        import torch.nn.functional as F

        def train_step(model, opt, x, y):
            logits = model(x)
            e = torch.exp(-logits)
            p = 1.0 / (1.0 + e)
            loss = F.mse_loss(p, y)
            loss.backward()
            opt.step()
        """,
        (7,),
        fixed="""\
        import torch
        import torch.nn.functional as F

        def train_step(model, opt, x, y):
            logits = model(x)
            p = torch.sigmoid(logits)
            loss = F.mse_loss(p, y)
            loss.backward()
            opt.step()
        """,
    ),
    # method forms: exp(-x).add(1).reciprocal() and (1 + (-x).exp()) ** -1
    Flagged(
        """\
        import torch

        def gates(x, y):
            a = torch.exp(-x).add(1).reciprocal()
            b = (1 + (-y).exp()) ** -1
            return a * b
        """,
        (4, 5),
        fixed="""\
        import torch

        def gates(x, y):
            a = torch.sigmoid(x)
            b = torch.sigmoid(y)
            return a * b
        """,
    ),
    # torch imported under an alias: the fix keeps it
    Flagged(
        """\
        import torch as th

        def attention_gate(q, k):
            return th.reciprocal(1 + th.exp(-(q * k).sum(-1)))
        """,
        (4,),
        fixed="""\
        import torch as th

        def attention_gate(q, k):
            return th.sigmoid((q * k).sum(-1))
        """,
    ),
    # `from torch import exp`, reversed operands, a temperature and a bias on self
    Flagged(
        """\
        import torch
        from torch import exp, nn

        class SoftThreshold(nn.Module):
            def forward(self, x):
                return 1 / (exp(-(x - self.bias) / self.tau) + 1)
        """,
        (6,),
        fixed="""\
        import torch
        from torch import exp, nn

        class SoftThreshold(nn.Module):
            def forward(self, x):
                return torch.sigmoid((x - self.bias) / self.tau)
        """,
    ),
    # exp(x) / (1 + exp(x)): NaN in the forward pass, so reported even without a gradient
    Flagged(
        """\
        import torch

        @torch.no_grad()
        def predict(model, x):
            s = model(x)
            return torch.exp(s) / (torch.exp(s) + 1)
        """,
        (6,),
        fixed="""\
        import torch

        @torch.no_grad()
        def predict(model, x):
            s = model(x)
            return torch.sigmoid(s)
        """,
    ),
    # 1 / (1 + exp(x)) is sigmoid(-x); ones_like as the one
    Flagged(
        """\
        import torch

        def survival(hazard_logits):
            return 1 / (torch.ones_like(hazard_logits) + torch.exp(hazard_logits))
        """,
        (4,),
        fixed="""\
        import torch

        def survival(hazard_logits):
            return torch.sigmoid(-hazard_logits)
        """,
    ),
    # a scaled sigmoid (speechbrain's MetricGAN): c * sigmoid
    Flagged(
        """\
        import torch

        def shifted_sigmoid(x):
            return 1.2 / (1 + torch.exp(-(1 / 1.6) * x))
        """,
        (4,),
        fixed="""\
        import torch

        def shifted_sigmoid(x):
            return 1.2 * torch.sigmoid((1 / 1.6) * x)
        """,
        message="times the numerator",
    ),
    # an in-place division: reported, no rewrite
    Flagged(
        """\
        import torch

        def damp(w, a):
            w = w * 2
            w /= 1 + torch.exp(-a)
            return w
        """,
        (5,),
    ),
    # the denominator through a name read twice: recomputed at the use, the name kept
    Flagged(
        """\
        import torch

        def weigh(x):
            d = 1 + torch.exp(-x)
            w = 1 / d
            return w, d.log()
        """,
        (5,),
        fixed="""\
        import torch

        def weigh(x):
            d = 1 + torch.exp(-x)
            w = torch.sigmoid(x)
            return w, d.log()
        """,
    ),
)

TNL111_SILENT = (
    Silent(
        """\
        import torch
        import torch.nn.functional as F

        def f(x):
            return torch.sigmoid(x) * x.sigmoid() + F.logsigmoid(x)
        """
    ),
    # numpy and math exps are not torch's
    Silent(
        """\
        import math
        import numpy as np
        import torch

        def energy_prob(a, b, rms):
            p = 1.0 / (1 + np.exp(-(a + b * rms)))
            return p, 1 / (1 + math.exp(-a))
        """
    ),
    # not a sigmoid: another constant, 1 - exp, softplus
    Silent(
        """\
        import torch

        def f(x):
            a = 1 / (2 + torch.exp(-x))
            b = 1 / (1 - torch.exp(-x))
            return a + b + (1 + torch.exp(-x)).log()
        """
    ),
    # the exponent has a ceiling: exp cannot overflow
    Silent(
        """\
        import torch

        def stable(x, s):
            a = 1 / (1 + torch.exp(-x.clamp(min=-30)))
            b = 1 / (1 + torch.exp(-torch.clamp(x, -50, 50)))
            c = 1 / (1 + torch.exp(-x.abs()))
            return a + b + c + 1 / (1 + torch.exp(s - s.max(-1, keepdim=True).values))
        """
    ),
    # no gradient: the reciprocal's forward value is exact
    Silent(
        """\
        import torch

        @torch.no_grad()
        def betas(t):
            return 1 / (1 + torch.exp(-t))
        """
    ),
    # a schedule built from data carries no gradient
    Silent(
        """\
        import torch

        def sigmoid_schedule(n, start=-3.0, end=3.0):
            t = torch.linspace(start, end, n)
            return 1 / (1 + torch.exp(-t))
        """
    ),
    # in evaluation code under inference_mode
    Silent(
        """\
        import torch

        def evaluate(model, loader):
            with torch.inference_mode():
                for x, _ in loader:
                    yield 1 / (1 + torch.exp(-model(x)))
        """
    ),
    # exp(x) over 1 + exp of something else, and a Python float
    Silent(
        """\
        import torch

        def mix(x, t: float):
            return torch.exp(x) / (1 + x.exp().sum()) + 1 / (1 + 2.718 ** (-t))
        """
    ),
    # 1 / exp(-x) alone, exp(-x) + 1 not inverted
    Silent(
        """\
        import torch

        def f(x):
            return 1 / torch.exp(-x) + (torch.exp(-x) + 1) * x
        """
    ),
)


@pytest.mark.parametrize("code, case", harness.params("TNL111", TNL111_FLAGGED, TNL111_SILENT))
def test_sigmoid_manual(code, case):
    harness.check(code, case)
