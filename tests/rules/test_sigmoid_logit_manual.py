"""TNL111 sigmoid-manual and TNL112 logit-manual: the forms training code writes, the exact
fixes, and the look-alikes left alone."""

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Project, Silent

# ---------------------------------------------------------------------------------------------
# TNL111 sigmoid-manual

# Forms: most cases below have no evidence that the exponent passes 88.7 in magnitude (a
# parameter no caller passes, a model called through a parameter) and are reported in strict mode;
# the cases with evidence (a submodule's output, a product, a caller that passes one) are at the
# end of the file, in TNL111_EVIDENCE.
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
        strict=True,
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
        strict=True,
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
        strict=True,
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
        strict=True,
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
        strict=True,
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
        strict=True,
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
        strict=True,
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
        strict=True,
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
        strict=True,
    ),
    # the ratio with a factor in its numerator, in a forward: `h * e / (1 + e)` is h * sigmoid(s)
    Flagged(
        """\
        import torch
        from torch import nn

        class Router(nn.Module):
            def forward(self, h):
                s = self.score(h)
                e = torch.exp(s)
                return h * e / (1 + e)
        """,
        (8,),
        fixed="""\
        import torch
        from torch import nn

        class Router(nn.Module):
            def forward(self, h):
                s = self.score(h)
                return h * torch.sigmoid(s)
        """,
        message="`c * exp(x) / (1 + exp(x))` is Inf / Inf",
    ),
    # the message names the sign the exponent is written with: 1 / (1 + exp(x)) overflows for large x
    Flagged(
        """\
        import torch
        import torch.nn.functional as F

        def hazard_loss(logits, y):
            survival = 1 / (1 + logits.exp())
            return F.binary_cross_entropy(survival, y)
        """,
        (5,),
        fixed="""\
        import torch
        import torch.nn.functional as F

        def hazard_loss(logits, y):
            survival = torch.sigmoid(-logits)
            return F.binary_cross_entropy(survival, y)
        """,
        message="`1 / (1 + exp(x))` has a NaN gradient once exp(x) overflows (x > 88.72",
        strict=True,
    ),
    # a torch.where that keeps the ratio where the exponent is LARGE: no bound, still NaN
    Flagged(
        """\
        import torch
        from torch import nn

        class Gate(nn.Module):
            def forward(self, h, threshold=20.0):
                s = self.proj(h)
                e = s.exp()
                return torch.where(s > threshold, h * e / (e + 1), h)
        """,
        (8,),
        fixed="""\
        import torch
        from torch import nn

        class Gate(nn.Module):
            def forward(self, h, threshold=20.0):
                s = self.proj(h)
                return torch.where(s > threshold, h * torch.sigmoid(s), h)
        """,
    ),
    # a torch.where whose condition tests another value than the exponent bounds nothing
    Flagged(
        """\
        import torch

        def masked_prob(scores, mask):
            e = torch.exp(scores)
            return torch.where(mask > 0, e / (1 + e), torch.zeros_like(e))
        """,
        (5,),
        fixed="""\
        import torch

        def masked_prob(scores, mask):
            e = torch.exp(scores)
            return torch.where(mask > 0, torch.sigmoid(scores), torch.zeros_like(e))
        """,
        strict=True,
    ),
    # a registry decorator that is not a decomposition: a helper like any other
    Flagged(
        """\
        import torch

        ACTIVATIONS = {}

        def register_activation(name):
            def wrap(fn):
                ACTIVATIONS[name] = fn
                return fn
            return wrap

        @register_activation("silu")
        def silu(x):
            return x / (1 + x.neg().exp())
        """,
        (13,),
        fixed="""\
        import torch

        ACTIVATIONS = {}

        def register_activation(name):
            def wrap(fn):
                ACTIVATIONS[name] = fn
                return fn
            return wrap

        @register_activation("silu")
        def silu(x):
            return x * torch.sigmoid(x)
        """,
        message="`c / (1 + exp(-x))`",
        strict=True,
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
    # softplus's gradient by hand: torch.where keeps g * e / (e + 1) only where s <= threshold
    Silent(
        """\
        import torch

        def softplus_grad(g, x, beta=1.0, threshold=20.0):
            e = (x * beta).exp()
            return torch.where((x * beta) > threshold, g, g * e / (e + 1.0))
        """
    ),
    # in a forward, the form in `input` under `s <= t`, and the keyword form under `t < s`
    Silent(
        """\
        import torch
        from torch import nn

        class SmoothGate(nn.Module):
            def forward(self, h, threshold=30.0):
                s = self.proj(h)
                e = torch.exp(s)
                low = torch.where(s <= threshold, e / (1 + e), torch.ones_like(s))
                high = torch.where(threshold < s, torch.zeros_like(s), other=1 / (1 + torch.exp(s)))
                return h * low + high
        """
    ),
    # a decomposition of an op runs below autograd (inductor's silu, written to match eager)
    Silent(
        """\
        import torch
        from torch._decomp import register_decomposition

        aten = torch.ops.aten

        @register_decomposition([aten.silu])
        def silu(x: torch.Tensor) -> torch.Tensor:
            return x / (1 + x.neg().exp())
        """
    ),
)


@pytest.mark.parametrize("code, case", harness.params("TNL111", TNL111_FLAGGED, TNL111_SILENT))
def test_sigmoid_manual(code, case):
    harness.check(code, case)


# ---------------------------------------------------------------------------------------------
# TNL112 logit-manual

TNL112_FLAGGED = (
    # the log-odds of a head's sigmoid in a forward
    Flagged(
        """\
        import torch
        from torch import nn

        class Calibrated(nn.Module):
            def forward(self, h):
                p = torch.sigmoid(self.head(h))
                return torch.log(p / (1 - p))
        """,
        (7,),
        fixed="""\
        import torch
        from torch import nn

        class Calibrated(nn.Module):
            def forward(self, h):
                p = torch.sigmoid(self.head(h))
                return torch.logit(p, eps=1e-6)
        """,
        message="its input itself",
    ),
    # the method form on a softmax, in a helper
    Flagged(
        """\
        import torch
        import torch.nn.functional as F

        def class_odds(scores):
            probs = F.softmax(scores, dim=-1)
            return probs.logit()
        """,
        (6,),
        fixed="""\
        import torch
        import torch.nn.functional as F

        def class_odds(scores):
            probs = F.softmax(scores, dim=-1)
            return probs.logit(eps=1e-6)
        """,
        message="softmax",
    ),
    # an nn.Sigmoid module held on self, its output's logit in another method
    Flagged(
        """\
        import torch
        from torch import nn

        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.act = nn.Sigmoid()

            def forward(self, x):
                p = self.act(x)
                return torch.logit(p)
        """,
        (11,),
        fixed="""\
        import torch
        from torch import nn

        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.act = nn.Sigmoid()

            def forward(self, x):
                p = self.act(x)
                return torch.logit(p, eps=1e-6)
        """,
    ),
    # torch.special.logit of a prediction clamped to [0, 1]
    Flagged(
        """\
        import torch

        def training_step(model, batch):
            pred = model(batch["x"]).clamp(0, 1)
            target = torch.special.logit(pred)
            return ((target - batch["y"]) ** 2).mean()
        """,
        (5,),
        fixed="""\
        import torch

        def training_step(model, batch):
            pred = model(batch["x"]).clamp(0, 1)
            target = torch.special.logit(pred, eps=1e-6)
            return ((target - batch["y"]) ** 2).mean()
        """,
        message="both ends",
    ),
    # log(p) - log(1 - p) of a softmax
    Flagged(
        """\
        import torch

        def odds(logits):
            p = logits.softmax(-1)
            return torch.log(p) - torch.log(1 - p)
        """,
        (5,),
        fixed="""\
        import torch

        def odds(logits):
            p = logits.softmax(-1)
            return torch.logit(p, eps=1e-6)
        """,
    ),
    # logistic noise from a uniform draw, with log1p
    Flagged(
        """\
        import torch

        def logistic_noise(x):
            u = torch.rand_like(x)
            noise = torch.log(u) - torch.log1p(-u)
            return x + noise
        """,
        (5,),
        fixed="""\
        import torch

        def logistic_noise(x):
            u = torch.rand_like(x)
            noise = torch.logit(u, eps=1e-6)
            return x + noise
        """,
        message="uniform draw",
    ),
    # the odds through a name read only there: its assignment is rewritten
    Flagged(
        """\
        import torch

        def log_odds(z):
            s = z.sigmoid()
            odds = s / (1.0 - s)
            return odds.log()
        """,
        (6,),
        fixed="""\
        import torch

        def log_odds(z):
            s = z.sigmoid()
            odds = torch.logit(s, eps=1e-6)
            return odds
        """,
        message="hold log-odds",
    ),
    # `from torch import log, sigmoid`, ones_like as the one
    Flagged(
        """\
        import torch
        from torch import log, sigmoid

        def f(z):
            s = sigmoid(z)
            return log(s / (torch.ones_like(s) - s))
        """,
        (6,),
        fixed="""\
        import torch
        from torch import log, sigmoid

        def f(z):
            s = sigmoid(z)
            return torch.logit(s, eps=1e-6)
        """,
    ),
    # strict mode: a probability of unknown origin
    Flagged(
        """\
        import torch

        def f(p):
            return torch.logit(p)
        """,
        (4,),
        fixed="""\
        import torch

        def f(p):
            return torch.logit(p, eps=1e-6)
        """,
        strict=True,
        message="strict mode",
    ),
    # the log-difference of a sigmoid is TNL104's while it is on; alone, TNL112 reports it
    Flagged(
        """\
        import torch

        def f(z):
            p = torch.sigmoid(z)
            return torch.log(p) - torch.log(1 - p)
        """,
        (5,),
        fixed="""\
        import torch

        def f(z):
            p = torch.sigmoid(z)
            return torch.logit(p, eps=1e-6)
        """,
    ),
)

TNL112_SILENT = (
    # a prior probability, in Python
    Silent(
        """\
        import math
        import torch

        def init_bias(layer, prior=0.01):
            layer.bias.data.fill_(-math.log((1 - prior) / prior))
        """
    ),
    # DETR's inverse_sigmoid: both sides clamped away from 0
    Silent(
        """\
        import torch

        def inverse_sigmoid(x, eps=1e-5):
            x = x.clamp(min=0, max=1)
            x1 = x.clamp(min=eps)
            x2 = (1 - x).clamp(min=eps)
            return torch.log(x1 / x2)
        """
    ),
    # a sigmoid clamped inside (0, 1), and a logit with eps
    Silent(
        """\
        import torch

        def f(z, eps=1e-6):
            p = torch.sigmoid(z).clamp(eps, 1 - eps)
            return torch.log(p / (1 - p)) + torch.logit(torch.sigmoid(z), eps=1e-6) + p.logit(eps)
        """
    ),
    # a probability of unknown origin (default mode)
    Silent(
        """\
        import torch

        def f(p):
            return torch.logit(p) + torch.log(p / (1 - p))
        """
    ),
    # kornia's anchors: a grid inside (0, 1), its invalid cells masked afterwards
    Silent(
        """\
        import torch

        def anchors(h, w, eps=0.01):
            gy, gx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
            a = (torch.stack([gx, gy], -1) + 0.5) / torch.tensor([w, h])
            valid = ((a > eps) * (a < 1 - eps)).all(-1, keepdim=True)
            a = torch.log(a / (1 - a))
            return torch.where(valid, a, torch.inf)
        """
    ),
    # numpy's log
    Silent(
        """\
        import numpy as np
        import torch

        def f(z):
            p = 1 / (1 + np.exp(-z))
            return np.log(p / (1 - p))
        """
    ),
    # not the odds: 1 + p, an eps in the denominator, another value
    Silent(
        """\
        import torch

        def f(z, q):
            p = torch.sigmoid(z)
            return torch.log(p / (1 + p)) + torch.log(p / (1 - p + 1e-8)) + torch.log(p) - torch.log(1 - q)
        """
    ),
    # two different draws are no odds of one value
    Silent(
        """\
        import torch

        def f(n):
            return torch.log(torch.rand(n) / (1 - torch.rand(n)))
        """
    ),
    # a draw bounded inside (0, 1) (pytorch_geometric's hard-concrete sampler)
    Silent(
        """\
        import torch

        def sample(x, beta):
            u = torch.empty_like(x).uniform_(1e-6, 1.0 - 1e-6)
            return torch.sigmoid((torch.log(u) - torch.log(1 - u) + x) / beta)
        """
    ),
    # an affine map of a draw kept away from 0 and 1
    Silent(
        """\
        import torch

        def noise(x, eps=1e-6):
            u = (1 - 2 * eps) * torch.rand_like(x) + eps
            return torch.log(u) - torch.log(1 - u)
        """
    ),
)


@pytest.mark.parametrize("code, case", harness.params("TNL112", TNL112_FLAGGED, TNL112_SILENT))
def test_logit_manual(code, case):
    harness.check(code, case)


def test_log_odds_of_a_sigmoid_is_tnl104s_while_it_is_on():
    """With TNL104 on, its exact logsigmoid fixes report the two logs, and TNL112 is silent."""
    harness.check(
        "TNL104",
        Flagged(
            """\
        import torch
        import torch.nn.functional as F

        def f(z):
            p = torch.sigmoid(z)
            return torch.log(p) - torch.log(1 - p)
        """,
            (6, 6),
            fixed="""\
        import torch
        import torch.nn.functional as F

        def f(z):
            p = torch.sigmoid(z)
            return F.logsigmoid(z) - F.logsigmoid(-z)
        """,
            together=("TNL112",),
        ),
    )


# TNL111 by the evidence for the magnitude: exp overflows only past |x| = 88.72 in float32
# (measured on torch 2.13; under CUDA's autocast exp runs in float32 even for a float16 matmul
# output: NaN gradient from -90, not from -12), which the logits of a learned map reach.

_CONTRAST = """\
import torch
from torch import nn


def sigmoid_contrast(image, cutoff=0.5, gain=10.0):
    return 1 / (1 + torch.exp(gain * (cutoff - image)))


class SigmoidContrast(nn.Module):
    def __init__(self, cutoff=0.5, gain=10.0):
        super().__init__()
        self.cutoff = cutoff
        self.gain = gain

    def forward(self, image):
        return sigmoid_contrast(image, cutoff=self.cutoff, gain=self.gain)
"""

_GATING_HELPER = """\
import torch


def soft_gate(x):
    return 1 / (1 + torch.exp(-x))
"""

TNL111_EVIDENCE = (
    # a gate on a matrix product: the evidence is named
    Flagged(
        """\
        import torch

        def gated_update(h, w_gate):
            g = 1.0 / (1.0 + torch.exp(-(h @ w_gate)))
            return g * h
        """,
        (4,),
        fixed="""\
        import torch

        def gated_update(h, w_gate):
            g = torch.sigmoid(h @ w_gate)
            return g * h
        """,
        message="its input is a matrix product",
    ),
    # F.linear logits through a name, the ratio form
    Flagged(
        """\
        import torch
        import torch.nn.functional as F

        def keep_prob(feats, weight, bias):
            z = F.linear(feats, weight, bias)
            e = z.exp()
            return e / (1 + e)
        """,
        (7,),
        fixed="""\
        import torch
        import torch.nn.functional as F

        def keep_prob(feats, weight, bias):
            z = F.linear(feats, weight, bias)
            return torch.sigmoid(z)
        """,
        message="its input is `linear`",
    ),
    # a helper whose only caller in its file passes a submodule's output: the caller is named
    Flagged(
        """\
        import torch
        from torch import nn

        def soft_gate(x):
            return 1 / (1 + torch.exp(-x))

        class GatedMLP(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.gate_proj = nn.Linear(d, d)

            def forward(self, h):
                return soft_gate(self.gate_proj(h)) * h
        """,
        (5,),
        fixed="""\
        import torch
        from torch import nn

        def soft_gate(x):
            return torch.sigmoid(x)

        class GatedMLP(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.gate_proj = nn.Linear(d, d)

            def forward(self, h):
                return soft_gate(self.gate_proj(h)) * h
        """,
        message="passed as `x` by the call at line 13",
    ),
    # an image in [0, 1] times a gain: reported in strict mode only, the fix kept
    Flagged(
        _CONTRAST,
        (6,),
        fixed=_CONTRAST.replace("1 / (1 + torch.exp(gain * (cutoff - image)))", "torch.sigmoid(-(gain * (cutoff - image)))"),
        strict=True,
        message="strict mode: no evidence that the input passes 88.7",
    ),
)

TNL111_EVIDENCE_SILENT = (
    # an image in [0, 1] shifted and scaled by a gain the module holds
    Silent(_CONTRAST),
    # a public helper with no caller anywhere in the project
    Silent(_GATING_HELPER),
    # a stretched sigmoid of a data feature read from the batch
    Silent(
        """\
        import torch

        def duration_weight(batch, tau=4.0):
            return 1.0 / (1.0 + torch.exp(-(batch["duration"] - 10.0) / tau))
        """
    ),
)

TNL111_PROJECTS = (
    # the helper's caller in another file passes a product
    Project(
        files={
            "nn/gates.py": _GATING_HELPER,
            "nn/blocks.py": ("from nn.gates import soft_gate\n\n\ndef highway(h, w_t):\n    t = soft_gate(h @ w_t)\n    return t * h\n"),
        },
        lines={"nn/gates.py": (5,)},
        fixed={"nn/gates.py": _GATING_HELPER.replace("1 / (1 + torch.exp(-x))", "torch.sigmoid(x)")},
        message="passed as `x` by the call at nn/blocks.py:5",
    ),
    # a gate logit read from the tuple a project model returns, the model built as a pair
    Project(
        files={
            "nn/gates.py": _GATING_HELPER,
            "train.py": (
                "import torch\n"
                "from torch import nn\n"
                "from nn.gates import soft_gate\n"
                "\n"
                "\n"
                "class Router(nn.Module):\n"
                "    def __init__(self, d):\n"
                "        super().__init__()\n"
                "        self.body = nn.Linear(d, d)\n"
                "        self.gate = nn.Linear(d, 1)\n"
                "\n"
                "    def forward(self, x):\n"
                "        h = self.body(x)\n"
                "        return h, self.gate(h)\n"
                "\n"
                "\n"
                "def step(x, device):\n"
                "    model, ema = Router(8).to(device), Router(8).to(device)\n"
                "    h, gate_logit = model(x)\n"
                "    return (soft_gate(gate_logit) * h).sum()\n"
            ),
        },
        lines={"nn/gates.py": (5,)},
        fixed={"nn/gates.py": _GATING_HELPER.replace("1 / (1 + torch.exp(-x))", "torch.sigmoid(x)")},
        message="element 1 of the output of `model`",
    ),
    # the elements of a tuple of batch fields: silent
    Project(
        files={
            "nn/gates.py": _GATING_HELPER,
            "aug.py": (
                "from nn.gates import soft_gate\n"
                "\n"
                "\n"
                "def weights(batch):\n"
                "    age, score = batch['age'], batch['score']\n"
                "    return soft_gate(score - 0.5)\n"
            ),
        },
    ),
    # callers that pass images: silent
    Project(
        files={
            "nn/gates.py": _GATING_HELPER,
            "aug.py": (
                "from nn.gates import soft_gate\n"
                "\n"
                "\n"
                "def contrast(batch):\n"
                "    out = soft_gate(8.0 * (batch['image'] - 0.5))\n"
                "    return out\n"
            ),
        },
    ),
)


@pytest.mark.parametrize("code, case", harness.params("TNL111", TNL111_EVIDENCE, TNL111_EVIDENCE_SILENT, TNL111_PROJECTS))
def test_sigmoid_manual_evidence(code, case):
    harness.check(code, case)
