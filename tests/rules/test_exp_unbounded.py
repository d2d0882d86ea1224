"""TNL211 exp-unbounded (off by default): `exp` of a value in log space that nothing bounds above;
the clamp fix; the look-alikes left alone."""

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent

TNL211_FLAGGED = [
    Flagged(
        """\
        import torch

        def kl_loss(mu, logvar):
            return -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        """,
        (4,),
        """\
        import torch

        def kl_loss(mu, logvar):
            return -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.clamp(max=80.0).exp())
        """,
    ),
    Flagged(  # the reparameterisation's std
        """\
        import torch

        def reparameterize(mu, log_var):
            std = torch.exp(0.5 * log_var)
            return mu + torch.randn_like(std) * std
        """,
        (4,),
        """\
        import torch

        def reparameterize(mu, log_var):
            std = torch.exp((0.5 * log_var).clamp(max=80.0))
            return mu + torch.randn_like(std) * std
        """,
    ),
    Flagged(  # a learned temperature on a module
        """\
        import torch

        class Contrast(torch.nn.Module):
            def forward(self, a, b):
                return a @ b.T * self.log_temperature.exp()
        """,
        (5,),
        """\
        import torch

        class Contrast(torch.nn.Module):
            def forward(self, a, b):
                return a @ b.T * self.log_temperature.clamp(max=80.0).exp()
        """,
    ),
    Flagged(  # a predicted log-scale
        """\
        import torch

        def flow_step(x, net):
            log_scale, shift = net(x).chunk(2, dim=-1)
            return x * torch.exp(log_scale) + shift
        """,
        (5,),
        """\
        import torch

        def flow_step(x, net):
            log_scale, shift = net(x).chunk(2, dim=-1)
            return x * torch.exp(log_scale.clamp(max=80.0)) + shift
        """,
    ),
    Flagged(  # log sigma of a Gaussian policy
        """\
        import torch

        def policy_std(head_out):
            log_sigma = head_out[..., 1]
            return torch.exp(log_sigma)
        """,
        (5,),
        """\
        import torch

        def policy_std(head_out):
            log_sigma = head_out[..., 1]
            return torch.exp(log_sigma.clamp(max=80.0))
        """,
    ),
    Flagged(  # camelCase and a division
        """\
        import torch

        def precision(logVar):
            return torch.exp(-logVar / 2)
        """,
        (4,),
        """\
        import torch

        def precision(logVar):
            return torch.exp((-logVar / 2).clamp(max=80.0))
        """,
    ),
    Flagged(  # logstd, a torch alias
        """\
        import torch as th

        def sample(mean, logstd):
            return mean + th.randn_like(mean) * th.exp(logstd)
        """,
        (4,),
        """\
        import torch as th

        def sample(mean, logstd):
            return mean + th.randn_like(mean) * th.exp(logstd.clamp(max=80.0))
        """,
    ),
    Flagged(  # a log rate
        """\
        import torch

        def poisson_nll(counts, log_rate):
            return (torch.exp(log_rate) - counts * log_rate).mean()
        """,
        (4,),
        """\
        import torch

        def poisson_nll(counts, log_rate):
            return (torch.exp(log_rate.clamp(max=80.0)) - counts * log_rate).mean()
        """,
    ),
]

TNL211_SILENT = [
    Silent("import torch\ndef f(logvar):\n    return torch.exp(logvar.clamp(-30.0, 20.0))\n"),
    Silent("import torch\ndef f(logvar):\n    logvar = torch.clamp(logvar, max=10)\n    return logvar.exp()\n"),
    Silent("import torch\ndef f(x):\n    return torch.exp(x)\n"),
    Silent("import torch\ndef f(scores):\n    return torch.exp(scores - scores.amax(-1, keepdim=True))\n"),
    Silent("import math\nimport torch\ndef f(log_scale: float):\n    return math.exp(log_scale)\n"),
    Silent("import numpy as np\nimport torch\ndef f(logvar):\n    return np.exp(logvar)\n"),
    Silent("import torch\ndef f(log_probs):\n    return torch.exp(log_probs)\n"),
    Silent("import torch\nimport torch.nn.functional as F\ndef f(log_var):\n    return torch.exp(-F.softplus(log_var))\n"),
]


@pytest.mark.parametrize("code, case", harness.params("TNL211", TNL211_FLAGGED, TNL211_SILENT))
def test_exp_unbounded(code, case):
    harness.check(code, case)
