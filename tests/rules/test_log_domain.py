"""TNL103 log-of-softmax and TNL104 log-of-sigmoid: the forms caught, the exact fixes, the
look-alikes left alone."""

import textwrap

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent
from torchnumlint.engine import lint_text
from torchnumlint.rules.registry import registry


def _d(code):
    return textwrap.dedent(code)


# ---------------------------------------------------------------------------------------------
# TNL103: flagged, with the exact fixed text (None: reported without a fix)

TNL103_FLAGGED = {
    "F-alias": (
        """\
        import torch
        import torch.nn.functional as F

        def f(x):
            return torch.log(F.softmax(x, dim=-1))
        """,
        [5],
        """\
        import torch
        import torch.nn.functional as F

        def f(x):
            return F.log_softmax(x, dim=-1)
        """,
    ),
    "from-torch.nn-import-functional": (
        """\
        import torch
        from torch.nn import functional as F

        def f(x):
            return torch.log(F.softmax(x, 1, dtype=torch.float32))
        """,
        [5],
        """\
        import torch
        from torch.nn import functional as F

        def f(x):
            return F.log_softmax(x, 1, dtype=torch.float32)
        """,
    ),
    "nn.functional": (
        """\
        import torch
        from torch import nn

        def f(x):
            return torch.log(nn.functional.softmax(x, dim=-1))
        """,
        [5],
        """\
        import torch
        from torch import nn

        def f(x):
            return nn.functional.log_softmax(x, dim=-1)
        """,
    ),
    "from-torch-import-log-softmax": (
        """\
        import torch
        from torch import log, softmax

        def f(x):
            return log(softmax(x, -1))
        """,
        [5],
        """\
        import torch
        from torch import log, softmax

        def f(x):
            return torch.log_softmax(x, -1)
        """,
    ),
    "from-torch-import-no-module-import": (
        """\
        from torch import log, softmax

        def f(x):
            return log(softmax(x, -1))
        """,
        [4],
        """\
        from torch import log, softmax
        import torch

        def f(x):
            return torch.log_softmax(x, -1)
        """,
    ),
    "torch.softmax": (
        """\
        import torch

        def f(x):
            return torch.log(torch.softmax(x, -1))
        """,
        [4],
        """\
        import torch

        def f(x):
            return torch.log_softmax(x, -1)
        """,
    ),
    "torch.special.softmax": (
        """\
        import torch

        def f(x):
            return torch.log(torch.special.softmax(x, dim=0))
        """,
        [4],
        """\
        import torch

        def f(x):
            return torch.special.log_softmax(x, dim=0)
        """,
    ),
    "method-softmax-method-log": (
        """\
        import torch

        def f(x):
            return x.softmax(-1).log()
        """,
        [4],
        """\
        import torch

        def f(x):
            return x.log_softmax(-1)
        """,
    ),
    "function-softmax-method-log": (
        """\
        import torch.nn.functional as F

        def f(x):
            return F.softmax(x, dim=-1).log()
        """,
        [4],
        """\
        import torch.nn.functional as F

        def f(x):
            return F.log_softmax(x, dim=-1)
        """,
    ),
    "method-softmax-function-log": (
        """\
        import torch

        def f(x):
            return torch.log(x.softmax(dim=-1))
        """,
        [4],
        """\
        import torch

        def f(x):
            return x.log_softmax(dim=-1)
        """,
    ),
    "through-a-name-read-once": (
        """\
        import torch
        import torch.nn.functional as F

        def f(model, x):
            probs = F.softmax(model(x), dim=-1)
            return torch.log(probs).mean()
        """,
        [6],
        """\
        import torch
        import torch.nn.functional as F

        def f(model, x):
            probs = F.log_softmax(model(x), dim=-1)
            return probs.mean()
        """,
    ),
    "through-a-name-read-twice-plain-input": (
        """\
        import torch
        import torch.nn.functional as F

        def f(x, y):
            p = F.softmax(x, dim=-1)
            return (p - y).sum() + torch.log(p).mean()
        """,
        [6],
        """\
        import torch
        import torch.nn.functional as F

        def f(x, y):
            p = F.softmax(x, dim=-1)
            return (p - y).sum() + F.log_softmax(x, dim=-1).mean()
        """,
    ),
    "through-two-names": (
        """\
        import torch

        def f(x):
            p = torch.softmax(x, -1)
            q = p
            return torch.log(q)
        """,
        [6],
        """\
        import torch

        def f(x):
            p = torch.softmax(x, -1)
            q = p
            return torch.log_softmax(x, -1)
        """,
    ),
    "through-two-names-of-a-call": (
        """\
        import torch

        def f(net, x):
            p = torch.softmax(net(x), -1)
            q = p
            return torch.log(q)
        """,
        [6],
        None,
    ),
    "entropy-inline": (
        """\
        import torch
        import torch.nn.functional as F

        def f(x):
            return -(F.softmax(x, -1) * torch.log(F.softmax(x, -1))).sum(-1)
        """,
        [5],
        """\
        import torch
        import torch.nn.functional as F

        def f(x):
            return -(F.softmax(x, -1) * F.log_softmax(x, -1)).sum(-1)
        """,
    ),
    "entropy-through-a-name": (
        """\
        import torch
        import torch.nn.functional as F

        def entropy(logits):
            p = F.softmax(logits / 2.0, dim=-1)
            return -(p * torch.log(p)).sum(dim=-1)
        """,
        [6],
        """\
        import torch
        import torch.nn.functional as F

        def entropy(logits):
            p = F.softmax(logits / 2.0, dim=-1)
            return -(p * F.log_softmax(logits / 2.0, dim=-1)).sum(dim=-1)
        """,
    ),
    "entropy-of-a-call-not-recomputed": (
        """\
        import torch
        import torch.nn.functional as F

        def entropy(model, x):
            p = F.softmax(model(x), dim=-1)
            return -(p * torch.log(p)).sum(dim=-1)
        """,
        [6],
        None,
    ),
    "entropy-input-rebound-later": (
        """\
        import torch
        import torch.nn.functional as F

        def entropy(x):
            p = F.softmax(x, dim=-1)
            h = -(p * torch.log(p)).sum(dim=-1)
            x = x * 2
            return h + p.sum() + x.sum()
        """,
        [6],
        None,
    ),
    "onehot-cross-entropy": (
        """\
        import torch
        import torch.nn.functional as F

        def f(x, onehot):
            return -(onehot * torch.log(F.softmax(x, dim=1))).sum(1).mean()
        """,
        [5],
        """\
        import torch
        import torch.nn.functional as F

        def f(x, onehot):
            return -(onehot * F.log_softmax(x, dim=1)).sum(1).mean()
        """,
    ),
    "nll-dim-1-to-cross-entropy": (
        """\
        import torch
        import torch.nn.functional as F

        def f(x, y, w):
            return F.nll_loss(torch.log(F.softmax(x, dim=1)), y, w, ignore_index=0, reduction="sum")
        """,
        [5],
        """\
        import torch
        import torch.nn.functional as F

        def f(x, y, w):
            return F.cross_entropy(x, y, w, ignore_index=0, reduction="sum")
        """,
    ),
    "nll-method-forms-to-cross-entropy": (
        """\
        import torch
        import torch.nn.functional as F

        def f(a, b, y):
            return F.nll_loss((a + b).softmax(1).log(), target=y)
        """,
        [5],
        """\
        import torch
        import torch.nn.functional as F

        def f(a, b, y):
            return F.cross_entropy(a + b, target=y)
        """,
    ),
    "nll-imported-by-name": (
        """\
        import torch
        from torch.nn.functional import nll_loss, softmax

        def f(x, y):
            return nll_loss(torch.log(softmax(x, 1)), y)
        """,
        [5],
        """\
        import torch
        from torch.nn.functional import nll_loss, softmax

        def f(x, y):
            return torch.nn.functional.cross_entropy(x, y)
        """,
    ),
    "nll-dim-minus-1-only-inner": (
        """\
        import torch
        import torch.nn.functional as F

        def f(x, y):
            return F.nll_loss(torch.log(F.softmax(x, dim=-1)), y)
        """,
        [5],
        """\
        import torch
        import torch.nn.functional as F

        def f(x, y):
            return F.nll_loss(F.log_softmax(x, dim=-1), y)
        """,
    ),
    "nll-softmax-dtype-only-inner": (
        """\
        import torch
        import torch.nn.functional as F

        def f(x, y):
            return F.nll_loss(torch.log(F.softmax(x, 1, dtype=torch.float64)), y)
        """,
        [5],
        """\
        import torch
        import torch.nn.functional as F

        def f(x, y):
            return F.nll_loss(F.log_softmax(x, 1, dtype=torch.float64), y)
        """,
    ),
    "nll-kwargs-only-inner": (
        """\
        import torch
        import torch.nn.functional as F

        def f(x, y, **kw):
            return F.nll_loss(torch.log(F.softmax(x, 1)), y, **kw)
        """,
        [5],
        """\
        import torch
        import torch.nn.functional as F

        def f(x, y, **kw):
            return F.nll_loss(F.log_softmax(x, 1), y, **kw)
        """,
    ),
    "nll-through-a-name-read-once": (
        """\
        import torch
        import torch.nn.functional as F

        def f(x, y):
            p = F.softmax(x, 1)
            return F.nll_loss(torch.log(p), y)
        """,
        [6],
        """\
        import torch
        import torch.nn.functional as F

        def f(x, y):
            p = F.log_softmax(x, 1)
            return F.nll_loss(p, y)
        """,
    ),
    "nll-through-a-name-read-twice": (
        """\
        import torch
        import torch.nn.functional as F

        def f(x, y):
            p = F.softmax(x, 1)
            return F.nll_loss(torch.log(p), y), p
        """,
        [6],
        """\
        import torch
        import torch.nn.functional as F

        def f(x, y):
            p = F.softmax(x, 1)
            return F.cross_entropy(x, y), p
        """,
    ),
    "multi-line-call": (
        """\
        import torch
        import torch.nn.functional as F

        def f(x):
            return torch.log(
                F.softmax(
                    x,
                    dim=-1,
                )
            )
        """,
        [5],
        """\
        import torch
        import torch.nn.functional as F

        def f(x):
            return F.log_softmax(
                    x,
                    dim=-1,
                )
        """,
    ),
    "nested-in-expression": (
        """\
        import torch
        import torch.nn.functional as F

        def f(x, y, w):
            return w * (y - (torch.log(F.softmax(x, -1)) * 0.5)).abs().sum()
        """,
        [5],
        """\
        import torch
        import torch.nn.functional as F

        def f(x, y, w):
            return w * (y - (F.log_softmax(x, -1) * 0.5)).abs().sum()
        """,
    ),
    "gather-of-a-softmax": (
        """\
        import torch
        import torch.nn.functional as F

        def f(logits, actions):
            probs = F.softmax(logits, dim=-1)
            entropy = -(probs * torch.log(probs)).sum(-1)
            return torch.log(probs.gather(1, actions)), entropy
        """,
        [6, 7],
        """\
        import torch
        import torch.nn.functional as F

        def f(logits, actions):
            probs = F.softmax(logits, dim=-1)
            entropy = -(probs * F.log_softmax(logits, dim=-1)).sum(-1)
            return F.log_softmax(logits, dim=-1).gather(1, actions), entropy
        """,
    ),
    "index-of-a-softmax": (
        """\
        import torch

        def f(x):
            return torch.log(torch.softmax(x, -1)[:, 0])
        """,
        [4],
        """\
        import torch

        def f(x):
            return torch.log_softmax(x, -1)[:, 0]
        """,
    ),
    "implicit-dim-report-only": (
        """\
        import torch
        import torch.nn.functional as F

        def f(x):
            return torch.log(F.softmax(x))
        """,
        [5],
        None,
    ),
    "dim-None-report-only": (
        """\
        import torch
        import torch.nn.functional as F

        def f(x):
            return torch.log(F.softmax(x, dim=None))
        """,
        [5],
        None,
    ),
    "module-level": (
        """\
        import torch
        x = torch.randn(3, 4)
        p = torch.softmax(x, 1)
        lp = torch.log(p)
        """,
        [4],
        """\
        import torch
        x = torch.randn(3, 4)
        p = torch.softmax(x, 1)
        lp = torch.log_softmax(x, 1)
        """,
    ),
    "module-level-global-not-rewritten": (
        """\
        import torch
        p = torch.softmax(torch.randn(3, 4), 1)
        lp = torch.log(p)
        """,
        [3],
        None,
    ),
    "name-read-by-a-closure-not-rewritten": (
        """\
        import torch

        def f(net, x):
            p = torch.softmax(net(x), -1)
            g = lambda: p.sum()
            return torch.log(p), g
        """,
        [6],
        None,
    ),
    "parenthesised": (
        """\
        import torch
        import torch.nn.functional as F

        def f(x):
            return 2 * (torch.log((F.softmax(x, -1))))
        """,
        [5],
        """\
        import torch
        import torch.nn.functional as F

        def f(x):
            return 2 * (F.log_softmax(x, -1))
        """,
    ),
    "method-keeps-spelling-and-dtype": (
        """\
        import torch

        def f(x):
            return x.softmax(-1, dtype=torch.float64).log()
        """,
        [4],
        """\
        import torch

        def f(x):
            return x.log_softmax(-1, dtype=torch.float64)
        """,
    ),
    # in a loop, an assignment of the same iteration is inlined
    "loop-same-iteration-inlined": (
        """\
        import torch

        def f(xs):
            out = 0
            for x in xs:
                p = torch.softmax(x, -1)
                out = out + (p * torch.log(p)).sum()
            return out
        """,
        [7],
        """\
        import torch

        def f(xs):
            out = 0
            for x in xs:
                p = torch.softmax(x, -1)
                out = out + (p * torch.log_softmax(x, -1)).sum()
            return out
        """,
    ),
    # no inline where the value can differ: p may come from an earlier iteration's x
    "loop-conditional-assignment": (
        """\
        import torch

        def f(x, xs, first):
            out = 0
            for x in xs:
                if first:
                    p = torch.softmax(x, -1)
                out = out + (p * torch.log(p)).sum()
            return out
        """,
        [8],
        None,
    ),
    # assigned before the loop, input rebound by the loop
    "loop-input-rebound-by-the-loop": (
        """\
        import torch

        def f(x, xs, first):
            out = 0
            p = torch.softmax(x, -1)
            for x in xs:
                out = out + (p * torch.log(p)).sum()
            return out
        """,
        [7],
        None,
    ),
    # input updated later in the loop body
    "loop-input-updated-later": (
        """\
        import torch

        def f(x, xs, first):
            out = 0
            while out < 10:
                p = torch.softmax(x, -1)
                out = out + (p * torch.log(p)).sum()
                x = x * 2
            return out
        """,
        [7],
        None,
    ),
}


TNL103_CLEAN = {
    "plus-eps": """\
        import torch
        import torch.nn.functional as F
        def f(x, eps):
            return torch.log(F.softmax(x, -1) + eps)
        """,
    "eps-plus": """\
        import torch
        import torch.nn.functional as F
        def f(x):
            return torch.log(1e-8 + F.softmax(x, -1))
        """,
    "clamp_min": """\
        import torch
        def f(x):
            return torch.log(x.softmax(-1).clamp_min(1e-6))
        """,
    "clamp-min-kw": """\
        import torch
        def f(x, eps):
            return torch.softmax(x, -1).clamp(min=eps).log()
        """,
    "name-guarded-in-assignment": """\
        import torch
        def f(x, eps):
            p = torch.softmax(x, -1).clamp(min=eps)
            return torch.log(p)
        """,
    "name-clamped-in-place": """\
        import torch
        def f(x):
            p = torch.softmax(x, -1)
            p.clamp_(min=1e-6)
            return torch.log(p)
        """,
    "name-reassigned-in-between": """\
        import torch
        def f(x, m):
            p = torch.softmax(x, -1)
            p = p * m + (1 - m)
            return torch.log(p)
        """,
    "name-assigned-in-branches": """\
        import torch
        def f(x, flag):
            if flag:
                p = torch.softmax(x, -1)
            else:
                p = torch.sigmoid(x)
            return torch.log(p)
        """,
    "softmax-then-log-of-another-name": """\
        import torch
        def f(x, q):
            p = torch.softmax(x, -1)
            return torch.log(q) + p
        """,
    "log-of-log_softmax": """\
        import torch
        import torch.nn.functional as F
        def f(x):
            return torch.log(-F.log_softmax(x, -1)) + F.log_softmax(x, -1).log()
        """,
    "math-and-numpy-log": """\
        import math
        import numpy as np
        import torch
        def f(x, n):
            p = torch.softmax(x, -1)
            return math.log(n) + np.log(p.detach().numpy()).sum() + np.log(np.exp(1.0))
        """,
    "lightning-self-log": """\
        import torch
        import torch.nn.functional as F
        class Model:
            def training_step(self, x):
                probs = F.softmax(x, -1)
                self.log("probs", probs)
                self.log("max", F.softmax(x, -1).max(), prog_bar=True)
                return probs
        """,
    "logger-log": """\
        import logging
        import torch
        def f(x):
            logging.log(20, torch.softmax(x, -1))
        """,
    "name-in-another-scope": """\
        import torch
        p = torch.softmax(torch.randn(3), -1)
        def f(p):
            return torch.log(p)
        """,
    "torch-log-with-out": """\
        import torch
        def f(x, buf):
            return torch.log(torch.softmax(x, -1), out=buf)
        """,
    "where-guard": """\
        import torch
        def f(x, m):
            p = torch.softmax(x, -1)
            return torch.log(torch.where(m, p, 1.0))
        """,
    "maximum-guard": """\
        import torch
        def f(x, eps):
            return torch.log(torch.maximum(torch.softmax(x, -1), eps))
        """,
    "cross-entropy-on-logits": """\
        import torch.nn.functional as F
        def f(x, y):
            return F.cross_entropy(x, y) + F.nll_loss(F.log_softmax(x, 1), y)
        """,
}


def _table(flagged, clean):
    """The dict tables above as harness cases: (source, lines, fixed) and look-alike sources."""
    return [Flagged(code, tuple(lines), after) for code, lines, after in flagged.values()], [Silent(c) for c in clean.values()]


@pytest.mark.parametrize("code, case", harness.params("TNL103", *_table(TNL103_FLAGGED, TNL103_CLEAN)))
def test_tnl103_table(code, case):
    harness.check(code, case)


# ---------------------------------------------------------------------------------------------
# TNL104

TNL104_FLAGGED = {
    "torch-sigmoid-import-torch-only": (
        """\
        import torch

        def f(x):
            return torch.log(torch.sigmoid(x))
        """,
        [4],
        """\
        import torch

        def f(x):
            return torch.nn.functional.logsigmoid(x)
        """,
    ),
    "no-torch-import-adds-F": (
        """\
        from torch import log, sigmoid

        def f(x):
            return log(sigmoid(x))
        """,
        [4],
        """\
        from torch import log, sigmoid
        import torch.nn.functional as F

        def f(x):
            return F.logsigmoid(x)
        """,
    ),
    "one-minus-with-F-alias": (
        """\
        import torch
        import torch.nn.functional as F

        def f(x):
            return torch.log(1 - torch.sigmoid(x))
        """,
        [5],
        """\
        import torch
        import torch.nn.functional as F

        def f(x):
            return F.logsigmoid(-x)
        """,
    ),
    "one-minus-parenthesises-sum": (
        """\
        import torch
        import torch.nn.functional as F

        def f(a, b):
            return torch.log(1.0 - torch.sigmoid(a + b))
        """,
        [5],
        """\
        import torch
        import torch.nn.functional as F

        def f(a, b):
            return F.logsigmoid(-(a + b))
        """,
    ),
    "one-minus-negated-input": (
        """\
        import torch
        import torch.nn.functional as F

        def f(a):
            return torch.log(1 - torch.sigmoid(-a)) + torch.log(1 - F.sigmoid(a ** 2))
        """,
        [5, 5],
        """\
        import torch
        import torch.nn.functional as F

        def f(a):
            return F.logsigmoid(-(-a)) + F.logsigmoid(-(a ** 2))
        """,
    ),
    "method-forms": (
        """\
        import torch.nn.functional as F

        def f(x, w):
            return x.sigmoid().log() + (1 - (x @ w).sigmoid()).log()
        """,
        [4, 4],
        """\
        import torch.nn.functional as F

        def f(x, w):
            return F.logsigmoid(x) + F.logsigmoid(-(x @ w))
        """,
    ),
    "special-expit": (
        """\
        import torch
        from torch.nn import functional as F

        def f(x):
            return torch.log(torch.special.expit(x.mean(0)))
        """,
        [5],
        """\
        import torch
        from torch.nn import functional as F

        def f(x):
            return F.logsigmoid(x.mean(0))
        """,
    ),
    "name-of-sigmoid-read-twice": (
        """\
        import torch
        import torch.nn.functional as F

        def bce(z, y):
            s = torch.sigmoid(z)
            return -(y * torch.log(s) + (1 - y) * torch.log(1 - s)).mean()
        """,
        [6, 6],
        """\
        import torch
        import torch.nn.functional as F

        def bce(z, y):
            s = torch.sigmoid(z)
            return -(y * F.logsigmoid(z) + (1 - y) * F.logsigmoid(-z)).mean()
        """,
    ),
    "name-of-one-minus-read-once": (
        """\
        import torch
        import torch.nn.functional as F

        def f(net, x):
            q = 1 - torch.sigmoid(net(x))
            return torch.log(q).sum()
        """,
        [6],
        """\
        import torch
        import torch.nn.functional as F

        def f(net, x):
            q = F.logsigmoid(-net(x))
            return q.sum()
        """,
    ),
    "name-of-a-call-read-twice": (
        """\
        import torch

        def f(net, x):
            s = torch.sigmoid(net(x))
            return torch.log(s) + s
        """,
        [5],
        None,
    ),
    "log1p-of-minus-sigmoid": (
        """\
        import torch
        import torch.nn.functional as F

        def f(x):
            return torch.log1p(-torch.sigmoid(x))
        """,
        [5],
        """\
        import torch
        import torch.nn.functional as F

        def f(x):
            return F.logsigmoid(-x)
        """,
    ),
    "multi-line": (
        """\
        import torch
        import torch.nn.functional as F

        def f(x, b):
            return torch.log(
                1 - torch.sigmoid(
                    x + b
                )
            )
        """,
        [5],
        """\
        import torch
        import torch.nn.functional as F

        def f(x, b):
            return F.logsigmoid(-(x + b))
        """,
    ),
}


TNL104_CLEAN = {
    "plus-eps": """\
        import torch
        def f(x, eps):
            return torch.log(torch.sigmoid(x) + eps) + torch.log(1 - torch.sigmoid(x) + eps)
        """,
    "clamp": """\
        import torch
        def f(x):
            return torch.sigmoid(x).clamp_min(1e-6).log() + torch.log((1 - x.sigmoid()).clamp(min=1e-6))
        """,
    "name-clamped": """\
        import torch
        def f(x):
            s = torch.sigmoid(x).clamp(1e-6, 1 - 1e-6)
            return torch.log(s) + torch.log(1 - s)
        """,
    "two-minus": """\
        import torch
        def f(x):
            return torch.log(2 - torch.sigmoid(x)) + torch.log(torch.sigmoid(x) - 1)
        """,
    "logsigmoid": """\
        import torch.nn.functional as F
        def f(x):
            return F.logsigmoid(x) + F.logsigmoid(-x)
        """,
    "not-torch-log": """\
        import math
        import numpy as np
        import torch
        def f(x, s):
            self_log = s.log("sigmoid", torch.sigmoid(x))
            return math.log(0.5) + np.log(1 - np.exp(-1.0)) + self_log
        """,
    "log1p-plus-sigmoid": """\
        import torch
        def f(x):
            return torch.log1p(torch.sigmoid(x))
        """,
    # only ranked, where no gradient flows
    "ranked-only-under-no-grad": """\
        import torch

        @torch.no_grad()
        def best(scores):
            return torch.log(torch.sigmoid(scores)).topk(5).indices
        """,
}


@pytest.mark.parametrize("code, case", harness.params("TNL104", *_table(TNL104_FLAGGED, TNL104_CLEAN)))
def test_tnl104_table(code, case):
    harness.check(code, case)


def test_both_rules_default_on():
    code = """\
        import torch
        def f(x):
            return torch.log(torch.softmax(x, -1)) + torch.log(torch.sigmoid(x))
        """
    defaults = [rule for rule in registry().values() if rule.default]
    assert [(f.code, f.line) for f in lint_text("m.py", _d(code), defaults)] == [("TNL103", 3), ("TNL104", 3)]


# ---------------------------------------------------------------------------------------------
# What the -inf is used for: ranked where no gradient flows (silent), a loss (Inf), a product (NaN)


def _messages(code, rule):
    return [f.message for f in lint_text("m.py", _d(code), [registry()[rule]])]


RANKED_ONLY = {
    "beam-search-under-no-grad-decorator": """\
        import numpy as np
        import torch

        class Captioner(torch.nn.Module):
            @torch.no_grad()
            def beam(self, h, steps, width):
                scores = None
                for _ in range(steps):
                    logits = self.head(h)
                    logits = logits.softmax(-1).log()
                    if scores is None:
                        scores, tokens = logits.topk(width, -1)
                    else:
                        logits[self.finished] = -float(np.inf)
                        total = scores[:, None] + logits
                        mean = total / self.lengths[:, None]
                        mean, tokens = mean.view(-1).topk(width, -1)
                        scores = mean * self.lengths
                    h = self.step(h, tokens)
                return scores
        """,
    "greedy-decoding-in-a-no-grad-block": """\
        import torch
        import torch.nn.functional as F

        def decode(model, x):
            with torch.no_grad():
                return torch.log(F.softmax(model(x), dim=-1)).argmax(dim=-1)
        """,
    "gumbel-sampling-indices-carry-no-gradient": """\
        import torch
        import torch.nn.functional as F

        def sample(logits, noise):
            log_probs = torch.log(F.softmax(logits, dim=-1))
            return torch.argmax(log_probs + noise, dim=-1)
        """,
    "a-threshold-test": """\
        import torch

        def confident(logits, floor):
            return torch.log(logits.softmax(-1)) > floor
        """,
}


RANKED_BUT_REPORTED = {
    # topk values carry a gradient when no no_grad is around
    "topk-values-in-training": (
        """\
        import torch
        import torch.nn.functional as F

        def top_scores(logits, k):
            scores, idx = torch.log(F.softmax(logits, -1)).topk(k, -1)
            return scores
        """,
        [5],
        """\
        import torch
        import torch.nn.functional as F

        def top_scores(logits, k):
            scores, idx = F.log_softmax(logits, -1).topk(k, -1)
            return scores
        """,
    ),
    # ranked, but also returned: what the caller does with the -inf is unknown
    "ranked-and-returned": (
        """\
        import torch
        import torch.nn.functional as F

        @torch.no_grad()
        def decode(logits):
            log_probs = torch.log(F.softmax(logits, -1))
            return log_probs.argmax(-1), log_probs
        """,
        [6],
        """\
        import torch
        import torch.nn.functional as F

        @torch.no_grad()
        def decode(logits):
            log_probs = F.log_softmax(logits, -1)
            return log_probs.argmax(-1), log_probs
        """,
    ),
    # read by a nested function: not followed
    "read-in-a-closure": (
        """\
        import torch

        @torch.no_grad()
        def decode(logits):
            lp = torch.log(logits.softmax(-1))
            pick = lambda: lp.sum()
            return lp.argmax(-1), pick
        """,
        [5],
        """\
        import torch

        @torch.no_grad()
        def decode(logits):
            lp = logits.log_softmax(-1)
            pick = lambda: lp.sum()
            return lp.argmax(-1), pick
        """,
    ),
}


@pytest.mark.parametrize("code, case", harness.params("TNL103", *_table(RANKED_BUT_REPORTED, RANKED_ONLY)))
def test_log_probabilities_are_reported_unless_only_ranked(code, case):
    harness.check(code, case)


def test_message_names_the_consequence_of_each_use():
    loss = """\
        import torch
        import torch.nn.functional as F

        class Classifier(torch.nn.Module):
            def training_step(self, x, y):
                probs = F.softmax(self.net(x), dim=1)
                return F.nll_loss(torch.log(probs), y) + probs.mean()
        """
    (message,) = _messages(loss, "TNL103")
    assert "makes the loss Inf once a probability underflows to 0 (logit spread > ~104 in fp32, ~17 in fp16)" in message
    entropy = """\
        import torch

        def entropy_bonus(logits):
            p = logits.softmax(-1)
            return -(p * torch.log(p)).sum(-1).mean()
        """
    (message,) = _messages(entropy, "TNL103")
    assert "0 * -inf = NaN in the forward pass and the gradient" in message
    in_eval = entropy.replace("def entropy_bonus", "@torch.no_grad()\n        def entropy_bonus")
    (message,) = _messages(in_eval, "TNL103")
    assert "0 * -inf = NaN in the forward pass;" in message
    generic = """\
        import torch

        def head(logits):
            return torch.log(logits.softmax(-1))
        """
    (message,) = _messages(generic, "TNL103")
    assert "(then NaN in 0 * log 0 and in the gradient)" in message


PROBS_REWRITTEN = Flagged(
    """\
    import torch
    import torch.nn.functional as F

    def loss_fn(logits, y):
        probs = F.softmax(logits, dim=-1)
        return -torch.log(probs).gather(1, y[:, None]).mean()
    """,
    (6,),
    """\
    import torch
    import torch.nn.functional as F

    def loss_fn(logits, y):
        probs = F.log_softmax(logits, dim=-1)
        return -probs.gather(1, y[:, None]).mean()
    """,
    message="(the fix makes `probs` hold log-probabilities)",
)


@pytest.mark.parametrize("code, case", harness.params("TNL103", [PROBS_REWRITTEN]))
def test_a_rewritten_name_now_holds_log_probabilities(code, case):
    harness.check(code, case)


def test_message_says_a_rewritten_name_now_holds_log_probabilities():
    (message,) = _messages(PROBS_REWRITTEN.source, "TNL103")
    assert message.endswith("(the fix makes `probs` hold log-probabilities)")
    inline = "import torch\n\ndef f(x):\n    return torch.log(torch.softmax(x, -1))\n"
    assert "hold log-probabilities" not in _messages(inline, "TNL103")[0]


def test_tnl104_gradient_free_messages():
    evaluated = """\
        import torch

        @torch.no_grad()
        def mean_log_gate(scores):
            return torch.log(torch.sigmoid(scores)).mean()
        """
    (message,) = _messages(evaluated, "TNL104")
    assert "NaN gradients" not in message
    (message,) = _messages(evaluated.replace("        @torch.no_grad()\n", ""), "TNL104")
    assert "(then NaN gradients)" in message


NOT_TORCH = {
    "numpy-and-scipy": """\
        import numpy as np
        import scipy.special

        def log_probs(x):
            return np.log(scipy.special.softmax(x, axis=-1))
        """,
    "local-python-sigmoid": """\
        import math

        def sigmoid(x):
            return 1 / (1 + math.exp(-x))

        def log_odds(x):
            return math.log(sigmoid(x)) - math.log(1 - sigmoid(x))
        """,
    "jax": """\
        import jax
        import jax.numpy as jnp

        def log_probs(x):
            return jnp.log(jax.nn.softmax(x)) + jnp.log(jax.nn.sigmoid(x))
        """,
    # a torch file that also has a numpy sigmoid of its own
    "numpy-helper-in-a-torch-file": """\
        import numpy as np
        import torch

        def sigmoid(x):
            return 1 / (1 + np.exp(-x))

        def calibrate(scores):
            s = sigmoid(scores)
            return np.log(s), np.log(1 - s), torch.as_tensor(s).log()
        """,
}


@pytest.mark.parametrize("code, case", harness.params("TNL103", silent=[Silent(c, together=("TNL104",)) for c in NOT_TORCH.values()]))
def test_logs_of_other_libraries_probabilities_are_not_reported(code, case):
    harness.check(code, case)


def test_entropy_of_a_detached_distribution_names_only_the_forward_pass():
    code = """\
        import torch

        def target_entropy(scores, T):
            p = (scores.detach() / T).softmax(-1)
            return -(p * p.log()).sum(-1)
        """
    (message,) = _messages(code, "TNL103")
    assert "0 * -inf = NaN in the forward pass;" in message


# ---------------------------------------------------------------------------------------------
# Hand-written shapes: a softmax written as exp / sum for TNL103, the probability a sigmoid gives a
# label for TNL104. Measured (torch 2.13, CPU): with the max subtracted, log(e / e.sum(-1,
# keepdim=True)) is still -inf from a spread of 104.0 in fp32, with a NaN gradient for the row.

HAND_SOFTMAX = [
    # inline in a loss, through a name read only by the log: the assignment becomes log_softmax
    Flagged(
        """\
        import torch
        import torch.nn.functional as F

        def loss_fn(logits, y):
            p = torch.exp(logits) / torch.exp(logits).sum(-1, keepdim=True)
            return F.nll_loss(torch.log(p), y)
        """,
        (6,),
        """\
        import torch
        import torch.nn.functional as F

        def loss_fn(logits, y):
            p = F.log_softmax(logits, -1)
            return F.nll_loss(p, y)
        """,
    ),
    # through names, method forms: the exp the fix leaves unread goes too
    Flagged(
        """\
        import torch

        def log_probs(scores):
            e = scores.exp()
            probs = e / e.sum(dim=1, keepdim=True)
            return torch.log(probs)
        """,
        (6,),
        """\
        import torch

        def log_probs(scores):
            probs = torch.nn.functional.log_softmax(scores, dim=1)
            return probs
        """,
    ),
    # an entropy: p is read again, so the log is recomputed from the logits; e stays (p reads it)
    Flagged(
        """\
        import torch
        import torch.nn.functional as F

        def entropy(x):
            e = x.exp()
            p = e / e.sum(-1, keepdim=True)
            return -(p * p.log()).sum(-1)
        """,
        (7,),
        """\
        import torch
        import torch.nn.functional as F

        def entropy(x):
            e = x.exp()
            p = e / e.sum(-1, keepdim=True)
            return -(p * F.log_softmax(x, -1)).sum(-1)
        """,
    ),
    # inline in the log, gathered
    Flagged(
        """\
        import torch
        import torch.nn.functional as F

        def nll(x, y):
            return -torch.log(x.exp() / x.exp().sum(1, keepdim=True)).gather(1, y[:, None]).mean()
        """,
        (5,),
        """\
        import torch
        import torch.nn.functional as F

        def nll(x, y):
            return -F.log_softmax(x, 1).gather(1, y[:, None]).mean()
        """,
    ),
    # max-subtracted: still a softmax whose log is -inf; reported without a fix
    Flagged(
        """\
        import torch

        def entropy(x):
            e = torch.exp(x - x.max(dim=-1, keepdim=True).values)
            p = e / e.sum(-1, keepdim=True)
            return -(p * p.log()).sum(-1)
        """,
        (6,),
    ),
    # attention weights with torch.max(...)[0], the name rebound
    Flagged(
        """\
        import torch

        def attention_log_weights(q, k):
            s = q @ k.transpose(-1, -2)
            w = torch.exp(s - torch.max(s, -1, keepdim=True)[0])
            w = w / w.sum(-1, keepdim=True)
            return torch.log(w)
        """,
        (7,),
    ),
    # a module's forward, logits from a layer (not recomputed: a call), one-hot targets
    Flagged(
        """\
        import torch

        class Head(torch.nn.Module):
            def forward(self, h, y):
                e = self.proj(h).exp()
                p = e / e.sum(dim=1, keepdim=True)
                return -(y * torch.log(p)).sum(1).mean()
        """,
        (7,),
    ),
    # a training step, torch.sum function form
    Flagged(
        """\
        import torch

        def training_step(model, batch):
            x, y = batch
            z = model(x)
            p = torch.exp(z) / torch.sum(torch.exp(z), dim=-1, keepdim=True)
            return -torch.log(p)[torch.arange(len(y)), y].mean()
        """,
        (7,),
        """\
        import torch

        def training_step(model, batch):
            x, y = batch
            z = model(x)
            p = torch.nn.functional.log_softmax(z, dim=-1)
            return -p[torch.arange(len(y)), y].mean()
        """,
    ),
]

HAND_SOFTMAX_LOOK_ALIKES = [
    # clamped before the log
    Silent(
        """\
        import torch

        def f(x):
            e = x.exp()
            p = e / e.sum(-1, keepdim=True)
            return torch.log(p.clamp_min(1e-12))
        """
    ),
    Silent(
        """\
        import torch

        def f(x, eps=1e-8):
            p = torch.exp(x) / torch.exp(x).sum(-1, keepdim=True)
            return torch.log(p + eps)
        """
    ),
    # already log-space
    Silent(
        """\
        import torch
        import torch.nn.functional as F

        def f(x):
            lp = F.log_softmax(x, -1)
            return lp - torch.log(torch.exp(lp).sum(-1, keepdim=True))
        """
    ),
    # an exp of log-probabilities renormalised (sampling after filtering): -inf is meant there
    Silent(
        """\
        import torch

        def renormalised(log_probs):
            p = log_probs.exp()
            return torch.log(p / p.sum(-1, keepdim=True))
        """
    ),
    Silent(
        """\
        import torch
        import torch.nn.functional as F

        def f(x):
            lp = F.log_softmax(x, -1)
            return torch.log(lp.exp() / lp.exp().sum(-1, keepdim=True))
        """
    ),
    # data that carries no gradient: weights from fixed scores
    Silent(
        """\
        import torch

        def weights(scores):
            s = torch.tensor(scores)
            w = torch.exp(s) / torch.exp(s).sum(0, keepdim=True)
            return torch.log(w)
        """
    ),
    # not a softmax: no keepdim (a different broadcast), different exps, a mean
    Silent(
        """\
        import torch

        def f(x, y):
            a = torch.log(torch.exp(x) / torch.exp(x).sum(-1))
            b = torch.log(torch.exp(x) / torch.exp(y).sum(-1, keepdim=True))
            return a + b + torch.log(x.exp() / x.exp().mean(-1, keepdim=True))
        """
    ),
    # a log of the normaliser only (logsumexp, another rule's)
    Silent(
        """\
        import torch

        def f(x):
            e = x.exp()
            return torch.log(e.sum(-1, keepdim=True))
        """
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL103", HAND_SOFTMAX, HAND_SOFTMAX_LOOK_ALIKES))
def test_tnl103_hand_written_softmax(code, case):
    harness.check(code, case)


# The log of a sum of selected softmax entries (a set of correct classes: multi-positive
# contrastive losses, marginal likelihoods). Measured on torch 2.13 CPU: with logits [120, 0, 1, 2]
# in float32, `log(softmax(x)[:, [1, 2]].sum(-1))` is -inf and every gradient entry NaN (float64
# reference -118.69); two selected classes at a spread of 103 still give -102.59, at 104 -inf; in
# float16 -15.95 at 17, -inf at 18; an all-false mask gives -inf with a NaN gradient. The fix,
# `log_softmax(x)[sel].logsumexp(d)`, gives -118.69 and finite gradients there, matches the
# original to 4.4e-16 on float64 random logits, and is -inf too for an empty selection.
SELECTED_SUMS = [
    # multi-positive InfoNCE: the softmax name read only here becomes log-probabilities
    Flagged(
        """
        import torch
        import torch.nn.functional as F


        def multi_positive_nce(q, keys, pos_idx, tau=0.07):
            probs = F.softmax(q @ keys.t() / tau, dim=-1)
            loss = -torch.log(probs[:, pos_idx].sum(-1)).mean()
            loss.backward()
            return loss.detach()
        """,
        (8,),
        fixed="""
        import torch
        import torch.nn.functional as F


        def multi_positive_nce(q, keys, pos_idx, tau=0.07):
            probs = F.log_softmax(q @ keys.t() / tau, dim=-1)
            loss = -probs[:, pos_idx].logsumexp(-1).mean()
            loss.backward()
            return loss.detach()
        """,
        message="summed over `probs[:, pos_idx]`",
    ),
    # a gather with keepdim, the softmax read elsewhere too: recomputed at the log
    Flagged(
        """
        import torch


        class SetLikelihood(torch.nn.Module):
            def forward(self, logits, answer_ids):
                p = logits.softmax(1)
                nll = -torch.log(p.gather(1, answer_ids).sum(1, keepdim=True))
                return nll.mean(), p.argmax(1)
        """,
        (8,),
        fixed="""
        import torch


        class SetLikelihood(torch.nn.Module):
            def forward(self, logits, answer_ids):
                p = logits.softmax(1)
                nll = -logits.log_softmax(1).gather(1, answer_ids).logsumexp(1, keepdim=True)
                return nll.mean(), p.argmax(1)
        """,
    ),
    # a mask of the classes that match the labels: named, advice only (a mask may be soft), and
    # one finding where TNL207 also sees a sum over a selection that can be empty
    Flagged(
        """
        import torch
        import torch.nn.functional as F


        def marginal_loss(logits, label_sets):
            probs = F.softmax(logits, -1)
            pos_mask = label_sets > 0
            return -(probs * pos_mask).sum(-1).log().mean()
        """,
        (9,),
        message="the mask `pos_mask` keeps",
        together=("TNL207",),
    ),
]

SELECTED_SUMS_LOOK_ALIKES = [
    # a sum over every class (1), a clamped or eps-guarded one, weights that are no mask, and a
    # sum of selected entries only ranked without a gradient
    Silent(
        """
        import torch
        import torch.nn.functional as F


        def scores(logits, pos_idx, class_weights, eps=1e-8):
            p = F.softmax(logits, -1)
            total = torch.log(p.sum(-1))
            guarded = torch.log(p[:, pos_idx].sum(-1) + eps) + torch.log(p[:, pos_idx].sum(-1).clamp_min(eps))
            weighted = torch.log((p * class_weights).sum(-1))
            return total + guarded + weighted


        @torch.no_grad()
        def best_group(logits, groups):
            p = logits.softmax(-1)
            return torch.log(p[:, groups].sum(-1)).argmax(-1)
        """,
        together=("TNL207",),
    ),
    # picks of whole rows (each sums to 1), a gather along another dim than the sum, a slice
    Silent(
        """
        import torch
        import torch.nn.functional as F


        def row_checks(logits, valid, i, idx):
            p = F.softmax(logits, dim=-1)
            rows = torch.log(p[valid].sum(-1)) + torch.log(p[i].sum(-1))
            across = torch.log(p.gather(0, idx).sum(1))
            return rows.mean() + across.mean() + torch.log(p[:, :5].sum(-1)).mean()
        """,
        together=("TNL207",),
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL103", SELECTED_SUMS, SELECTED_SUMS_LOOK_ALIKES))
def test_tnl103_log_of_selected_softmax_sum(code, case):
    harness.check(code, case)


LABEL_PROBABILITY = [
    # BCE by hand through where: exact fix; p read only in the where goes with it
    Flagged(
        """\
        import torch
        import torch.nn.functional as F

        def bce(z, y):
            p = torch.sigmoid(z)
            return -torch.log(torch.where(y, p, 1 - p)).mean()
        """,
        (6,),
        """\
        import torch
        import torch.nn.functional as F

        def bce(z, y):
            return -F.logsigmoid(torch.where(y, z, -z)).mean()
        """,
    ),
    # the branches the other way round, p read elsewhere
    Flagged(
        """\
        import torch
        import torch.nn.functional as F

        def bce(z, y):
            p = torch.sigmoid(z)
            return -torch.log(torch.where(y, 1 - p, p)).mean() + p.sum()
        """,
        (6,),
        """\
        import torch
        import torch.nn.functional as F

        def bce(z, y):
            p = torch.sigmoid(z)
            return -F.logsigmoid(torch.where(y, -z, z)).mean() + p.sum()
        """,
    ),
    # through a name read only by the log: its assignment becomes log space
    Flagged(
        """\
        import torch
        import torch.nn.functional as F

        def log_likelihood(z, y):
            p = z.sigmoid()
            p_t = torch.where(y > 0, p, 1 - p)
            return torch.log(p_t).sum()
        """,
        (7,),
        """\
        import torch
        import torch.nn.functional as F

        def log_likelihood(z, y):
            p_t = F.logsigmoid(torch.where(y > 0, z, -z))
            return p_t.sum()
        """,
    ),
    # focal loss: p_t read twice, its condition a comparison (not recomputed): no fix
    Flagged(
        """\
        import torch

        def focal(z, y, gamma=2.0):
            p = torch.sigmoid(z)
            pt = torch.where(y == 1, p, 1 - p)
            return (-(1 - pt) ** gamma * torch.log(pt)).mean()
        """,
        (6,),
    ),
    # the product form: the log-likelihood only for 0/1 labels, no fix
    Flagged(
        """\
        import torch

        def focal(z, y, gamma=2.0):
            p = z.sigmoid()
            pt = p * y + (1 - p) * (1 - y)
            return (-((1 - pt) ** gamma) * torch.log(pt)).mean()
        """,
        (6,),
    ),
    # terms and factors in the other order, labels an attribute, the method-form log
    Flagged(
        """\
        import torch

        class Disc(torch.nn.Module):
            def training_step(self, real):
                p = torch.sigmoid(self.net(real.x))
                pt = (1 - real.label) * (1 - p) + real.label * p
                return -pt.log().mean()
        """,
        (7,),
    ),
    # inline, F.sigmoid, an attribute of a model output
    Flagged(
        """\
        import torch
        import torch.nn.functional as F

        def step(model, x, y):
            out = model(x)
            p = F.sigmoid(out.logits)
            return -torch.log(y * p + (1 - y) * (1 - p)).mean()
        """,
        (7,),
    ),
    # where with torch.special.expit, mask from a comparison, p read elsewhere: recomputed
    Flagged(
        """\
        import torch
        import torch.nn.functional as F

        def match_loss(scores, is_match):
            p = torch.special.expit(scores)
            ll = torch.log(torch.where(is_match, p, 1.0 - p))
            return -ll.mean(), p.detach()
        """,
        (6,),
        """\
        import torch
        import torch.nn.functional as F

        def match_loss(scores, is_match):
            p = torch.special.expit(scores)
            ll = F.logsigmoid(torch.where(is_match, scores, -scores))
            return -ll.mean(), p.detach()
        """,
    ),
]

LABEL_PROBABILITY_LOOK_ALIKES = [
    # a clamped p
    Silent(
        """\
        import torch

        def f(z, y):
            p = torch.sigmoid(z).clamp(1e-6, 1 - 1e-6)
            return torch.log(torch.where(y, p, 1 - p))
        """
    ),
    Silent(
        """\
        import torch

        def f(z, y, eps=1e-7):
            p = torch.sigmoid(z)
            return torch.log(torch.where(y, p, 1 - p) + eps)
        """
    ),
    Silent(
        """\
        import torch

        def f(z, y):
            p = torch.sigmoid(z)
            pt = (y * p + (1 - y) * (1 - p)).clamp_min(1e-6)
            return torch.log(pt)
        """
    ),
    # not a sigmoid: data probabilities, a softmax's where (TNL103 does not read where forms)
    Silent(
        """\
        import torch

        def f(p, y):
            return torch.log(torch.where(y, p, 1 - p))
        """
    ),
    # the branches are different values
    Silent(
        """\
        import torch

        def f(a, b, y):
            p, q = torch.sigmoid(a), torch.sigmoid(b)
            return torch.log(torch.where(y, p, 1 - q)) + torch.log(y * p + (1 - y) * (1 - q))
        """
    ),
    # already in log space
    Silent(
        """\
        import torch
        import torch.nn.functional as F

        def f(z, y):
            return torch.where(y, F.logsigmoid(z), F.logsigmoid(-z)) + F.logsigmoid(torch.where(y, z, -z))
        """
    ),
    # not a label probability: a mixture with a constant, a plain where with another fill
    Silent(
        """\
        import torch

        def f(z, y, m):
            p = torch.sigmoid(z)
            return torch.log(0.5 * p + 0.5) + torch.log(torch.where(m, p, 1.0))
        """
    ),
    # a where of the probabilities that is not logged
    Silent(
        """\
        import torch

        def f(z, y, gamma=2.0):
            p = torch.sigmoid(z)
            pt = torch.where(y, p, 1 - p)
            return (1 - pt) ** gamma
        """
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL104", LABEL_PROBABILITY, LABEL_PROBABILITY_LOOK_ALIKES))
def test_tnl104_label_probability_of_a_sigmoid(code, case):
    harness.check(code, case)


def test_label_probability_messages_name_the_form_and_the_replacement():
    where = """\
        import torch

        def bce(z, y):
            p = torch.sigmoid(z)
            return -torch.log(torch.where(y, p, 1 - p)).mean()
        """
    (message,) = _messages(where, "TNL104")
    assert "`where(y, p, 1 - p)` of a sigmoid `p`" in message and "F.logsigmoid(torch.where(y, x, -x))" in message
    product = where.replace("torch.where(y, p, 1 - p)", "y * p + (1 - y) * (1 - p)")
    (message,) = _messages(product, "TNL104")
    assert "for 0/1 labels" in message and "binary_cross_entropy_with_logits" in message


# ---------------------------------------------------------------------------------------------
# TNL207 unguarded-log: logs of values whose entries the code shows can be exactly 0

TNL207_FLAGGED = [
    Flagged(  # class log-prior from a batch's label counts: an absent class
        """\
        import torch

        def class_log_prior(labels, num_classes):
            counts = torch.bincount(labels, minlength=num_classes).float()
            return torch.log(counts / counts.sum())
        """,
        (5,),
        """\
        import torch

        def class_log_prior(labels, num_classes):
            counts = torch.bincount(labels, minlength=num_classes).float()
            return torch.log((counts / counts.sum()).clamp_min(1e-12))
        """,
        message="histogram",
    ),
    Flagged(  # codebook usage entropy, method form: 0 * log 0 = NaN; xlogy is exact
        """\
        import torch
        import torch.nn.functional as F

        def usage_entropy(assign):
            usage = F.relu(assign).sum(0)
            p = usage / usage.sum()
            return -(p * p.log()).sum()
        """,
        (7,),
        """\
        import torch
        import torch.nn.functional as F

        def usage_entropy(assign):
            usage = F.relu(assign).sum(0)
            p = usage / usage.sum()
            return -(torch.special.xlogy(p, p)).sum()
        """,
        safe=True,
        message="entropy",
    ),
    Flagged(  # Gumbel noise without eps
        """\
        import torch

        def gumbel_topk(logits, k):
            g = -torch.log(-torch.log(torch.rand_like(logits)))
            return torch.softmax(logits + g, dim=-1)
        """,
        (4,),
        """\
        import torch

        def gumbel_topk(logits, k):
            g = -torch.log(-torch.log(torch.rand_like(logits).clamp_min(1e-12)))
            return torch.softmax(logits + g, dim=-1)
        """,
        message="uniform draw",
    ),
    Flagged(  # exponential noise from an in-place uniform draw, method form
        """\
        import torch

        def exponential_race(rates):
            noise = torch.empty_like(rates).uniform_()
            return -noise.log() / rates
        """,
        (5,),
        """\
        import torch

        def exponential_race(rates):
            noise = torch.empty_like(rates).uniform_()
            return -noise.clamp_min(1e-12).log() / rates
        """,
    ),
    Flagged(  # relu features into a log-energy
        """\
        import torch
        import torch.nn.functional as F

        class LogEnergy(torch.nn.Module):
            def forward(self, x):
                return torch.log(F.relu(self.proj(x)))
        """,
        (6,),
        """\
        import torch
        import torch.nn.functional as F

        class LogEnergy(torch.nn.Module):
            def forward(self, x):
                return torch.log(F.relu(self.proj(x)).clamp_min(1e-12))
        """,
        message="relu",
    ),
    Flagged(  # log of an absolute error: a prediction equal to its target
        """\
        import torch

        def log_abs_error(pred, target):
            err = (pred - target).abs()
            return torch.log(err).mean()
        """,
        (5,),
        """\
        import torch

        def log_abs_error(pred, target):
            err = (pred - target).abs()
            return torch.log(err.clamp_min(1e-12)).mean()
        """,
        message="coincide",
    ),
    Flagged(  # a ratio of counts: no positive in the batch
        """\
        import torch

        def positive_log_rate(labels):
            positives = (labels == 1).sum()
            return torch.log(positives / labels.numel())
        """,
        (5,),
        """\
        import torch

        def positive_log_rate(labels):
            positives = (labels == 1).sum()
            return torch.log((positives / labels.numel()).clamp_min(1e-12))
        """,
        message="nothing is selected",
    ),
    Flagged(  # a sum of |d| ** p over pairwise differences: 0 on the diagonal
        """\
        import torch

        def log_pairwise_energy(x, p):
            diff = x[:, None] - x[None]
            return torch.log((diff.abs() ** p).sum(-1))
        """,
        (5,),
        """\
        import torch

        def log_pairwise_energy(x, p):
            diff = x[:, None] - x[None]
            return torch.log((diff.abs() ** p).sum(-1).clamp_min(1e-12))
        """,
        message="sum of powers",
    ),
    Flagged(  # a literal table with a 0, read through a module-level name
        """\
        import torch

        CLASS_PRIOR = torch.tensor([0.5, 0.3, 0.2, 0.0])

        def prior_logits(batch):
            return torch.log(CLASS_PRIOR).expand(batch, -1)
        """,
        (6,),
        """\
        import torch

        CLASS_PRIOR = torch.tensor([0.5, 0.3, 0.2, 0.0])

        def prior_logits(batch):
            return torch.log(CLASS_PRIOR.clamp_min(1e-12)).expand(batch, -1)
        """,
        message="table with a 0",
    ),
    Flagged(  # accumulated coverage: zeros at the first step (no fix: its sign is not known)
        """\
        import torch

        def coverage_penalty(attn_steps):
            coverage = torch.zeros_like(attn_steps[0])
            penalty = 0
            for attn in attn_steps:
                penalty = penalty - torch.log(coverage).sum()
                coverage = coverage + attn
            return penalty
        """,
        (7,),
        None,
        message="zeros it starts from",
    ),
    Flagged(  # coverage as a sum of attention weights
        """\
        import torch

        def coverage_log(attn):
            coverage = attn.sum(dim=1)
            return torch.log(coverage)
        """,
        (5,),
        """\
        import torch

        def coverage_log(attn):
            coverage = attn.sum(dim=1)
            return torch.log(coverage.clamp_min(1e-12))
        """,
        message="attention",
    ),
    Flagged(  # a histogram's entropy
        """\
        import torch

        def intensity_entropy(img):
            hist = torch.histc(img, bins=64, min=0.0, max=1.0)
            p = hist / hist.sum()
            return -(p * torch.log(p)).sum()
        """,
        (6,),
        """\
        import torch

        def intensity_entropy(img):
            hist = torch.histc(img, bins=64, min=0.0, max=1.0)
            p = hist / hist.sum()
            return -(torch.special.xlogy(p, p)).sum()
        """,
        safe=True,
    ),
    Flagged(  # an entropy in bits: reported, no xlogy rewrite for log2
        """\
        import torch

        def code_bits(codes, size):
            freq = torch.bincount(codes, minlength=size) / codes.numel()
            return -(freq * torch.log2(freq)).sum()
        """,
        (5,),
        None,
    ),
    Flagged(  # a clamp at 0 is no floor for a log
        """\
        import torch

        def log_depth(depth):
            return torch.log(torch.clamp(depth, min=0))
        """,
        (4,),
        """\
        import torch

        def log_depth(depth):
            return torch.log(torch.clamp(depth, min=0).clamp_min(1e-12))
        """,
        message="clamped at 0",
    ),
    Flagged(  # masked weights normalised: a row the mask empties
        """\
        import torch

        def masked_log_weights(w, keep_mask):
            kept = w.relu() * keep_mask
            return torch.log(kept / kept.sum(-1, keepdim=True))
        """,
        (5,),
        None,
        message="mask",
    ),
    Flagged(  # no evidence: reported only in strict mode, saying so
        """\
        import torch

        def log_scale(x: torch.Tensor):
            return torch.log(x)
        """,
        (4,),
        None,
        strict=True,
        message="strict mode",
    ),
]

TNL207_SILENT = [
    Silent("import torch\ndef f(p, eps=1e-8):\n    return torch.log(p + eps)\n"),
    Silent("import torch\ndef f(x):\n    return torch.log(torch.clamp(x.relu(), min=1e-6))\n"),
    Silent("import torch\nimport torch.nn.functional as F\ndef f(x):\n    return torch.log(x.exp()) + torch.log(F.softplus(x))\n"),
    Silent("import torch\ndef f(counts):\n    return torch.log(counts.float() + 1)\n"),
    Silent("import torch\ndef f(half_dim):\n    return torch.log(torch.tensor(10000.0)) / (half_dim - 1)\n"),
    Silent("import torch\ndef f(x):\n    return torch.log(torch.sigmoid(x))\n"),
    Silent("import torch\nimport torch.nn.functional as F\ndef f(x):\n    return torch.log(F.softmax(x, dim=-1))\n"),
    Silent("import torch\ndef additive(mask):\n    return torch.log(mask.float())\n"),
    Silent("import numpy as np\nimport torch\ndef f(counts):\n    return np.log(counts / counts.sum())\n"),
    Silent("import math\nimport torch\ndef f(n, m):\n    return math.log(n / m)\n"),
    Silent(  # Gumbel noise with its eps
        "import torch\ndef f(logits):\n    u = torch.rand_like(logits)\n    return logits - torch.log(-torch.log(u + 1e-20) + 1e-20)\n"
    ),
    Silent(  # a density clamped before it is normalised never reaches 0
        "import torch\ndef entropy(hist, eps=1e-8):\n    P = hist.clamp(eps)\n    P /= P.sum(dim=-1, keepdim=True)\n"
        "    Px = P.sum(-2)\n    return -(Px * torch.log(Px)).sum(-1)\n"
    ),
    Silent(  # T5 buckets: the log of position 0 is cast to an index that `where` selects away
        """\
        import math
        import torch

        def bucket(relative_position, max_exact=16, max_distance=128, num_buckets=32):
            n = torch.abs(relative_position)
            is_small = n < max_exact
            large = max_exact + (
                torch.log(n.float() / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
            ).to(torch.long)
            return torch.where(is_small, n, large)
        """
    ),
    Silent(  # the -inf is replaced at once
        "import torch\ndef f(hist, frames):\n    bins = torch.bincount(frames).float()\n"
        "    return bins.log().nan_to_num(neginf=0.0) + torch.clamp(20 * torch.log10(hist.relu()), min=-80)\n"
    ),
    Silent(  # a random sampling key: -inf only ranks last, no gradient
        "import torch\ndef sample(w, n, k):\n    keys = torch.rand(n).log() / (w + 1e-10)\n    return keys.topk(k).indices\n"
    ),
    Silent(  # affine maps of a draw that never reach 0, and the complement a draw never makes 0
        "import torch\ndef f(lo, hi, n):\n    u = torch.rand(n)\n    return torch.log(lo + (hi - lo) * u) + torch.log(1 - u)\n"
    ),
    Silent(  # absolute values of an unknown tensor: no reason for an entry to be 0
        "import torch\ndef f(x):\n    return torch.log(x.abs()).mean()\n"
    ),
    Silent(  # a literal table inline: its 0 is in plain sight, the -inf meant (a masked slot)
        "import torch\ndef test_masked():\n    lp = torch.tensor([[0.5, 0.5, 0.0]]).log()\n    return lp\n"
    ),
    Silent(  # the box encoding: ground-truth boxes are filtered for area before it runs
        "import torch\ndef get_deltas(src, target):\n    src_w = src[:, 2] - src[:, 0]\n    tgt_w = target[:, 2] - target[:, 0]\n"
        "    return torch.log(tgt_w / src_w)\n"
    ),
    Silent(  # a log of a literal sum of counts and a positive constant
        "import torch\ndef f(counts):\n    return torch.log(counts.sum() + 0.5)\n"
    ),
]


@pytest.mark.parametrize(
    "source, owner",
    [
        ("import torch\ndef logistic(shape):\n    u = torch.rand(shape)\n    return torch.log(u / (1 - u))\n", "TNL112"),
        ("import torch\ndef f(x, y):\n    p = torch.sigmoid(x)\n    return -(y * torch.log(p)).mean()\n", "TNL104"),
    ],
)
def test_unguarded_log_leaves_owned_sites_to_their_owner(source, owner):
    """A logit by hand is TNL112's, a sigmoid's log TNL104's: with both rules on, one finding, the owner's."""
    found = harness.findings("TNL207", source, together=(owner,))
    assert [f.code for f in found] == [owner], [(f.code, f.message) for f in found]


@pytest.mark.parametrize("code, case", harness.params("TNL207", TNL207_FLAGGED, TNL207_SILENT))
def test_unguarded_log(code, case):
    harness.check(code, case)
