"""TNL201 on counts made away from the division (`rules/count_sources.py`) and on unions and
sums of counts (`rules/unions.py`, `divisors.zero_kind`): a per-class count read at a class or
whole, a cumulative count's last entry, a count held in an attribute or passed as a parameter,
`p.sum() + t.sum() - (p * t).sum()`. Each flagged form is written the way metric, loss and
clustering code writes it, with look-alikes beside it that the code itself bounds: read at the
labels it counted, clamped, a weight rather than a mask, `+ eps`, `+ 1`, an operand positive by
construction, a size instead of a count. The division family is enabled together, as a user's
run enables it."""

import functools

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Project, Silent

DIVISION = ("TNL201", "TNL202", "TNL204", "TNL206")

flagged = functools.partial(Flagged, together=DIVISION)
silent = functools.partial(Silent, together=DIVISION)

# ---------------------------------------------------------------------------------------------
# Per-class counts: 0 for a class the batch lacks; never 0 where a label was counted

CENTROIDS = """
    import torch
    import torch.nn.functional as F


    def class_centroids(feats, labels, num_classes: int):
        counts = F.one_hot(labels, num_classes).sum(0)
        sums = torch.zeros(num_classes, feats.size(1)).index_add_(0, labels, feats)
        return sums / counts[:, None]
    """
CLASS_LOSS = """
    import torch


    def class_loss(losses, labels, k: int):
        hist = torch.bincount(labels, minlength=10)
        return losses[labels == k].sum() / hist[k]
    """
# a file whose only count is a bincount (the pre-filter keeps it)
CLASS_WEIGHT = """
    import torch


    def class_weight(labels, k: int):
        hist = torch.bincount(labels, minlength=10)
        return 1.0 / hist[k]
    """
PER_CLASS = [
    flagged(
        CENTROIDS,
        (9,),
        CENTROIDS.replace("counts[:, None]\n", "counts[:, None].clamp_min(1e-12)\n"),
        message="a per-class count, which is 0 for a class the batch lacks",
    ),
    flagged(CLASS_LOSS, (7,), CLASS_LOSS.replace("hist[k]\n", "hist[k].clamp_min(1)\n"), safe=True, message="a per-class count"),
    flagged(CLASS_WEIGHT, (7,), CLASS_WEIGHT.replace("hist[k]\n", "hist[k].clamp_min(1)\n"), safe=True, message="a per-class count"),
]
PER_CLASS_SILENT = [
    silent("""
    import torch


    def inverse_frequency(labels, num_classes: int):
        counts = torch.bincount(labels, minlength=num_classes)
        return 1.0 / counts[labels]


    def sample_weights(labels):
        class_weight = 1.0 / labels.bincount()
        return class_weight[labels]
    """),
    silent("""
    import torch
    import torch.nn.functional as F


    def class_centroids(feats, labels, num_classes: int):
        counts = F.one_hot(labels, num_classes).sum(0).clamp(min=1)
        sums = torch.zeros(num_classes, feats.size(1)).index_add_(0, labels, feats)
        return sums / counts[:, None]
    """),
]

# ---------------------------------------------------------------------------------------------
# A cumulative count's last entry: the count of the mask

KEPT_MEAN = """
    import torch


    def mean_confident(scores, values):
        keep = scores > 0.5
        n_kept = torch.cumsum(keep, dim=-1)[..., -1]
        return (values * keep).sum(-1) / n_kept
    """
CUMULATIVE = [
    flagged(
        KEPT_MEAN,
        (8,),
        KEPT_MEAN.replace("/ n_kept\n", "/ n_kept.clamp_min(1)\n"),
        safe=True,
        message="a cumulative count's last entry, which is 0 when nothing is selected: `scores > 0.5`",
    ),
]
CUMULATIVE_SILENT = [
    # a running total of weights (not a count of a mask), and a cumulative count read before its end
    silent("""
    import torch


    def share_of_total(weights, x):
        return x / torch.cumsum(weights, 0)[-1]


    def mean_confident(scores, values):
        keep = scores > 0.5
        n_kept = torch.cumsum(keep, dim=-1)[..., -1].clamp(min=1)
        return (values * keep).sum(-1) / n_kept
    """),
]

# ---------------------------------------------------------------------------------------------
# A count held in an attribute: judged where another method sets it

ATTRIBUTE = [
    flagged(
        """
    import torch
    from torch import nn


    class FocalHead(nn.Module):
        def forward(self, logits, labels):
            positive = labels > 0
            self.num_pos = positive.sum()
            return self.normalise(nn.functional.softplus(-logits[positive]))

        def normalise(self, losses):
            return losses.sum() / self.num_pos
    """,
        (13,),
        message="a count held in an attribute, which is 0 when nothing is selected: `labels > 0` (line 8) keeps the values past a threshold, which can be none (set as `self.num_pos` at line 9)",
    ),
]
ATTRIBUTE_SILENT = [
    # clamped where it is set; a size, never 0; its initial 0 in `__init__` is replaced by the first
    # call; an attribute set from itself, passed to a helper that divides by it (judged once, not in a
    # loop: this recursed without end)
    silent("""
    import torch
    from torch import nn


    class BoundedHead(nn.Module):
        def __init__(self):
            super().__init__()
            self.num_pos = 0

        def forward(self, logits, labels):
            positive = labels > 0
            self.num_pos = positive.sum().clamp(min=1)
            return self.normalise(nn.functional.softplus(-logits[positive]))

        def normalise(self, losses):
            return losses.sum() / self.num_pos


    class BatchHead(nn.Module):
        def forward(self, logits, labels):
            self.batch = logits.shape[0]
            return self.normalise(logits)

        def normalise(self, losses):
            return losses.sum() / self.batch


    class Rotary(nn.Module):
        def __init__(self, dim: int):
            super().__init__()
            self.inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2) / dim))
            self.inv_freq = self.rescale(self.inv_freq)

        def rescale(self, inv_freq):
            return 6.28 / inv_freq

        def forward(self, x):
            self.inv_freq = self.inv_freq.to(x.device)
            return x * self.inv_freq
    """),
]

# ---------------------------------------------------------------------------------------------
# A count passed as a parameter: judged at the callers, in the project

NORMALISE = """\
    import torch


    def normalise(loss, count):
        return loss.sum() / count
    """
PARAMETER = [
    Project(
        {
            "losses.py": NORMALISE,
            "train.py": """\
            import torch
            from losses import normalise


            def train_step(model, batch, labels):
                loss = model(batch)
                return normalise(loss, (labels > 0).sum())
            """,
        },
        lines={"losses.py": (5,)},
        message="passed as `count` to `normalise` by the call (train.py:7)",
    ),
]
PARAMETER_SILENT = [
    # callers that pass a size, a count bounded at 1, or nothing known
    silent("""
    import torch


    def normalise(loss, count):
        return loss.sum() / count


    def step(loss, labels, n):
        a = normalise(loss, labels.numel())
        b = normalise(loss, max((labels > 0).sum().item(), 1))
        return a + b + normalise(loss, n)
    """),
]

# ---------------------------------------------------------------------------------------------
# Unions and sums of counts: 0 when every part is

CLASS_IOU = """
    import torch


    def class_iou(pred_labels, labels, c: int):
        hit = (pred_labels == c).float()
        truth = (labels == c).float()
        overlap = (hit * truth).sum()
        union = hit.sum() + truth.sum() - overlap
        return overlap / union
    """
TOTALS = [
    flagged(
        CLASS_IOU,
        (10,),
        CLASS_IOU.replace("/ union\n", "/ union.clamp_min(1e-12)\n"),
        message="a union (two sums less their intersection), which is 0 when nothing is selected",
    ),
    flagged(
        """
    import torch


    def share_of_class(pred_labels, labels, c: int):
        predicted = (pred_labels == c).sum()
        true = (labels == c).sum()
        next_class = (labels == c + 1).sum()
        return predicted / (predicted + true + next_class)
    """,
        (9,),
        message="a sum of counts or sums, which is 0 when nothing is selected",
    ),
]
TOTALS_SILENT = [
    silent("""
    import torch


    def smooth_iou(pred_labels, labels, c: int):
        hit = (pred_labels == c).float()
        truth = (labels == c).float()
        overlap = (hit * truth).sum()
        return overlap / (hit.sum() + truth.sum() - overlap + 1e-6)


    def not_a_union(pred_labels, labels, extra, c: int):
        hit = (pred_labels == c).float()
        truth = (labels == c).float()
        return hit.sum() / (hit.sum() + truth.sum() - extra.sum())


    def plus_one(pred_labels, c: int):
        hit = (pred_labels == c).float()
        return hit.sum() / (hit.sum() + 1)


    def with_a_positive_part(pred_labels, scores, c: int):
        hit = (pred_labels == c).float()
        return hit.sum() / (hit.sum() + scores.exp().sum())
    """),
]


@pytest.mark.parametrize(
    "code, case",
    harness.params(
        "TNL201",
        PER_CLASS + CUMULATIVE + ATTRIBUTE + TOTALS,
        PER_CLASS_SILENT + CUMULATIVE_SILENT + ATTRIBUTE_SILENT + PARAMETER_SILENT + TOTALS_SILENT,
        PARAMETER,
    ),
)
def test_counts_made_away_from_the_division(code, case):
    harness.check(code, case)
