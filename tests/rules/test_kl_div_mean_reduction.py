"""TNL114 kl-div-mean-reduction: `F.kl_div` / `nn.KLDivLoss` reduced with "mean" (the default).

The flagged forms are written as distillation and consistency losses are: in a `forward`, a
training step, a helper; through an attribute, a local, a module-level instance; every import
alias; positional, legacy and named reductions. The look-alikes reduce otherwise, or leave the
reduction to a value the rule cannot read. Last, the three KL rules on one call: each reports
its own hazard, and `--fix --unsafe-fixes` applies all three fixes to a fixpoint.
"""

import textwrap

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent
from torchnumlint.engine import lint_text
from torchnumlint.fixes import fix_text
from torchnumlint.rules.registry import registry

CODE = "TNL114"

FLAGGED = [
    # a distiller's criterion built in __init__, called in forward: reported where it is built
    Flagged(
        """
        import torch.nn as nn
        import torch.nn.functional as F


        class KDLoss(nn.Module):
            def __init__(self, T=4.0, alpha=0.9):
                super().__init__()
                self.T, self.alpha = T, alpha
                self.kl = nn.KLDivLoss()
                self.ce = nn.CrossEntropyLoss()

            def forward(self, student_logits, teacher_logits, labels):
                soft = self.kl(F.log_softmax(student_logits / self.T, dim=1), F.softmax(teacher_logits / self.T, dim=1).detach())
                return self.alpha * soft * self.T ** 2 + (1 - self.alpha) * self.ce(student_logits, labels)
        """,
        (10,),
        fixed="""
        import torch.nn as nn
        import torch.nn.functional as F


        class KDLoss(nn.Module):
            def __init__(self, T=4.0, alpha=0.9):
                super().__init__()
                self.T, self.alpha = T, alpha
                self.kl = nn.KLDivLoss(reduction="batchmean")
                self.ce = nn.CrossEntropyLoss()

            def forward(self, student_logits, teacher_logits, labels):
                soft = self.kl(F.log_softmax(student_logits / self.T, dim=1), F.softmax(teacher_logits / self.T, dim=1).detach())
                return self.alpha * soft * self.T ** 2 + (1 - self.alpha) * self.ce(student_logits, labels)
        """,
    ),
    # a training step with a local criterion and an explicit "mean"
    Flagged(
        """
        import torch
        from torch import nn


        def train_step(model, teacher, batch, optimizer):
            criterion = nn.KLDivLoss(reduction="mean")
            with torch.no_grad():
                target = teacher(batch).softmax(-1)
            loss = criterion(model(batch).log_softmax(-1), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return loss.item()
        """,
        (7,),
        fixed="""
        import torch
        from torch import nn


        def train_step(model, teacher, batch, optimizer):
            criterion = nn.KLDivLoss(reduction="batchmean")
            with torch.no_grad():
                target = teacher(batch).softmax(-1)
            loss = criterion(model(batch).log_softmax(-1), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return loss.item()
        """,
    ),
    # a module-level instance, imported by name, single quotes kept
    Flagged(
        """
        import torch
        from torch.nn import KLDivLoss

        KL = KLDivLoss(reduction='mean', log_target=True)


        def consistency(logp_weak, logp_strong):
            return KL(logp_strong, logp_weak.detach())
        """,
        (5,),
        fixed="""
        import torch
        from torch.nn import KLDivLoss

        KL = KLDivLoss(reduction='batchmean', log_target=True)


        def consistency(logp_weak, logp_strong):
            return KL(logp_strong, logp_weak.detach())
        """,
    ),
    # a helper with the default reduction, every argument kept
    Flagged(
        """
        import torch
        import torch.nn.functional as F


        def kd_loss(student, teacher, T):
            return F.kl_div(F.log_softmax(student / T, 1), F.log_softmax(teacher / T, 1).detach(), log_target=True) * T * T
        """,
        (7,),
        fixed="""
        import torch
        import torch.nn.functional as F


        def kd_loss(student, teacher, T):
            return F.kl_div(F.log_softmax(student / T, 1), F.log_softmax(teacher / T, 1).detach(), log_target=True, reduction="batchmean") * T * T
        """,
    ),
    # aliases: the function imported under another name, torch.nn.functional spelled out
    Flagged(
        """
        import torch
        from torch.nn.functional import kl_div as kld


        def loss_fn(logq, p):
            return kld(logq, p) + torch.nn.functional.kl_div(logq, p, reduction="elementwise_mean")
        """,
        (7, 7),
        fixed="""
        import torch
        from torch.nn.functional import kl_div as kld


        def loss_fn(logq, p):
            return kld(logq, p, reduction="batchmean") + torch.nn.functional.kl_div(logq, p, reduction="batchmean")
        """,
    ),
    # positional reduction after the legacy placeholders: replaced where it is
    Flagged(
        """
        import torch
        import torch.nn.functional as F


        def symm_kl(noised_logits, input_logits):
            return F.kl_div(
                F.log_softmax(noised_logits, dim=-1, dtype=torch.float32),
                F.softmax(input_logits, dim=-1, dtype=torch.float32).detach(),
                None,
                None,
                "mean",
            )
        """,
        (7,),
        fixed="""
        import torch
        import torch.nn.functional as F


        def symm_kl(noised_logits, input_logits):
            return F.kl_div(
                F.log_softmax(noised_logits, dim=-1, dtype=torch.float32),
                F.softmax(input_logits, dim=-1, dtype=torch.float32).detach(),
                None,
                None,
                "batchmean",
            )
        """,
    ),
    # a multi-line call with a trailing comma: the keyword gets its own line
    Flagged(
        """
        import torch
        import torch.nn.functional as F


        class Student(torch.nn.Module):
            def forward(self, x, teacher_log_probs):
                logits = self.head(self.body(x))
                return F.kl_div(
                    logits.log_softmax(-1),
                    teacher_log_probs,
                    log_target=True,
                )
        """,
        (9,),
        fixed="""
        import torch
        import torch.nn.functional as F


        class Student(torch.nn.Module):
            def forward(self, x, teacher_log_probs):
                logits = self.head(self.body(x))
                return F.kl_div(
                    logits.log_softmax(-1),
                    teacher_log_probs,
                    log_target=True,
                    reduction="batchmean",
                )
        """,
    ),
    # inline constructor, torch.nn spelled out
    Flagged(
        """
        import torch


        def rdrop(logp1, logp2):
            return torch.nn.KLDivLoss(log_target=True)(logp1, logp2) + torch.nn.KLDivLoss(log_target=True)(logp2, logp1)
        """,
        (6, 6),
        fixed="""
        import torch


        def rdrop(logp1, logp2):
            return torch.nn.KLDivLoss(log_target=True, reduction="batchmean")(logp1, logp2) + torch.nn.KLDivLoss(log_target=True, reduction="batchmean")(logp2, logp1)
        """,
    ),
    # the legacy arguments select "mean" (size_average=True, reduce left at None): no fix
    Flagged(
        """
        import torch.nn as nn


        class Loss(nn.Module):
            def __init__(self):
                super().__init__()
                self.kl = nn.KLDivLoss(size_average=True)
        """,
        (8,),
        message="legacy `size_average`/`reduce`",
    ),
    # positional legacy arguments, both True
    Flagged(
        """
        import torch.nn.functional as F


        def kl(logq, p):
            return F.kl_div(logq, p, True, True)
        """,
        (6,),
    ),
    # a module constant holds "mean": reported, the constant is left to the author
    Flagged(
        """
        import torch.nn.functional as F

        REDUCTION = "mean"


        def kl(logq, p):
            return F.kl_div(logq, p, reduction=REDUCTION)
        """,
        (8,),
        message="`REDUCTION` holds it",
    ),
    # the default named in the message
    Flagged(
        """
        import torch.nn.functional as F


        def kl(logq, p):
            return F.kl_div(logq, p)
        """,
        (6,),
        fixed="""
        import torch.nn.functional as F


        def kl(logq, p):
            return F.kl_div(logq, p, reduction="batchmean")
        """,
        message='reduces with "mean" (the default)',
    ),
]

SILENT = [
    # already the KL per sample
    Silent(
        """
        import torch.nn.functional as F


        def kd(s, t, T):
            return F.kl_div(F.log_softmax(s / T, -1), F.softmax(t / T, -1).detach(), reduction="batchmean") * T * T
        """
    ),
    # "sum", divided by the batch by hand (fairseq's R3F, positional legacy placeholders)
    Silent(
        """
        import torch
        import torch.nn.functional as F


        def symm_kl(noised_logits, input_logits):
            return F.kl_div(
                F.log_softmax(noised_logits, dim=-1, dtype=torch.float32),
                F.softmax(input_logits, dim=-1, dtype=torch.float32).detach(),
                None,
                None,
                "sum",
            ) / noised_logits.size(0)
        """
    ),
    # "none", summed over the classes, then its own reduction
    Silent(
        """
        import torch.nn.functional as F


        def kl(logits2, logits1):
            return F.kl_div(F.log_softmax(logits2, dim=-1), F.log_softmax(logits1, dim=-1), log_target=True, reduction="none").sum(dim=-1).mean()
        """
    ),
    # a criterion with "sum" on self
    Silent(
        """
        import torch


        class Loss(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.criterion = torch.nn.KLDivLoss(reduction="sum")

            def forward(self, outputs, targets):
                return self.criterion(outputs, targets) / outputs.shape[0]
        """
    ),
    # the reduction is the caller's: a parameter, an attribute, a config field
    Silent(
        """
        import torch.nn as nn
        import torch.nn.functional as F


        class KL(nn.Module):
            def __init__(self, reduction="mean"):
                super().__init__()
                self.reduction = reduction
                self.loss = nn.KLDivLoss(reduction=reduction)

            def forward(self, a, b, cfg):
                return F.kl_div(a, b, reduction=self.reduction) + F.kl_div(a, b, reduction=cfg.reduction)
        """
    ),
    # a name that holds "mean" on one branch only
    Silent(
        """
        import torch.nn.functional as F


        def kl(logq, p, per_sample):
            reduction = "mean"
            if per_sample:
                reduction = "batchmean"
            return F.kl_div(logq, p, reduction=reduction)
        """
    ),
    # the legacy arguments select "sum" and "none"
    Silent(
        """
        import torch.nn as nn
        import torch.nn.functional as F

        kl_sum = nn.KLDivLoss(size_average=False)


        def kl(logq, p):
            return F.kl_div(logq, p, reduce=False).sum(-1).mean() + kl_sum(logq, p) / logq.size(0)
        """
    ),
    # **kwargs and *args may carry the reduction
    Silent(
        """
        import torch.nn as nn
        import torch.nn.functional as F


        def kl(logq, p, *args, **kwargs):
            return F.kl_div(logq, p, **kwargs) + nn.KLDivLoss(*args)(logq, p)
        """
    ),
    # not torch's kl_div: a library's, a method of the module itself, the distributions' KL
    Silent(
        """
        import torch
        from mylib import kl_div


        class VAE(torch.nn.Module):
            def forward(self, q, p, logq, t):
                kl = torch.distributions.kl_divergence(q, p).mean()
                return kl + kl_div(logq, t) + self.kl_div(logq, t)
        """
    ),
    # the class itself, not an instance: a registry of losses
    Silent(
        """
        import torch.nn as nn

        LOSSES = {"kl": nn.KLDivLoss, "mse": nn.MSELoss}
        """
    ),
]


@pytest.mark.parametrize("code, case", harness.params(CODE, FLAGGED, SILENT))
def test_kl_div_mean_reduction(code, case):
    harness.check(code, case)


KL_RULES = ("TNL101", "TNL102", "TNL114")


def _run(source, codes=KL_RULES):
    rules = [registry()[c] for c in codes]
    text = textwrap.dedent(source)
    return text, rules, lint_text("example.py", text, rules)


@pytest.mark.parametrize(
    "source, fixed",
    [
        (
            """
            import torch.nn.functional as F


            def mutual(a, b):
                return F.kl_div(F.softmax(a, -1), F.softmax(b, -1))
            """,
            """
            import torch.nn.functional as F


            def mutual(a, b):
                return F.kl_div(F.log_softmax(a, -1), F.log_softmax(b, -1), log_target=True, reduction="batchmean")
            """,
        ),
        (
            """
            import torch.nn as nn


            def mutual(a, b):
                return nn.KLDivLoss()(a.softmax(1), b.softmax(1))
            """,
            """
            import torch.nn as nn


            def mutual(a, b):
                return nn.KLDivLoss(log_target=True, reduction="batchmean")(a.log_softmax(1), b.log_softmax(1))
            """,
        ),
    ],
)
def test_three_kl_rules_on_one_call_fix_to_a_fixpoint(source, fixed):
    """TNL101 (target), TNL102 (input) and TNL114 (reduction) are three hazards of one call:
    each reports, and the fix loop applies their overlapping fixes pass after pass."""
    text, rules, found = _run(source)
    assert sorted(f.code for f in found) == list(KL_RULES)
    result = fix_text("example.py", text, rules, unsafe=True)
    assert not result.errors
    assert result.text == textwrap.dedent(fixed)
    assert lint_text("example.py", result.text, rules) == []


def test_each_kl_rule_reports_alone():
    """No rule defers to another on this call: disabling any two leaves the third's finding."""
    source = """
    import torch.nn.functional as F


    def mutual(a, b):
        return F.kl_div(F.softmax(a, -1), F.softmax(b, -1))
    """
    for code in KL_RULES:
        _, _, found = _run(source, (code,))
        assert [f.code for f in found] == [code]
