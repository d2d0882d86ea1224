"""Names that see through real code: reaching definitions (`ctx.reaching`, a value that every
branch, loop iteration or handler gives the same kind) and value-preserving steps
(`value_steps.selection_of`, `ctx.origins`: indexing, selections, reshapes, float casts, the values of
a ranking), asked through the rules that use them. Several reaching definitions, or a selection,
are reported without a fix: the fix rewrites one assignment or recomputes one value."""

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent

# ---------------------------------------------------------------------------------------------
# Item 1: reaching definitions

REACHING_TNL103 = harness.params(
    "TNL103",
    flagged=[
        Flagged(
            """\
        import torch
        import torch.nn.functional as F

        class Head(torch.nn.Module):
            def forward(self, logits, y):
                if self.temperature is not None:
                    probs = F.softmax(logits / self.temperature, dim=-1)
                else:
                    probs = F.softmax(logits, dim=-1)
                return F.nll_loss(torch.log(probs), y)
        """,
            (10,),
        ),
        Flagged(
            """\
        import torch

        def attention_entropy(scores, mask=None):
            if mask is not None:
                attn = scores.masked_fill(~mask, -1e9).softmax(-1)
            else:
                attn = scores.softmax(-1)
            return -(attn * attn.log()).sum(-1).mean()
        """,
            (8,),
        ),
        Flagged(
            """\
        import torch
        import torch.nn.functional as F

        def training_step(model, x, y, opt):
            t = model(x)
            t = t.softmax(-1)
            loss = -(y * torch.log(t)).sum(-1).mean()
            loss.backward()
            opt.step()
        """,
            (7,),
        ),
        Flagged(
            """\
        import torch
        from torch.nn.functional import softmax

        def robust_nll(logits, y):
            try:
                p = softmax(logits, dim=1)
            except RuntimeError:
                p = softmax(logits.float(), dim=1)
            return -torch.log(p).gather(1, y[:, None]).mean()
        """,
            (9,),
        ),
        Flagged(
            """\
        import torch
        import torch.nn.functional as F

        def unrolled(x, noise, steps, y):
            p = F.softmax(x, dim=-1)
            loss = 0.0
            for _ in range(steps):
                loss = loss - (y * torch.log(p)).sum()
                p = F.softmax(x + noise, dim=-1)
            return loss
        """,
            (8,),
        ),
        Flagged(
            """\
        import torch
        import torch.nn.functional as F

        def loss_fn(logits, y, mode):
            if mode == "sharp":
                q = F.softmax(logits * 2, dim=-1)
            elif mode == "smooth":
                q = F.softmax(logits / 2, dim=-1)
            else:
                q = torch.softmax(logits, -1)
            return F.nll_loss(q.log(), y)
        """,
            (11,),
        ),
        Flagged(
            """\
        import torch
        import torch.nn.functional as F

        class Policy(torch.nn.Module):
            def loss(self, logits, actions, adv):
                probs = F.softmax(logits, -1)
                if self.clip:
                    probs = F.softmax(logits.clamp(-20, 20), -1)
                logp = torch.log(probs).gather(1, actions[:, None]).squeeze(1)
                return -(logp * adv).mean()
        """,
            (9,),
        ),
        Flagged(
            """\
        import torch
        import torch.nn.functional as F

        def step(batch, model):
            while True:
                out = model(batch)
                p = out.softmax(dim=1)
                if out.isfinite().all():
                    break
            return -torch.log(p).mean()
        """,
            (10,),
            """\
        import torch
        import torch.nn.functional as F

        def step(batch, model):
            while True:
                out = model(batch)
                p = out.log_softmax(dim=1)
                if out.isfinite().all():
                    break
            return -p.mean()
        """,
        ),
    ],
    silent=[
        # a branch that clamps
        Silent("""\
        import torch
        import torch.nn.functional as F

        def loss_fn(logits, y, stable):
            if stable:
                p = F.softmax(logits, -1).clamp_min(1e-8)
            else:
                p = F.softmax(logits, -1)
            return F.nll_loss(torch.log(p), y)
        """),
        # a rebinding to something else on one path
        Silent("""\
        import torch
        import torch.nn.functional as F

        def loss_fn(logits, y, k, uniform):
            p = F.softmax(logits, -1)
            if uniform:
                p = torch.full_like(logits, 1.0 / k)
            return F.nll_loss(torch.log(p), y)
        """),
        # re-bound in a loop to a value that is no softmax
        Silent("""\
        import torch
        import torch.nn.functional as F

        def refine(x, steps, eps):
            p = F.softmax(x, -1)
            total = 0.0
            for _ in range(steps):
                total = total + torch.log(p).sum()
                p = (p + eps) / (1 + eps * p.shape[-1])
            return total
        """),
        # the straight-line rebinding guards it
        Silent("""\
        import torch

        def f(x):
            p = torch.softmax(x, -1)
            p = p + 1e-8
            return torch.log(p)
        """),
        # a comprehension's own name shadows the softmax
        Silent("""\
        import torch
        import torch.nn.functional as F

        def f(x, others):
            p = F.softmax(x, -1)
            return p.sum() + sum(torch.log(p).sum() for p in others)
        """),
        # an except handler that gives something else
        Silent("""\
        import torch
        import torch.nn.functional as F

        def f(logits):
            try:
                p = F.softmax(logits, dim=1)
            except RuntimeError:
                p = logits.new_ones(logits.shape) / logits.shape[1]
            return torch.log(p)
        """),
        # a rebinding to log_softmax: the log reads log-probabilities' exp, no softmax name
        Silent("""\
        import torch
        import torch.nn.functional as F

        def f(logits, use_log):
            p = F.softmax(logits, -1)
            if use_log:
                p = F.log_softmax(logits, -1)
            return torch.log(p)
        """),
        # an in-place clamp on one path
        Silent("""\
        import torch

        def f(x, guard):
            p = torch.softmax(x, -1)
            if guard:
                p.clamp_(min=1e-6)
            return torch.log(p)
        """),
    ],
)


@pytest.mark.parametrize("code, case", REACHING_TNL103)
def test_reaching_definitions_tnl103(code, case):
    harness.check(code, case)


REACHING_OTHERS = (
    harness.params(
        "TNL104",
        flagged=[
            Flagged(
                """\
        import torch
        from torch.special import expit

        def bce(z, y, hard):
            if hard:
                p = expit(z * 4)
            else:
                p = z.sigmoid()
            return -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean()
        """,
                (9, 9),
            ),
        ],
        silent=[
            Silent("""\
        import torch

        def bce(z, y, hard):
            if hard:
                p = torch.sigmoid(z)
            else:
                p = torch.sigmoid(z).clamp(1e-6, 1 - 1e-6)
            return -(y * torch.log(p)).mean()
        """),
        ],
    )
    + harness.params(
        "TNL101",
        flagged=[
            Flagged(
                """\
        import torch
        import torch.nn.functional as F

        class Mutual(torch.nn.Module):
            def forward(self, a, b):
                if self.sharpen:
                    target = F.softmax(self.head(b) / 0.5, dim=-1)
                else:
                    target = F.softmax(self.head(b), dim=-1)
                return F.kl_div(F.log_softmax(self.head(a), -1), target, reduction="batchmean")
        """,
                (10,),
            ),
        ],
        silent=[
            Silent("""\
        import torch
        import torch.nn.functional as F

        class Mutual(torch.nn.Module):
            def forward(self, a, b):
                target = F.softmax(self.head(b), dim=-1)
                if self.log_space:
                    target = F.log_softmax(self.head(b), dim=-1)
                return F.kl_div(F.log_softmax(self.head(a), -1), target, reduction="batchmean")
        """),
        ],
    )
    + harness.params(
        "TNL201",
        silent=[
            # `d += eps` is a guard binding
            Silent("""\
        import torch

        def mean_pool(h, mask, eps=1e-6):
            d = mask.sum(1, keepdim=True)
            d += eps
            return (h * mask[..., None]).sum(1) / d
        """),
            # every branch guards the count
            Silent("""\
        import torch

        def mean_pool(h, mask, soft):
            if soft:
                d = mask.sum(1) + 1e-6
            else:
                d = mask.sum(1).clamp_min(1)
            return (h * mask[..., None]).sum(1) / d[:, None]
        """),
        ],
    )
)


@pytest.mark.parametrize("code, case", REACHING_OTHERS)
def test_reaching_definitions_other_rules(code, case):
    harness.check(code, case)


# ---------------------------------------------------------------------------------------------
# Item 2: value-preserving and shape-only steps

SELECTIONS = harness.params(
    "TNL103",
    flagged=[
        Flagged(
            """\
        import torch
        import torch.nn.functional as F

        def nll(logits, y):
            probs = F.softmax(logits, dim=-1)
            p_y = probs[torch.arange(len(y)), y]
            return -torch.log(p_y).mean()
        """,
            (7,),
        ),
        Flagged(
            """\
        import torch
        import torch.nn.functional as F

        class Classifier(torch.nn.Module):
            def forward(self, x, y):
                probs = F.softmax(self.fc(x), dim=1)
                picked = probs.gather(1, y[:, None]).squeeze(1)
                return -picked.log().mean()
        """,
            (8,),
        ),
        Flagged(
            """\
        import torch

        def topk_loss(logits, k):
            p = logits.softmax(-1)
            vals, idx = p.topk(k, dim=-1)
            return -torch.log(vals).sum(-1).mean()
        """,
            (6,),
        ),
        Flagged(
            """\
        import torch
        import torch.nn.functional as F

        def confidence_penalty(logits):
            probs = F.softmax(logits, dim=1)
            conf, pred = probs.max(dim=1)
            return -torch.log(conf).mean()
        """,
            (7,),
        ),
        Flagged(
            """\
        import torch

        def seq_nll(scores, b, t, y):
            p = torch.softmax(scores, dim=-1)
            flat = p.view(b * t, -1)
            return -torch.log(flat).gather(1, y.view(-1, 1)).mean()
        """,
            (6,),
        ),
        Flagged(
            """\
        import torch
        import torch.nn.functional as F

        def mixed(logits, y):
            p16 = F.softmax(logits.half(), dim=-1)
            p = p16.float().unsqueeze(1)
            return -(y * torch.log(p)).sum()
        """,
            (7,),
        ),
        Flagged(
            """\
        import torch
        import torch.nn.functional as F

        def two_views(logits):
            probs = F.softmax(logits, dim=-1)
            p1, p2 = probs.chunk(2, dim=0)
            return -(p2 * torch.log(p1)).sum(-1).mean()
        """,
            (7,),
        ),
        Flagged(
            """\
        import torch
        import torch.nn.functional as F

        def masked_nll(logits, mask):
            probs = F.softmax(logits, dim=-1)
            kept = probs.masked_select(mask)
            return -torch.log(kept).mean()
        """,
            (7,),
        ),
        Flagged(
            """\
        import torch
        import torch.nn.functional as F

        def attn_entropy(scores):
            attn = F.softmax(scores, dim=-1).transpose(1, 2).contiguous()
            best = attn.max(-1)[0]
            return -torch.log(best).mean()
        """,
            (7,),
        ),
    ],
    silent=[
        # the indices of a ranking, not its values
        Silent("""\
        import torch

        def f(logits):
            p = logits.softmax(-1)
            vals, idx = p.topk(5, dim=-1)
            return torch.log(idx.float() + 1).sum()
        """),
        Silent("""\
        import torch
        import torch.nn.functional as F

        def f(logits):
            probs = F.softmax(logits, dim=1)
            conf, pred = probs.max(dim=1)
            return torch.log(pred.float() + 1).mean() + torch.log(probs.max(1)[1].float() + 1).mean()
        """),
        Silent("""\
        import torch

        def f(logits):
            p = torch.softmax(logits, -1)
            rank = p.topk(3).indices
            return torch.log(rank.float() + 1)
        """),
        # a sum of a selection is no selection
        Silent("""\
        import torch

        def f(logits, k):
            p = torch.softmax(logits, -1)
            head = p[:, :k].sum(-1)
            return torch.log(head)
        """),
        # guarded before it is selected
        Silent("""\
        import torch
        import torch.nn.functional as F

        def f(logits):
            probs = F.softmax(logits, dim=1).clamp_min(1e-6)
            conf, pred = probs.max(dim=1)
            return -torch.log(conf).mean()
        """),
        Silent("""\
        import torch
        import torch.nn.functional as F

        def f(logits):
            probs = F.softmax(logits, dim=1)
            conf, _ = probs.max(dim=1)
            return -torch.log(conf.clamp_min(1e-8)).mean()
        """),
        # a split of something that is no softmax
        Silent("""\
        import torch

        def kl_term(stats):
            mu, logvar = stats.chunk(2, dim=-1)
            return torch.log(logvar.exp() + mu.pow(2)).sum()
        """),
        # a cast to an integer dtype rounds the probabilities away
        Silent("""\
        import torch

        def f(logits):
            p = torch.softmax(logits, -1)
            hard = p.to(torch.long).float()
            return torch.log(hard + 1)
        """),
    ],
)


@pytest.mark.parametrize("code, case", SELECTIONS)
def test_selections_tnl103(code, case):
    harness.check(code, case)


SELECTIONS_OTHERS = (
    harness.params(
        "TNL104",
        flagged=[
            Flagged(
                """\
        import torch

        class Detector(torch.nn.Module):
            def forward(self, x, y):
                obj = torch.sigmoid(self.head(x)).squeeze(-1)
                return -(y * torch.log(obj)).mean()
        """,
                (6,),
            ),
        ],
        silent=[
            Silent("""\
        import torch

        def f(z):
            s = torch.sigmoid(z)
            vals, idx = s.sort(dim=-1)
            return torch.log(idx.float() + 1)
        """),
        ],
    )
    + harness.params(
        "TNL101",
        flagged=[
            Flagged(
                """\
        import torch
        import torch.nn.functional as F

        class Mutual(torch.nn.Module):
            def forward(self, a, b):
                target = F.softmax(self.head(b), dim=-1).view(-1, self.k)
                return F.kl_div(F.log_softmax(self.head(a), -1).view(-1, self.k), target, reduction="batchmean")
        """,
                (7,),
            ),
        ],
        silent=[
            Silent("""\
        import torch
        import torch.nn.functional as F

        class Mutual(torch.nn.Module):
            def forward(self, a, b):
                target = F.softmax(self.head(b), dim=-1).detach().view(-1, self.k)
                return F.kl_div(F.log_softmax(self.head(a), -1).view(-1, self.k), target, reduction="batchmean")
        """),
        ],
    )
    + harness.params(
        "TNL201",
        flagged=[
            Flagged(
                """\
        import torch

        def mean_pool(h, valid_mask):
            n = valid_mask.sum(1)
            return (h * valid_mask[..., None]).sum(1) / n.unsqueeze(-1)
        """,
                (5,),
                """\
        import torch

        def mean_pool(h, valid_mask):
            n = valid_mask.sum(1)
            return (h * valid_mask[..., None]).sum(1) / n.unsqueeze(-1).clamp_min(1e-12)
        """,
            ),
        ],
    )
)


@pytest.mark.parametrize("code, case", SELECTIONS_OTHERS)
def test_selections_other_rules(code, case):
    harness.check(code, case)


# ---------------------------------------------------------------------------------------------
# Item 3: guards and evidence over every reaching definition. Guarded, detached, data, positive,
# a mask, a number: only when every way says so. A reason to reach 0: one unguarded way that a
# path can take, named in the message; no fix where several ways reach (a clamp at the use would
# rewrite the guarded ways too, and their signs are unknown).

DIVISION = ("TNL201", "TNL202", "TNL204", "TNL206")

EVERY_WAY_DIVISION = harness.params(
    "TNL201",
    flagged=[
        # guarded on one branch: the other's count is reported, named
        Flagged(
            """\
        import torch

        def masked_mean(h, pos_mask, soft):
            if soft:
                n = pos_mask.sum(1, keepdim=True) + 1e-6
            else:
                n = pos_mask.sum(1, keepdim=True)
            return (h * pos_mask).sum(1, keepdim=True) / n
        """,
            (8,),
            together=DIVISION,
            message="a count, as `n` is assigned on line 7, which is 0 when nothing is selected",
        ),
        # a conditional expression: its else value is the unguarded one
        Flagged(
            """\
        import torch

        class Pool(torch.nn.Module):
            def forward(self, h, fg_mask):
                n = fg_mask.sum(1, keepdim=True).clamp_min(1) if self.soft else (fg_mask > 0).sum(1, keepdim=True)
                return (h * fg_mask).sum(1, keepdim=True) / n
        """,
            (6,),
            together=DIVISION,
            message=", the else value of the conditional on line 5",
        ),
        # numpy on one branch, torch on the other: reported for the torch one, no torch-only fix
        Flagged(
            """\
        import numpy as np
        import torch

        def normalise_scores(scores, use_numpy):
            if use_numpy:
                total = np.abs(scores).sum(axis=-1, keepdims=True)
            else:
                total = torch.relu(scores).sum(-1, keepdim=True)
            return scores / total
        """,
            (9,),
            together=DIVISION,
            message="relu outputs are 0",
        ),
        # a count of numpy hits on one branch, of torch hits on the other: no torch-only clamp
        Flagged(
            """\
        import numpy as np
        import torch

        def hit_rate_score(scores, use_numpy):
            if use_numpy:
                hits = np.asarray(scores) > 0
            else:
                hits = torch.as_tensor(scores) > 0
            return (scores * hits).sum() / hits.sum()
        """,
            (9,),
            together=DIVISION,
            message="when nothing is selected",
        ),
        # torch on both branches: the count's exact clamp
        Flagged(
            """\
        import torch

        def hit_rate_score(scores, strict):
            if strict:
                hits = torch.as_tensor(scores) >= 1
            else:
                hits = torch.as_tensor(scores) > 0
            return (scores * hits).sum() / hits.sum()
        """,
            (8,),
            """\
        import torch

        def hit_rate_score(scores, strict):
            if strict:
                hits = torch.as_tensor(scores) >= 1
            else:
                hits = torch.as_tensor(scores) > 0
            return (scores * hits).sum() / hits.sum().clamp_min(1)
        """,
            safe=True,
            together=DIVISION,
        ),
        # a training step whose weights are a mask on one branch only
        Flagged(
            """\
        import torch

        def training_step(model, batch, opt):
            x, y = batch
            out = model(x)
            if model.training:
                w = (y > 0).float()
            else:
                w = torch.ones_like(y, dtype=torch.float)
            loss = ((out - y) ** 2 * w).sum() / w.sum()
            loss.backward()
            opt.step()
        """,
            (10,),
            together=DIVISION,
            message="when nothing is selected: `y > 0` (line 7) keeps the values past a threshold, which can be none, as `w` is assigned on line 7",
        ),
        # a boolean mask on either branch: its sum is an integer count, clamped at 1 (exact)
        Flagged(
            """\
        import torch
        import torch.nn.functional as F

        class TokenLoss(torch.nn.Module):
            def forward(self, logits, labels):
                if self.skip_eos:
                    counted = (labels != self.pad_id) & (labels != self.eos_id)
                else:
                    counted = labels != self.pad_id
                per_token = F.cross_entropy(logits.transpose(1, 2), labels, reduction="none")
                return (per_token * counted).sum() / counted.sum()
        """,
            (11,),
            """\
        import torch
        import torch.nn.functional as F

        class TokenLoss(torch.nn.Module):
            def forward(self, logits, labels):
                if self.skip_eos:
                    counted = (labels != self.pad_id) & (labels != self.eos_id)
                else:
                    counted = labels != self.pad_id
                per_token = F.cross_entropy(logits.transpose(1, 2), labels, reduction="none")
                return (per_token * counted).sum() / counted.sum().clamp_min(1)
        """,
            safe=True,
            together=DIVISION,
            strict=True,
        ),
        # the first iteration divides by the relu sum assigned before the loop
        Flagged(
            """\
        import torch

        def iterate(x, ws, eps):
            scale = torch.relu(ws[0]).sum()
            for w in ws[1:]:
                x = x / scale
                scale = w.abs().sum() + eps
            return x
        """,
            (6,),
            together=DIVISION,
            message=", as `scale` is assigned on line 4",
        ),
        # data on every way: a standardisation of constant data; a tensor on every way: the clamp
        Flagged(
            """\
        import torch

        def normalise_advantages(rewards: torch.Tensor, returns: torch.Tensor, use_returns):
            r = returns if use_returns else rewards
            return (r - r.mean()) / r.std()
        """,
            (5,),
            """\
        import torch

        def normalise_advantages(rewards: torch.Tensor, returns: torch.Tensor, use_returns):
            r = returns if use_returns else rewards
            return (r - r.mean()) / r.std().clamp_min(1e-12)
        """,
            together=DIVISION,
            message="constant data",
            strict=True,
        ),
        # strict mode: a norm clamped on one branch only, no evidence either way
        Flagged(
            """\
        import torch

        def cosine(a, b, exact):
            if exact:
                na = a.norm(dim=-1).clamp_min(1e-8)
            else:
                na = a.norm(dim=-1)
            return (a * b).sum(-1) / na
        """,
            (8,),
            strict=True,
            together=DIVISION,
            message="a norm, as `na` is assigned on line 7",
        ),
        # a forward's input on one way (rewards that can all be 0: a sparse reward) is evidence for its
        # std; a model's output on the other way is none
        Flagged(
            """\
        import torch

        class Critic(torch.nn.Module):
            def forward(self, x, rewards):
                r = self.value(x) if self.bootstrap else rewards
                return (r - r.mean()) / r.std()
        """,
            (6,),
            """\
        import torch

        class Critic(torch.nn.Module):
            def forward(self, x, rewards):
                r = self.value(x) if self.bootstrap else rewards
                return (r - r.mean()) / r.std().clamp_min(1e-12)
        """,
            together=DIVISION,
            message="all-zero input row of `forward`",
        ),
    ],
    silent=[
        # guarded on both ways of a conditional expression, in strict mode
        Silent(
            """\
        import torch

        def masked_mean(h, mask, soft):
            n = mask.sum(1, keepdim=True).clamp_min(1) if soft else mask.sum(1, keepdim=True) + 1e-6
            return (h * mask).sum(1, keepdim=True) / n
        """,
            strict=True,
            together=DIVISION,
        ),
        # an eps chosen per dtype is an eps on both ways
        Silent(
            """\
        import torch

        def std_scale(x, eps, half):
            e = 1e-3 if half else eps
            return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + e)
        """,
            strict=True,
            together=DIVISION,
        ),
        # clamped on both branches (clamp_min, torch.maximum)
        Silent(
            """\
        import torch

        def cosine(a, b, exact, floor):
            if exact:
                na = a.norm(dim=-1).clamp_min(1e-8)
            else:
                na = torch.maximum(a.norm(dim=-1), floor)
            return (a * b).sum(-1) / na
        """,
            strict=True,
            together=DIVISION,
        ),
        # positive on every way: exp or sigmoid weights never sum to 0
        Silent(
            """\
        import torch

        class Gate(torch.nn.Module):
            def forward(self, h, scores):
                w = scores.exp() if self.sharp else scores.sigmoid()
                return (h * w[..., None]).sum(1) / w.sum(1, keepdim=True)
        """,
            strict=True,
            together=DIVISION,
        ),
        # a count guarded on either branch
        Silent(
            """\
        import torch

        def token_mean(loss, labels, pad_id, smooth):
            keep = labels != pad_id
            if smooth:
                n = keep.float().sum() + 1.0
            else:
                n = keep.sum().clamp_min(1)
            return (loss * keep).sum() / n
        """,
            strict=True,
            together=DIVISION,
        ),
        # guarded before the loop and at every iteration
        Silent(
            """\
        import torch

        def iterate(x, ws, eps):
            scale = ws[0].abs().sum() + eps
            for w in ws[1:]:
                x = x / scale
                scale = w.abs().sum().clamp_min(eps)
            return x
        """,
            strict=True,
            together=DIVISION,
        ),
        # an in-place clamp after the branches guards every way
        Silent(
            """\
        import torch

        def pool(h, mask, soft):
            if soft:
                n = mask.float().sum(1)
            else:
                n = mask.sum(1)
            n.clamp_(min=1)
            return (h * mask[..., None]).sum(1) / n[:, None]
        """,
            strict=True,
            together=DIVISION,
        ),
    ],
)


@pytest.mark.parametrize("code, case", EVERY_WAY_DIVISION)
def test_every_way_division(code, case):
    harness.check(code, case)


EVERY_WAY_KL = harness.params(
    "TNL101",
    flagged=[
        # the target is detached on one branch only: the other still carries the peer's gradient
        Flagged(
            """\
        import torch
        import torch.nn.functional as F

        class Mutual(torch.nn.Module):
            def forward(self, student, peer, stop_grad):
                if stop_grad:
                    target = F.softmax(peer.detach(), dim=-1)
                else:
                    target = F.softmax(peer, dim=-1)
                return F.kl_div(F.log_softmax(student, -1), target, reduction="batchmean")
        """,
            (10,),
        ),
    ],
    silent=[
        # detached on every way: `.detach()` on one, `torch.no_grad()` on the other
        Silent("""\
        import torch
        import torch.nn.functional as F

        class Mutual(torch.nn.Module):
            def forward(self, student, peer, stop_grad):
                if stop_grad:
                    target = F.softmax(peer.detach(), dim=-1)
                else:
                    with torch.no_grad():
                        target = F.softmax(peer, dim=-1)
                return F.kl_div(F.log_softmax(student, -1), target, reduction="batchmean")
        """),
        Silent("""\
        import torch
        import torch.nn.functional as F

        def mutual_loss(student, peer, ema):
            target = F.softmax(ema, dim=-1) if ema is not None else F.softmax(peer, dim=-1)
            return F.kl_div(F.log_softmax(student, -1), target.detach(), reduction="batchmean")
        """),
    ],
)


@pytest.mark.parametrize("code, case", EVERY_WAY_KL)
def test_every_way_kl_target(code, case):
    harness.check(code, case)
