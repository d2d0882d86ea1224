"""TNL106 log-one-plus, TNL107 exp-minus-one, TNL108 softplus-manual: the forms caught the way
training and model code writes them, the exact fixes, the look-alikes left alone, and the sites
they share with other rules (one owner; disabling it still reports the hazard)."""

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent

# ---------------------------------------------------------------------------------------------
# TNL106 log-one-plus

TNL106_FLAGGED = [
    # a loss in a forward: the log-likelihood of a small rate
    Flagged(
        """\
        import torch
        from torch import nn

        class RateLoss(nn.Module):
            def forward(self, rate, target):
                return (torch.log(1 + rate) - target).pow(2).mean()
        """,
        (6,),
        """\
        import torch
        from torch import nn

        class RateLoss(nn.Module):
            def forward(self, rate, target):
                return (torch.log1p(rate) - target).pow(2).mean()
        """,
    ),
    # reversed operands and a float literal, in a training step
    Flagged(
        """\
        import torch

        def train_step(model, opt, x, y):
            pred = model(x)
            loss = (torch.log(pred + 1.0) - torch.log(y + 1.0)).abs().mean()
            loss.backward()
            opt.step()
        """,
        (5, 5),
        """\
        import torch

        def train_step(model, opt, x, y):
            pred = model(x)
            loss = (torch.log1p(pred) - torch.log1p(y)).abs().mean()
            loss.backward()
            opt.step()
        """,
    ),
    # log(1 - p) through an alias of torch, in a helper
    Flagged(
        """\
        import torch as th

        def log_survival(p):
            return th.log(1 - p).sum(-1)
        """,
        (4,),
        """\
        import torch as th

        def log_survival(p):
            return th.log1p(-p).sum(-1)
        """,
    ),
    # method form on an attribute; a compound negated term gets parentheses
    Flagged(
        """\
        import torch
        from torch import nn

        class Flow(nn.Module):
            def forward(self, z):
                self.logdet = (1 + self.scale * z).log().sum(-1)
                return (1 - z * z).log()
        """,
        (6, 7),
        """\
        import torch
        from torch import nn

        class Flow(nn.Module):
            def forward(self, z):
                self.logdet = (self.scale * z).log1p().sum(-1)
                return torch.log1p(-(z * z))
        """,
    ),
    # torch.ones_like(x) + x, `from torch import log`
    Flagged(
        """\
        import torch
        from torch import log

        def symlog(x):
            return torch.sign(x) * log(torch.ones_like(x) + x.abs())
        """,
        (5,),
        """\
        import torch
        from torch import log

        def symlog(x):
            return torch.sign(x) * torch.log1p(x.abs())
        """,
        strict=True,  # a compressed magnitude: its lost digits are below its neighbours' rounding
    ),
    # x.add(1).log(), inside a loss helper
    Flagged(
        """\
        import torch

        def msle(pred, target):
            return (pred.add(1).log() - target.add(1).log()).pow(2).mean()
        """,
        (4, 4),
        """\
        import torch

        def msle(pred, target):
            return (pred.log1p() - target.log1p()).pow(2).mean()
        """,
    ),
    # through a local name read only here: the assignment is rewritten
    Flagged(
        """\
        import torch

        def entropy_bonus(ratio):
            shifted = 1 + ratio
            return torch.log(shifted).mean()
        """,
        (5,),
        """\
        import torch

        def entropy_bonus(ratio):
            shifted = torch.log1p(ratio)
            return shifted.mean()
        """,
        message="the fix makes `shifted` hold",
    ),
    # fp16-trained feature compression (fairseq wav2vec's log_compression): rebinding names
    Flagged(
        """\
        import torch
        from torch import nn

        class Encoder(nn.Module):
            def forward(self, x):
                x = self.conv(x).abs()
                return torch.log(x + 1)
        """,
        (7,),
        """\
        import torch
        from torch import nn

        class Encoder(nn.Module):
            def forward(self, x):
                x = self.conv(x).abs()
                return torch.log1p(x)
        """,
        strict=True,  # a compressed magnitude (see the rule): --strict
    ),
    # the stable softplus, where exp cannot overflow, still rounds 1 + exp(-|x|) (TNL108 declines it)
    Flagged(
        """\
        import torch

        def stable_softplus(x):
            return x.clamp(min=0) + torch.log(1 + torch.exp(-x.abs()))
        """,
        (4,),
        """\
        import torch

        def stable_softplus(x):
            return x.clamp(min=0) + torch.log1p(torch.exp(-x.abs()))
        """,
        together=("TNL108",),
    ),
    # the rebinding idiom (fairseq wav2vec): the value of `x + 1` is read once, by the log; no fix,
    # since `x` is rebound in between
    Flagged(
        """\
        import torch
        from torch import nn

        class Wav2Vec(nn.Module):
            def forward(self, x):
                x = self.feature_aggregator(x)
                if self.log_compression:
                    x = x.abs()
                    x = x + 1
                    x = x.log()
                return x
        """,
        (10,),
        strict=True,  # a compressed magnitude (see the rule): --strict
    ),
    # TNL108 disabled: its site is still reported, by TNL106
    Flagged(
        """\
        import torch

        def f(x):
            return torch.log(1 + torch.exp(x))
        """,
        (4,),
        """\
        import torch

        def f(x):
            return torch.log1p(torch.exp(x))
        """,
    ),
    # TNL104 disabled: `log(1 - sigmoid(x))` is still reported, by TNL106
    Flagged(
        """\
        import torch

        def neg_loss(logits):
            return -torch.log(1 - torch.sigmoid(logits)).mean()
        """,
        (4,),
        """\
        import torch

        def neg_loss(logits):
            return -torch.log1p(-torch.sigmoid(logits)).mean()
        """,
    ),
]

TNL106_SILENT = [
    # not torch's log
    Silent(
        """\
        import math
        import numpy as np
        import torch

        def lr_at(step, p, arr):
            return math.log(1 + p) + np.log(1 + arr) + np.log1p(arr)
        """
    ),
    # counts: 1 + n is exact
    Silent(
        """\
        import torch

        def class_prior(labels, c, mask):
            df = (labels == c).sum(0)
            return torch.log(1 + df) + torch.log(1 + mask.long().sum(-1)) + torch.log(1 + labels.numel())
        """
    ),
    Silent(
        """\
        import torch

        def positional(x):
            pos = torch.arange(x.shape[1], device=x.device)
            return torch.log(1 + pos.float()) + torch.log(1 + torch.bincount(x.flatten()).float()).sum()
        """
    ),
    Silent(
        """\
        import torch

        def degree_norm(deg, lengths):
            return torch.log(deg + 1) + (lengths.float() + 1).log()
        """
    ),
    # already log1p; a guarded 1 - p + eps; log of 2 + x
    Silent(
        """\
        import torch

        def f(x, p, eps=1e-6):
            return torch.log1p(x) + torch.log(1 - p + eps) + torch.log(2 + x) + torch.log1p(-p)
        """
    ),
    # a name assigned `1 - x` and read elsewhere too: a quantity of its own (diffusers' DDPM beta_t,
    # where x is near 1 and `1 - x` is exact)
    Silent(
        """\
        import torch

        def get_variance(alpha_prod_t, alpha_prod_t_prev, predicted_variance):
            current_beta_t = 1 - alpha_prod_t / alpha_prod_t_prev
            variance = (1 - alpha_prod_t_prev) / (1 - alpha_prod_t) * current_beta_t
            min_log = torch.log(variance.clamp(min=1e-20))
            max_log = torch.log(current_beta_t)
            frac = (predicted_variance + 1) / 2
            return frac * max_log + (1 - frac) * min_log
        """
    ),
    # noise: logistic / concrete samples from uniform draws (pyg's GraphMask and PGExplainer)
    Silent(
        """\
        import torch

        def hard_concrete(logits, beta, bias=0.0001):
            u = torch.empty_like(logits).uniform_(1e-6, 1.0 - 1e-6)
            s = torch.sigmoid((torch.log(u) - torch.log(1 - u) + logits) / beta)
            eps = (1 - 2 * bias) * torch.rand_like(logits) + bias
            return s + (eps.log() - (1 - eps).log() + logits)
        """
    ),
    # kept away from 0 and 1: the entropy of a squashed mask
    Silent(
        """\
        import torch

        def mask_entropy(mask):
            masked = 0.99 * mask + 0.005
            return (-masked * masked.log() - (1 - masked) * (1 - masked).log()).mean()
        """
    ),
    # durations and clamped degrees are counts
    Silent(
        """\
        import torch
        import torch.nn.functional as F

        def duration_loss(log_dur_out, sample, deg, out):
            dur = sample["durations"].float()
            log_dur = torch.log(dur + 1)
            scale = torch.log(deg.clamp(min=1) + 1)
            return F.mse_loss(log_dur_out, log_dur) + (out / scale).mean()
        """
    ),
    # relative coordinates are integers, whatever their dtype (timm's swin v2, x-transformers)
    Silent(
        """\
        import torch

        def log_coords(win, device, j):
            coords = torch.stack(torch.meshgrid(
                torch.arange(win, device=device, dtype=torch.float32),
                torch.arange(win, device=device, dtype=torch.float32),
            )).flatten(1)
            rel = coords[:, :, None] - coords[:, None, :]
            rel = rel.permute(1, 2, 0).reshape(-1, 2).float()
            pos = torch.arange(-j + 1, j, device=device).float()
            return torch.sign(rel) * torch.log(1.0 + rel.abs()), torch.log(pos.abs() + 1)
        """
    ),
    # log(1 - p) beside log(p): a hand-written BCE (torch's own test reference) and a logit
    Silent(
        """\
        import torch

        def bce_loss_reference_fn(i, t):
            result = -(t * i.log() + (1 - t) * (1 - i).log())
            logit = torch.log(i) - torch.log(1 - i)
            return result.mean() + logit
        """
    ),
    # a Python number
    Silent(
        """\
        import torch

        def schedule(x, beta: float):
            return x * torch.log(torch.tensor(1 + beta))
        """
    ),
    # log of a product or a ratio is not log(1 + x); x - 1 is not 1 + x
    Silent(
        """\
        import torch

        def f(a, b):
            return torch.log(a * (1 + b) / 2) + torch.log(a - 1) + torch.log(1 + a - b)
        """
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL106", TNL106_FLAGGED, TNL106_SILENT))
def test_tnl106(code, case):
    harness.check(code, case)


# TNL104 owns `log(1 - sigmoid(x))`: with both enabled it is reported once, by TNL104.
TNL104_OWNS = [
    Flagged(
        """\
        import torch

        def neg_loss(logits):
            return -torch.log(1 - torch.sigmoid(logits)).mean()
        """,
        (4,),
        """\
        import torch

        def neg_loss(logits):
            return -torch.nn.functional.logsigmoid(-logits).mean()
        """,
        together=("TNL106",),
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL104", TNL104_OWNS))
def test_tnl104_owns_log_one_minus_sigmoid(code, case):
    harness.check(code, case)


# ---------------------------------------------------------------------------------------------
# TNL108 softplus-manual

TNL108_FLAGGED = [
    # Bayes-by-backprop: the std of a weight from a learned rho, in a forward
    Flagged(
        """\
        import torch
        import torch.nn.functional as F
        from torch import nn

        class BayesLinear(nn.Module):
            def forward(self, x):
                sigma = torch.log(1 + torch.exp(self.weight_rho))
                w = self.weight_mu + sigma * torch.randn_like(sigma)
                return F.linear(x, w)
        """,
        (7,),
        """\
        import torch
        import torch.nn.functional as F
        from torch import nn

        class BayesLinear(nn.Module):
            def forward(self, x):
                sigma = F.softplus(self.weight_rho)
                w = self.weight_mu + sigma * torch.randn_like(sigma)
                return F.linear(x, w)
        """,
    ),
    # a pairwise ranking loss: log1p(exp(neg - pos)), in a training step
    Flagged(
        """\
        import torch
        import torch.nn.functional as F

        def train_step(model, opt, users, pos_items, neg_items):
            pos, neg = model(users, pos_items), model(users, neg_items)
            loss = torch.log1p(torch.exp(neg - pos)).mean()
            loss.backward()
            opt.step()
        """,
        (6,),
        """\
        import torch
        import torch.nn.functional as F

        def train_step(model, opt, users, pos_items, neg_items):
            pos, neg = model(users, pos_items), model(users, neg_items)
            loss = F.softplus(neg - pos).mean()
            loss.backward()
            opt.step()
        """,
    ),
    # method chain and reversed operands, in a helper
    Flagged(
        """\
        import torch
        import torch.nn.functional as F

        def logistic_loss(margin):
            return (-margin).exp().add(1).log().mean() + torch.log(torch.exp(-margin) + 1).sum()
        """,
        (5, 5),
        """\
        import torch
        import torch.nn.functional as F

        def logistic_loss(margin):
            return F.softplus(-margin).mean() + F.softplus(-margin).sum()
        """,
    ),
    # `from torch import exp, log` and an nn.functional alias
    Flagged(
        """\
        from torch import exp, log
        from torch import nn

        def smooth_relu(x):
            return log(1.0 + exp(x))
        """,
        (5,),
        """\
        from torch import exp, log
        from torch import nn

        def smooth_relu(x):
            return nn.functional.softplus(x)
        """,
    ),
    # the exp through a local name read only by the log: recomputed, the line removed
    Flagged(
        """\
        import torch
        import torch.nn.functional as F

        def energy(scores):
            e = scores.exp()
            return torch.log(1 + e).sum(-1)
        """,
        (6,),
        """\
        import torch
        import torch.nn.functional as F

        def energy(scores):
            return F.softplus(scores).sum(-1)
        """,
    ),
    # the sum through a local name read only by the log: the assignment is rewritten
    Flagged(
        """\
        import torch
        import torch.nn.functional as F

        def concentration(h, w):
            denom = 1 + (h @ w).exp()
            return denom.log()
        """,
        (6,),
        """\
        import torch
        import torch.nn.functional as F

        def concentration(h, w):
            denom = F.softplus(h @ w)
            return denom
        """,
        message="the fix makes `denom` hold",
    ),
    # an attribute's exp, inside a module method that is not forward
    Flagged(
        """\
        import torch
        import torch.nn.functional as F
        from torch import nn

        class Prior(nn.Module):
            def scale(self):
                return torch.log(torch.ones_like(self.raw) + torch.exp(self.raw))
        """,
        (7,),
        """\
        import torch
        import torch.nn.functional as F
        from torch import nn

        class Prior(nn.Module):
            def scale(self):
                return F.softplus(self.raw)
        """,
    ),
    # with TNL106 enabled the site is reported once, by TNL108 (the owner)
    Flagged(
        """\
        import torch
        import torch.nn.functional as F

        def f(x):
            return torch.log(1 + torch.exp(x))
        """,
        (5,),
        """\
        import torch
        import torch.nn.functional as F

        def f(x):
            return F.softplus(x)
        """,
        together=("TNL106",),
    ),
    # the exp read elsewhere too: reported, recomputed at the log when its input is unchanged
    Flagged(
        """\
        import torch
        import torch.nn.functional as F

        def f(x):
            e = torch.exp(x)
            return torch.log1p(e) + e
        """,
        (6,),
        """\
        import torch
        import torch.nn.functional as F

        def f(x):
            e = torch.exp(x)
            return F.softplus(x) + e
        """,
    ),
    # the sum read elsewhere too: the log still overflows; recomputed at the log
    Flagged(
        """\
        import torch
        import torch.nn.functional as F

        def f(x):
            z = 1 + torch.exp(x)
            return torch.log(z) / z
        """,
        (6,),
        """\
        import torch
        import torch.nn.functional as F

        def f(x):
            z = 1 + torch.exp(x)
            return F.softplus(x) / z
        """,
    ),
]

TNL108_SILENT = [
    # the stable softplus: exp of a non-positive value cannot overflow
    Silent(
        """\
        import torch

        def stable_softplus(x):
            return x.clamp(min=0) + torch.log1p(torch.exp(-x.abs()))
        """
    ),
    Silent(
        """\
        import torch
        import torch.nn.functional as F

        def f(x):
            return F.relu(x) + torch.log1p(torch.exp(-F.relu(-x) - F.relu(x)))  + torch.log1p((-(x ** 2)).exp())
        """
    ),
    # clamped or max-subtracted exps
    Silent(
        """\
        import torch
        import torch.nn.functional as F

        def f(x, s):
            a = torch.log(1 + torch.exp(x.clamp(max=20)))
            b = torch.log1p(torch.exp(s - s.max(-1, keepdim=True)[0]))
            return a + b + torch.log(1 + torch.exp(F.logsigmoid(x)))
        """
    ),
    # already softplus; other libraries
    Silent(
        """\
        import math
        import numpy as np
        import torch
        import torch.nn.functional as F

        def f(x, t):
            return F.softplus(x) + math.log(1 + math.exp(t)) + np.log1p(np.exp(t))
        """
    ),
    # not 1 + exp: exp - 1, 2 + exp, exp(x) * y + 1, 1 - exp
    Silent(
        """\
        import torch

        def f(x, y):
            return torch.log(torch.exp(x) - 1) + torch.log(2 + torch.exp(x)) + torch.log(1 + torch.exp(x) * y)
        """
    ),
    Silent(
        """\
        import torch

        def f(x):
            return torch.log(1 - torch.exp(-x.abs())) + torch.log(torch.exp(x))
        """
    ),
    # logaddexp's `max_ + log1p(exp(min_ - max_))` (torch._refs): min_ - max_ <= 0
    Silent(
        """\
        import torch

        def logaddexp(a, b):
            mask = a >= b
            max_ = torch.where(mask, a, b)
            min_ = torch.where(mask, b, a)
            return max_ + torch.log1p(torch.exp(min_ - max_))
        """
    ),
    # softplus's own definition and a test's reference for it cannot call softplus
    Silent(
        """\
        import torch

        def softplus(a, beta=1.0, threshold=20.0):
            scaled_input = a * beta
            rhs = torch.true_divide(torch.log1p(torch.exp(scaled_input)), beta)
            return torch.where(scaled_input > threshold, a, rhs)

        def module_inputs_torch_nn_Softplus(make_input):
            return [lambda m, p, i: torch.log1p(torch.exp(i))]
        """
    ),
    # log of a sum of exps is TNL109's, not softplus
    Silent(
        """\
        import torch

        def f(a, b):
            return torch.log(torch.exp(a) + torch.exp(b))
        """
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL108", TNL108_FLAGGED, TNL108_SILENT))
def test_tnl108(code, case):
    harness.check(code, case)


# ---------------------------------------------------------------------------------------------
# TNL107 exp-minus-one

TNL107_FLAGGED = [
    # the phi functions of an exponential integrator (diffusers' DPM-Solver): divided by h
    Flagged(
        """\
        import torch

        def second_order_update(sample, sigma_t, h, D0, D1):
            return sample - (sigma_t * (torch.exp(h) - 1.0)) * D0 - (sigma_t * ((torch.exp(h) - 1.0) / h - 1.0)) * D1
        """,
        (4,),
        """\
        import torch

        def second_order_update(sample, sigma_t, h, D0, D1):
            return sample - (sigma_t * (torch.exp(h) - 1.0)) * D0 - (sigma_t * ((torch.expm1(h)) / h - 1.0)) * D1
        """,
        message="divided by a value of x",
    ),
    # the first-order term alone: its error is lost in the sum (strict mode only)
    Flagged(
        """\
        import torch

        def first_order_update(sample, model_output, sigma_t, sigma_s, alpha_t, h):
            return (sigma_t / sigma_s) * sample - (alpha_t * (torch.exp(-h) - 1.0)) * model_output
        """,
        (4,),
        """\
        import torch

        def first_order_update(sample, model_output, sigma_t, sigma_s, alpha_t, h):
            return (sigma_t / sigma_s) * sample - (alpha_t * (torch.expm1(-h))) * model_output
        """,
        strict=True,
        message="strict mode",
    ),
    # the inverse softplus of a positive-parameter init, in a module, method form
    Flagged(
        """\
        import torch
        from torch import nn

        class Positive(nn.Module):
            def reset_parameters(self):
                with torch.no_grad():
                    self.raw.copy_((self.init_value.exp() - 1).log())
        """,
        (7,),
        """\
        import torch
        from torch import nn

        class Positive(nn.Module):
            def reset_parameters(self):
                with torch.no_grad():
                    self.raw.copy_((self.init_value.expm1()).log())
        """,
        message="its log is -inf",
    ),
    # -1 + exp(y) under a log, through an alias of torch
    Flagged(
        """\
        import torch as th

        def inverse_softplus(y):
            return th.log(-1 + th.exp(y))
        """,
        (4,),
        """\
        import torch as th

        def inverse_softplus(y):
            return th.log(th.expm1(y))
        """,
    ),
    # .sub(1) and ones_like as divisors, in a loss helper
    Flagged(
        """\
        import torch

        def occupancy(energy, t):
            a = 1.0 / energy.div(t).exp().sub(1)
            b = energy / (torch.exp(energy / t) - torch.ones_like(energy))
            return (a + b).mean()
        """,
        (4, 5),
        """\
        import torch

        def occupancy(energy, t):
            a = 1.0 / energy.div(t).expm1()
            b = energy / (torch.expm1(energy / t))
            return (a + b).mean()
        """,
    ),
    # the exp through a name read only here: its assignment is rewritten
    Flagged(
        """\
        import torch

        def bose(energy, temperature):
            boltz = torch.exp(energy / temperature)
            return 1.0 / (boltz - 1)
        """,
        (5,),
        """\
        import torch

        def bose(energy, temperature):
            boltz = torch.expm1(energy / temperature)
            return 1.0 / (boltz)
        """,
        message="the fix makes `boltz` hold",
    ),
    # the exp read elsewhere too: recomputed at the subtraction
    Flagged(
        """\
        import torch

        def planck(x):
            e = torch.exp(x)
            return x ** 3 / (e - 1) + e
        """,
        (5,),
        """\
        import torch

        def planck(x):
            e = torch.exp(x)
            return x ** 3 / (torch.expm1(x)) + e
        """,
    ),
    # the form assigned to a name that then divides, in a training step
    Flagged(
        """\
        import torch

        def train_step(model, opt, x0, h):
            gain = torch.exp(h) - 1.0
            loss = (model(x0) * h / gain - x0).pow(2).mean()
            loss.backward()
            opt.step()
        """,
        (4,),
        """\
        import torch

        def train_step(model, opt, x0, h):
            gain = torch.expm1(h)
            loss = (model(x0) * h / gain - x0).pow(2).mean()
            loss.backward()
            opt.step()
        """,
    ),
    # `from torch import exp`, a third-order phi: exp(h) - 1 - h over h ** 2
    Flagged(
        """\
        import torch
        from torch import exp

        def phi_2(h):
            return (exp(h) - 1 - h) / h ** 2
        """,
        (5,),
        """\
        import torch
        from torch import exp

        def phi_2(h):
            return (torch.expm1(h) - h) / h ** 2
        """,
    ),
]

TNL107_SILENT = [
    # not torch's exp
    Silent(
        """\
        import math
        import numpy as np
        import torch

        def f(x, t):
            return x * (math.exp(t) - 1) + np.exp(t) - 1
        """
    ),
    # already expm1; exp(x - 1); exp(x) - 2; exp(x) + 1
    Silent(
        """\
        import torch

        def f(x):
            return torch.expm1(x) + torch.exp(x - 1) + (torch.exp(x) - 2) + (torch.exp(x) + 1)
        """
    ),
    # integer exponents have no cancellation
    Silent(
        """\
        import torch

        def f(n, lengths):
            k = torch.arange(n)
            return torch.exp(k.float()) - 1 + (lengths.exp() - 1)
        """
    ),
    # 1 - exp(x) is -(exp(x) - 1), but the sign makes it another form; exp(x) * y - 1 is no exp - 1
    Silent(
        """\
        import torch

        def f(x, y):
            return (torch.exp(x) * y - 1) + torch.exp(x).sum() - 1
        """
    ),
    # uniform noise
    Silent(
        """\
        import torch

        def f(x):
            u = torch.rand_like(x)
            return torch.exp(u) - 1
        """
    ),
    # expm1's own definition
    Silent(
        """\
        import torch

        def expm1(x):
            return torch.exp(x) - 1
        """
    ),
    # a subtraction of one from something else
    Silent(
        """\
        import torch

        def f(x, e):
            return (x.sigmoid() - 1) + (e.log() - 1) + (x - 1).exp()
        """
    ),
    # where the error is lost in what it is added to or scales: an ELU, an update, a loss weight,
    # a noise scale, a VAE's KL term (diffusers, kornia, speechbrain on the corpus)
    Silent(
        """\
        import torch
        from torch import nn

        class Act(nn.Module):
            def forward(self, x):
                return torch.where(x > 0, x, self.alpha * (x.exp() - 1))
        """
    ),
    Silent(
        """\
        import torch

        def clip(output, max_val, scale):
            output[output > max_val] = -scale * (torch.exp(-output[output > max_val] + max_val) - 1.0) + max_val
            return output
        """
    ),
    Silent(
        """\
        import torch

        def weighted(diff_range, beta, max_weight, logvar, mu, h, x0):
            w = ((beta * diff_range).exp() - 1.0).clamp(max=max_weight)
            kl = 0.5 * (logvar.exp() - 1 - logvar + mu.pow(2)).sum()
            sigma = torch.sqrt(torch.exp(2 * h) - 1.0)
            return w.mean() + kl + sigma * x0
        """
    ),
    # an exp of a log, minus one, in a Python number
    Silent(
        """\
        import math
        import torch

        def lr(step: int, base: float):
            return base * (math.exp(step / 1000) - 1)
        """
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL107", TNL107_FLAGGED, TNL107_SILENT))
def test_tnl107(code, case):
    harness.check(code, case)


# An integer tensor converted right at the log (a duration target: `1 + n` is exact) is left alone;
# a float feature is still reported.
DURATION_TARGET = """
    import torch
    import torch.nn.functional as F
    def duration_loss(pred, target):
        return F.mse_loss(pred.float(), torch.log(target.float() + 1))
    """


@pytest.mark.parametrize(
    "code, case",
    harness.params(
        "TNL106",
        flagged=[
            Flagged(
                DURATION_TARGET.replace("target.float() + 1", "target + 1"),
                (5,),
                DURATION_TARGET.replace("torch.log(target.float() + 1)", "torch.log1p(target)"),
            )
        ],
        silent=[Silent(DURATION_TARGET)],
    ),
)
def test_a_value_cast_to_float_at_the_log_is_an_integer_converted(code, case):
    harness.check(code, case)
