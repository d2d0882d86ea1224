"""TNL402 label-smoothing-inf-logits: label smoothing on logits filled with -inf (a GUIDE rule:
no fix). Flagged forms as training and model code writes them, and the look-alikes that stay
silent: no smoothing, smoothing 0, finite fills, a fill the loss never sees."""

from __future__ import annotations

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent

CODE = "TNL402"

FLAGGED = [
    # a pointer/candidate head: invalid candidates masked in forward, smoothed loss through a name
    Flagged(
        """
        import torch
        import torch.nn.functional as F
        from torch import nn

        class CandidateScorer(nn.Module):
            def forward(self, h, cands, invalid, target):
                logits = torch.einsum("bd,bkd->bk", h, cands)
                logits = logits.masked_fill(invalid, float("-inf"))
                return F.cross_entropy(logits, target, label_smoothing=0.1)
        """,
        (10,),
        message="label_smoothing=0.1",
    ),
    # RL policy head: in-place index fill, criterion attribute built in __init__
    Flagged(
        """
        import torch
        from torch import nn

        class Policy(nn.Module):
            def __init__(self, dim, actions):
                super().__init__()
                self.head = nn.Linear(dim, actions)
                self.criterion = nn.CrossEntropyLoss(label_smoothing=0.05)

            def training_step(self, batch):
                scores = self.head(batch["obs"])
                scores[~batch["legal"]] = -torch.inf
                return self.criterion(scores, batch["action"])
        """,
        (14,),
    ),
    # a helper, torch.where fill, module-level criterion
    Flagged(
        """
        import torch
        from torch import nn

        criterion = nn.CrossEntropyLoss(label_smoothing=0.1)

        def constrained_loss(logits, allowed, labels):
            masked = torch.where(allowed, logits, float("-inf"))
            return criterion(masked, labels)
        """,
        (9,),
    ),
    # contrastive (SimCLR): self-similarity masked in place, divided by a temperature
    Flagged(
        """
        import math
        import torch
        import torch.nn.functional as F

        def nt_xent(z, temperature, smoothing=0.1):
            z = F.normalize(z, dim=1)
            sim = z @ z.t()
            eye = torch.eye(sim.size(0), dtype=torch.bool, device=sim.device)
            sim.masked_fill_(eye, -math.inf)
            n = z.size(0) // 2
            labels = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)]).to(z.device)
            return F.cross_entropy(sim / temperature, labels, label_smoothing=smoothing)
        """,
        (13,),
    ),
    # a causal additive mask covers no whole row, but one -inf class makes the smoothed loss inf
    Flagged(
        """
        import torch
        import torch.nn.functional as F

        def next_item_loss(q, k, target):
            n = q.size(0)
            causal = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
            scores = q @ k.t() + causal
            return F.cross_entropy(scores, target, label_smoothing=0.1, reduction="none")
        """,
        (9,),
    ),
    # an import alias of the function, smoothing through a local name
    Flagged(
        """
        import torch
        from torch.nn.functional import cross_entropy as xent

        NEG_INF = float("-inf")

        def step(model, x, y, vocab_mask, optimizer):
            logits = model(x)
            logits = logits + torch.zeros_like(logits).masked_fill(~vocab_mask, NEG_INF)
            ls = 0.1
            loss = xent(logits.view(-1, logits.size(-1)), y.view(-1), label_smoothing=ls)
            loss.backward()
            optimizer.step()
            return loss
        """,
        (11,),
    ),
    # smoothing from the config: whenever it is turned on
    Flagged(
        """
        import torch
        import torch.nn.functional as F
        from torch import nn

        class Classifier(nn.Module):
            def __init__(self, cfg):
                super().__init__()
                self.cfg = cfg

            def loss(self, logits, pad_classes, y):
                logits = logits.masked_fill(pad_classes, -float("inf"))
                return F.cross_entropy(logits, y, label_smoothing=self.cfg.label_smoothing)
        """,
        (13,),
        message="whenever it is above 0",
    ),
    # log_softmax of the filled logits (the -inf stays), an inline constructor
    Flagged(
        """
        import torch
        import torch.nn as nn

        def choice_loss(scores, n_choices, answer):
            pad = torch.arange(scores.size(1), device=scores.device)[None] >= n_choices[:, None]
            logp = scores.masked_fill(pad, float("-inf")).log_softmax(dim=-1)
            return nn.CrossEntropyLoss(label_smoothing=0.1)(logp, answer)
        """,
        (8,),
    ),
    # a top-k filter keeps every row alive for a softmax, not for a smoothed loss
    Flagged(
        """
        import torch
        import torch.nn.functional as F

        def distill_topk(student, target, k=50):
            kth = student.topk(k, dim=-1).values[..., -1:]
            student[student < kth] = float("-inf")
            return F.cross_entropy(student, target, label_smoothing=0.1)
        """,
        (8,),
    ),
    # through .data, smoothing in a conditional expression
    Flagged(
        """
        import torch
        import torch.nn.functional as F

        def train_step(model, x, y, banned, smooth):
            out = model(x)
            out.data.masked_fill_(banned, float("-inf"))
            return F.cross_entropy(out, y, label_smoothing=0.1 if smooth else 0.0)
        """,
        (8,),
    ),
]

SILENT = [
    # a finite fill with smoothing
    Silent(
        """
        import torch
        import torch.nn.functional as F

        def masked_ce(logits, invalid, target):
            logits = logits.masked_fill(invalid, -1e4)
            return F.cross_entropy(logits, target, label_smoothing=0.1)
        """
    ),
    # -inf fill without smoothing (finite loss and gradient)
    Silent(
        """
        import torch
        from torch import nn

        class Policy(nn.Module):
            def __init__(self):
                super().__init__()
                self.criterion = nn.CrossEntropyLoss(reduction="mean")

            def forward(self, scores, legal, action):
                scores = scores.masked_fill(~legal, float("-inf"))
                return self.criterion(scores, action)
        """
    ),
    # label_smoothing=0.0, in the call and in the constructor
    Silent(
        """
        import torch
        import torch.nn.functional as F
        from torch import nn

        def losses(logits, invalid, target):
            logits = logits.masked_fill(invalid, float("-inf"))
            a = F.cross_entropy(logits, target, label_smoothing=0.0)
            return a + nn.CrossEntropyLoss(label_smoothing=0)(logits, target)
        """
    ),
    # a name bound to 0 on every way
    Silent(
        """
        import torch
        import torch.nn.functional as F

        def masked_ce(logits, invalid, target, eval_mode):
            if eval_mode:
                ls = 0.0
            else:
                ls = 0
            logits = logits.masked_fill(invalid, float("-inf"))
            return F.cross_entropy(logits, target, label_smoothing=ls)
        """
    ),
    # the filled logits are rebound before the loss
    Silent(
        """
        import torch
        import torch.nn.functional as F

        def step(head, h, invalid, target):
            logits = head(h).masked_fill(invalid, float("-inf"))
            preds = logits.argmax(-1)
            logits = head(h)
            return F.cross_entropy(logits, target, label_smoothing=0.1), preds
        """
    ),
    # the -inf entries clamped / replaced before the loss
    Silent(
        """
        import torch
        import torch.nn.functional as F

        def masked_ce(logits, invalid, target):
            logits = logits.masked_fill(invalid, float("-inf"))
            a = F.cross_entropy(logits.clamp(min=-1e4), target, label_smoothing=0.1)
            b = F.cross_entropy(torch.nan_to_num(logits, neginf=-1e4), target, label_smoothing=0.1)
            return a + b
        """
    ),
    # -inf masks attention scores; the smoothed loss is on the classifier's logits
    Silent(
        """
        import torch
        import torch.nn.functional as F
        from torch import nn

        class Model(nn.Module):
            def forward(self, q, k, v, pad, y):
                s = (q @ k.transpose(-2, -1)).masked_fill(pad, float("-inf"))
                h = s.softmax(-1) @ v
                logits = self.cls(h.mean(1))
                return F.cross_entropy(logits, y, label_smoothing=0.1)
        """
    ),
    # a fill in another function with the same name
    Silent(
        """
        import torch
        import torch.nn.functional as F

        def decode(logits, banned):
            logits = logits.masked_fill(banned, float("-inf"))
            return logits.argmax(-1)

        def loss(logits, y):
            return F.cross_entropy(logits, y, label_smoothing=0.1)
        """
    ),
    # a +inf fill, a max pool's -inf padding, and smoothing over the valid classes only
    Silent(
        """
        import torch
        import torch.nn.functional as F

        def losses(logits, invalid, target, dist):
            nearest = dist.masked_fill(invalid, float("inf")).argmin(-1)
            logp = logits.masked_fill(invalid, float("-inf")).log_softmax(-1)
            nll = F.nll_loss(logp, target, reduction="none")
            smooth = -logp.masked_fill(invalid, 0.0).sum(-1) / (~invalid).sum(-1)
            return (0.9 * nll + 0.1 * smooth).mean() + F.cross_entropy(logits, nearest, label_smoothing=0.1)
        """
    ),
]


@pytest.mark.parametrize("code, case", harness.params(CODE, FLAGGED, SILENT))
def test_label_smoothing_inf_logits(code, case):
    harness.check(code, case)
