"""TNL105 bce-on-sigmoid and TNL113 probabilities-into-cross-entropy: probabilities handed to
losses that expect logits, in the forms training code writes them."""

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent
from torchnumlint.engine import lint_text
from torchnumlint.rules.registry import registry

# ---------------------------------------------------------------------------------------------
# TNL105

BCE_FLAGGED = [
    # a loss in a forward, the sigmoid inline: fixed on the logits
    Flagged(
        """
        import torch
        import torch.nn.functional as F
        from torch import nn


        class Discriminator(nn.Module):
            def forward(self, x, real):
                out = self.fc(x)
                return F.binary_cross_entropy(torch.sigmoid(out), real)
        """,
        (10,),
        fixed="""
        import torch
        import torch.nn.functional as F
        from torch import nn


        class Discriminator(nn.Module):
            def forward(self, x, real):
                out = self.fc(x)
                return F.binary_cross_entropy_with_logits(out, real)
        """,
    ),
    # self.criterion = nn.BCELoss() built in __init__, called in the training step: no fix
    Flagged(
        """
        import torch
        import pytorch_lightning as pl
        from torch import nn


        class Tagger(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.criterion = nn.BCELoss()

            def training_step(self, batch, batch_idx):
                x, y = batch
                logits = self.model(x)
                loss = self.criterion(torch.sigmoid(logits), y.float())
                return loss
        """,
        (15,),
        message="capped at 100",
    ),
    # a module-level criterion in a training loop, method form of the sigmoid
    Flagged(
        """
        import torch
        import torch.nn as nn

        criterion = nn.BCELoss()


        def train_epoch(model, loader, opt):
            for x, y in loader:
                opt.zero_grad()
                loss = criterion(model(x).sigmoid(), y)
                loss.backward()
                opt.step()
        """,
        (11,),
    ),
    # nn.BCELoss called on the spot: the module becomes BCEWithLogitsLoss, its arguments kept
    Flagged(
        """
        import torch
        from torch import nn


        def loss_fn(z, y, w):
            return nn.BCELoss(weight=w, reduction="sum")(torch.sigmoid(z), y)
        """,
        (7,),
        fixed="""
        import torch
        from torch import nn


        def loss_fn(z, y, w):
            return nn.BCEWithLogitsLoss(weight=w, reduction="sum")(z, y)
        """,
    ),
    # a model whose Sequential ends in nn.Sigmoid(): reported at the loss, named, no fix
    Flagged(
        """
        import torch
        import torch.nn.functional as F
        from torch import nn


        class Critic(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(16, 1), nn.Sigmoid())

            def loss(self, x, y):
                return F.binary_cross_entropy(self.net(x), y)
        """,
        (13,),
        message="made by `self.net`",
    ),
    # a helper that returns a sigmoid, the loss in another function
    Flagged(
        """
        import torch
        import torch.nn.functional as F


        def predict(model, x):
            return torch.sigmoid(model(x))


        def step(model, x, y, opt):
            loss = F.binary_cross_entropy(predict(model, x), y)
            loss.backward()
            opt.step()
        """,
        (11,),
    ),
    # through a subscript of a named sigmoid: reported, no fix
    Flagged(
        """
        import torch
        import torch.nn.functional as F


        def objectness_loss(logits, y):
            probs = torch.sigmoid(logits)
            return F.binary_cross_entropy(probs[:, 0], y), probs
        """,
        (8,),
    ),
    # a name read only here, logits plain: recomputed at the use, the sigmoid line dropped
    Flagged(
        """
        import torch
        import torch.nn.functional as F


        def mask_loss(mask_logits, gt):
            p = torch.sigmoid(mask_logits)
            return F.binary_cross_entropy(p, gt, reduction="mean")
        """,
        (8,),
        fixed="""
        import torch
        import torch.nn.functional as F


        def mask_loss(mask_logits, gt):
            return F.binary_cross_entropy_with_logits(mask_logits, gt, reduction="mean")
        """,
    ),
    # a name read only here, logits computed by a layer: the assignment keeps the logits
    Flagged(
        """
        import torch
        import torch.nn.functional as F
        from torch import nn


        class Head(nn.Module):
            def forward(self, h, y):
                probs = torch.sigmoid(self.proj(h))
                return F.binary_cross_entropy(probs, y)
        """,
        (10,),
        fixed="""
        import torch
        import torch.nn.functional as F
        from torch import nn


        class Head(nn.Module):
            def forward(self, h, y):
                probs = self.proj(h)
                return F.binary_cross_entropy_with_logits(probs, y)
        """,
        message="`probs` hold the logits",
    ),
    # imported by name under an alias, expit, positional weight, multi-line call
    Flagged(
        """
        import torch
        from torch.nn.functional import binary_cross_entropy as bce
        from torch.special import expit


        def weighted(z, y, w):
            return bce(
                expit(z),
                y,
                w,
            )
        """,
        (8,),
        fixed="""
        import torch
        from torch.nn.functional import binary_cross_entropy as bce
        from torch.special import expit


        def weighted(z, y, w):
            return torch.nn.functional.binary_cross_entropy_with_logits(
                z,
                y,
                w,
            )
        """,
    ),
    # written out, with TNL104 off (alone, this rule reports it once; no fix)
    Flagged(
        """
        import torch


        def bce(z, y):
            p = torch.sigmoid(z)
            return -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean()
        """,
        (7,),
        message="written out",
    ),
    # written out as a difference, method logs
    Flagged(
        """
        import torch


        class Loss(torch.nn.Module):
            def forward(self, logits, target):
                p = logits.sigmoid()
                loss = -target * p.log() - (1 - target) * (1 - p).log()
                return loss.sum()
        """,
        (8,),
    ),
    # `nan_to_num` between the sigmoid and the loss replaces only NaN and Inf: it keeps the 1.0 that
    # a float32 logit of 20 rounds to. Measured on torch 2.13 CPU, label 0: the loss is 100 (true
    # 20) and its gradient 0.0 (true 1.0); at logit -30, label 1, the gradient is -0.094 (true -1).
    # The fix drops the `nan_to_num` with the sigmoid, so it is unsafe: a NaN logit, whose loss
    # the `nan_to_num` made finite (0 for label 0; the gradient NaN all the same), gives NaN.
    Flagged(
        """
        import torch
        import torch.nn.functional as F


        def objectness_loss(obj_logits, obj_target, optimizer):
            loss = F.binary_cross_entropy(torch.nan_to_num(torch.sigmoid(obj_logits)), obj_target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return loss.item()
        """,
        (7,),
        fixed="""
        import torch
        import torch.nn.functional as F


        def objectness_loss(obj_logits, obj_target, optimizer):
            loss = F.binary_cross_entropy_with_logits(obj_logits, obj_target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return loss.item()
        """,
        safe=False,
        message="the fix drops the `nan_to_num` with the sigmoid",
    ),
    # the method form kept in a name, an `nn.BCELoss` built inline: the name is made to hold the logits
    Flagged(
        """
        import torch
        from torch import nn


        def step(model, x, y):
            p = torch.sigmoid(model(x)).nan_to_num(0.0)
            loss = nn.BCELoss()(p, y)
            loss.backward()
            return loss
        """,
        (8,),
        fixed="""
        import torch
        from torch import nn


        def step(model, x, y):
            p = model(x)
            loss = nn.BCEWithLogitsLoss()(p, y)
            loss.backward()
            return loss
        """,
        safe=False,
        message="the fix makes `p` hold the logits",
    ),
    # a criterion kept in an attribute, `torch.nan_to_num` with keywords: reported, no fix
    Flagged(
        """
        import torch
        from torch import nn


        class MultiLabelHead(nn.Module):
            def __init__(self, dim, labels):
                super().__init__()
                self.fc = nn.Linear(dim, labels)
                self.criterion = nn.BCELoss(reduction="sum")

            def forward(self, h, targets):
                probs = torch.nan_to_num(self.fc(h).sigmoid(), nan=0.0, posinf=1.0, neginf=0.0)
                return self.criterion(probs, targets), probs
        """,
        (14,),
    ),
]

BCE_SILENT = [
    # the with-logits forms
    Silent(
        """
        import torch.nn.functional as F
        from torch import nn


        def losses(z, y):
            return F.binary_cross_entropy_with_logits(z, y) + nn.BCEWithLogitsLoss()(z, y)
        """
    ),
    # a softplus loss on the logits
    Silent(
        """
        import torch
        import torch.nn.functional as F


        def logistic(z, y):
            return F.softplus(-(2 * y - 1) * z).mean() + torch.sigmoid(z).mean()
        """
    ),
    # probabilities that are data (a label-smoothing target, a dataset's soft labels)
    Silent(
        """
        import torch
        import torch.nn.functional as F


        def soft_bce(pred_probs, soft_labels):
            return F.binary_cross_entropy(pred_probs, soft_labels)
        """
    ),
    # a clamped sigmoid: the author chose the clamp
    Silent(
        """
        import torch
        import torch.nn.functional as F


        def focal(z, y, eps=1e-6):
            p = torch.sigmoid(z).clamp(min=eps, max=1 - eps)
            return F.binary_cross_entropy(p, y)
        """
    ),
    # evaluation: no gradient flows
    Silent(
        """
        import torch
        from torch import nn

        bce = nn.BCELoss()


        @torch.no_grad()
        def validate(model, loader):
            return sum(bce(torch.sigmoid(model(x)), y).item() for x, y in loader)
        """
    ),
    # a sigmoid on one branch only
    Silent(
        """
        import torch
        import torch.nn.functional as F


        def loss(z, y, probs=None):
            if probs is None:
                probs = torch.sigmoid(z)
            return F.binary_cross_entropy(probs, y)
        """
    ),
    # the sigmoid is the target (a teacher's), the input is data
    Silent(
        """
        import torch
        import torch.nn.functional as F


        def distill(student_probs, teacher_logits):
            return F.binary_cross_entropy(student_probs, torch.sigmoid(teacher_logits))
        """
    ),
    # a function of the project that happens to share the name
    Silent(
        """
        import torch


        def binary_cross_entropy(p, y):
            return -(y * p).mean()


        def loss(z, y):
            return binary_cross_entropy(torch.sigmoid(z), y)
        """
    ),
    # a Sequential that does not end in the sigmoid
    Silent(
        """
        import torch.nn.functional as F
        from torch import nn


        class Gate(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Sigmoid(), nn.Linear(8, 1))

            def forward(self, x, y):
                return F.binary_cross_entropy(self.net(x), y)
        """
    ),
    # written out with an eps (neither rule), and with Python's math on floats
    Silent(
        """
        import math
        import torch


        def bce(z, y, eps=1e-7):
            p = torch.sigmoid(z)
            q = 1 / (1 + math.exp(-float(z.mean())))
            a = -(y * torch.log(p + eps) + (1 - y) * torch.log(1 - p + eps))
            return a.mean() - (0.5 * math.log(q) + 0.5 * math.log(1 - q))
        """,
        together=("TNL104",),
    ),
    # `nan_to_num` look-alikes: of a sigmoid then clamped (the author's clamp), of probabilities
    # from the data, of the logits fed to the with-logits loss, and in evaluation without a gradient
    Silent(
        """
        import torch
        import torch.nn.functional as F


        def losses(z, y, soft_targets, teacher_probs):
            p = torch.nan_to_num(torch.sigmoid(z)).clamp(1e-6, 1 - 1e-6)
            distill = F.binary_cross_entropy(teacher_probs.nan_to_num(0.5), soft_targets)
            return F.binary_cross_entropy(p, y) + distill + F.binary_cross_entropy_with_logits(torch.nan_to_num(z), y)


        @torch.no_grad()
        def evaluate(model, x, y):
            return F.binary_cross_entropy(model(x).sigmoid().nan_to_num(0.0), y).item()
        """,
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL105", BCE_FLAGGED, BCE_SILENT))
def test_bce_on_sigmoid(code, case):
    harness.check(code, case)


HANDWRITTEN = """\
import torch


def bce(z, y):
    p = torch.sigmoid(z)
    return -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean()
"""


@pytest.mark.parametrize(
    "enabled, expected",
    [
        (("TNL104", "TNL105"), [("TNL104", 6), ("TNL104", 6)]),  # the owner reports each log
        (("TNL104",), [("TNL104", 6), ("TNL104", 6)]),
        (("TNL105",), [("TNL105", 6)]),  # the owner disabled: the hazard is still reported
    ],
)
def test_handwritten_bce_has_one_owner(enabled, expected):
    rules = [registry()[code] for code in enabled]
    found = lint_text("example.py", HANDWRITTEN, rules)
    assert sorted((f.code, f.line) for f in found) == expected


# ---------------------------------------------------------------------------------------------
# TNL113

CE_FLAGGED = [
    # a loss in a forward, the softmax inline: the logits are passed
    Flagged(
        """
        import torch
        import torch.nn.functional as F
        from torch import nn


        class Net(nn.Module):
            def forward(self, x, y):
                logits = self.fc(x)
                return F.cross_entropy(F.softmax(logits, dim=1), y, label_smoothing=0.1)
        """,
        (10,),
        fixed="""
        import torch
        import torch.nn.functional as F
        from torch import nn


        class Net(nn.Module):
            def forward(self, x, y):
                logits = self.fc(x)
                return F.cross_entropy(logits, y, label_smoothing=0.1)
        """,
        message="[1.46, 2.46]",
    ),
    # self.criterion = nn.CrossEntropyLoss() in __init__, a probabilities name read elsewhere
    # too: log_softmax recomputed at the use
    Flagged(
        """
        import torch
        from torch import nn


        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.criterion = nn.CrossEntropyLoss()

            def training_step(self, batch):
                x, y = batch
                out = self.backbone(x)
                probs = torch.softmax(out, -1)
                loss = self.criterion(probs, y)
                return loss, probs.argmax(-1)
        """,
        (15,),
        fixed="""
        import torch
        from torch import nn


        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.criterion = nn.CrossEntropyLoss()

            def training_step(self, batch):
                x, y = batch
                out = self.backbone(x)
                probs = torch.softmax(out, -1)
                loss = self.criterion(torch.log_softmax(out, -1), y)
                return loss, probs.argmax(-1)
        """,
    ),
    # a model whose Sequential ends in nn.Softmax, a module-level criterion, a training loop
    Flagged(
        """
        import torch
        from torch import nn

        model = nn.Sequential(nn.Linear(784, 10), nn.Softmax(dim=1))
        criterion = nn.CrossEntropyLoss()


        def train(loader, opt):
            for x, y in loader:
                loss = criterion(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
        """,
        (11,),
        message="made by `model`",
    ),
    # a model class whose forward ends in a softmax
    Flagged(
        """
        import torch
        import torch.nn.functional as F
        from torch import nn


        class Classifier(nn.Module):
            def forward(self, x):
                return F.softmax(self.fc(x), dim=-1)


        def step(x, y):
            net = Classifier()
            return F.cross_entropy(net(x), y)
        """,
        (14,),
    ),
    # nll_loss of probabilities through a name read only here: the assignment becomes log_softmax
    Flagged(
        """
        import torch.nn.functional as F


        def loss_fn(scores, target):
            p = F.softmax(scores, 1)
            return F.nll_loss(p, target, ignore_index=-1)
        """,
        (7,),
        fixed="""
        import torch.nn.functional as F


        def loss_fn(scores, target):
            p = F.log_softmax(scores, 1)
            return F.nll_loss(p, target, ignore_index=-1)
        """,
        message="negative loss",
    ),
    # nn.NLLLoss on an inline softmax (method form)
    Flagged(
        """
        import torch
        from torch import nn


        def nll(x, y):
            return nn.NLLLoss(reduction="sum")(x.softmax(1), y)
        """,
        (7,),
        fixed="""
        import torch
        from torch import nn


        def nll(x, y):
            return nn.NLLLoss(reduction="sum")(x.log_softmax(1), y)
        """,
    ),
    # a helper that returns probabilities: reported, no fix
    Flagged(
        """
        import torch
        import torch.nn.functional as F


        def predict(model, x):
            return torch.softmax(model(x), dim=1)


        def evaluate_batch(model, x, y):
            return F.cross_entropy(predict(model, x), y)
        """,
        (11,),
    ),
    # an alias, a subscript over a sequence of steps: reported, no fix
    Flagged(
        """
        import torch
        from torch.nn.functional import cross_entropy as xent


        def seq_loss(logits, targets):
            probs = logits.softmax(dim=-1)
            return xent(probs[:, -1], targets)
        """,
        (8,),
    ),
    # a softmax without a dim, inline: the logits need none
    Flagged(
        """
        import torch
        import torch.nn.functional as F


        def old_style(out, y):
            return F.cross_entropy(F.softmax(out), y)
        """,
        (7,),
        fixed="""
        import torch
        import torch.nn.functional as F


        def old_style(out, y):
            return F.cross_entropy(out, y)
        """,
    ),
]

CE_SILENT = [
    # logits, and log-probabilities (cross_entropy of log_softmax is the same loss)
    Silent(
        """
        import torch.nn.functional as F


        def losses(x, y):
            return F.cross_entropy(x, y) + F.cross_entropy(F.log_softmax(x, 1), y) + F.nll_loss(x.log_softmax(1), y)
        """
    ),
    # a softmax as the soft target (distillation)
    Silent(
        """
        import torch
        import torch.nn.functional as F


        def distill(student, teacher, T=2.0):
            return F.cross_entropy(student / T, F.softmax(teacher / T, dim=-1))
        """
    ),
    # nll_loss of the log of a softmax: log-probabilities, TNL103's site
    Silent(
        """
        import torch
        import torch.nn.functional as F


        def nll(x, y):
            return F.nll_loss(torch.log(F.softmax(x, 1)), y)
        """
    ),
    # a model ending in nn.LogSoftmax, trained with NLLLoss
    Silent(
        """
        import torch
        from torch import nn

        model = nn.Sequential(nn.Linear(784, 10), nn.LogSoftmax(dim=1))
        criterion = nn.NLLLoss()


        def train_step(x, y):
            return criterion(model(x), y)
        """
    ),
    # a softmax inside the model (attention), the loss on the classifier's logits
    Silent(
        """
        import torch
        import torch.nn.functional as F
        from torch import nn


        class Attn(nn.Module):
            def forward(self, q, k, v, y):
                w = F.softmax(q @ k.transpose(-2, -1), dim=-1)
                h = w @ v
                h = self.out(h)
                return F.cross_entropy(h, y)
        """
    ),
    # probabilities for metrics, the loss on the logits
    Silent(
        """
        import torch
        import torch.nn.functional as F


        def step(model, x, y):
            logits = model(x)
            probs = F.softmax(logits, dim=1)
            return F.cross_entropy(logits, y), (probs.argmax(1) == y).float().mean()
        """
    ),
    # a function of the project that happens to share the name
    Silent(
        """
        import torch


        def cross_entropy(p, y):
            return -(p.gather(1, y[:, None]) + 1e-8).log().mean()


        def loss(x, y):
            return cross_entropy(torch.softmax(x, 1), y)
        """
    ),
    # a Sequential with a softmax inside but not at the end
    Silent(
        """
        import torch
        from torch import nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(8, 8), nn.Softmax(dim=1), nn.Linear(8, 3))
                self.loss = nn.CrossEntropyLoss()

            def forward(self, x, y):
                return self.loss(self.net(x), y)
        """
    ),
    # a softmax on one branch only
    Silent(
        """
        import torch
        import torch.nn.functional as F


        def loss(x, y, normalized):
            out = x
            if normalized:
                out = F.softmax(x, dim=1)
            return F.cross_entropy(out, y)
        """
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL113", CE_FLAGGED, CE_SILENT))
def test_probabilities_into_cross_entropy(code, case):
    harness.check(code, case)


NLL_OF_LOG = """\
import torch
import torch.nn.functional as F


def nll(x, y):
    return F.nll_loss(torch.log(F.softmax(x, 1)), y)
"""


@pytest.mark.parametrize("enabled", [("TNL103", "TNL113"), ("TNL103",)])
def test_nll_of_log_softmax_is_tnl103s(enabled):
    """TNL113 does not recognise nll_loss(log(softmax)) (its input is log-probabilities); TNL103
    reports it, alone or with TNL113."""
    found = lint_text("example.py", NLL_OF_LOG, [registry()[code] for code in enabled])
    assert [(f.code, f.line) for f in found] == [("TNL103", 6)]


# ---------------------------------------------------------------------------------------------
# TNL115: a sigmoid into a loss that applies its own

LOGITS_FLAGGED = [
    # a loss in a forward, the sigmoid inline: the logits passed
    Flagged(
        """
        import torch
        import torch.nn.functional as F
        from torch import nn


        class Tagger(nn.Module):
            def forward(self, x, tags):
                out = self.fc(x)
                return F.binary_cross_entropy_with_logits(torch.sigmoid(out), tags)
        """,
        (10,),
        fixed="""
        import torch
        import torch.nn.functional as F
        from torch import nn


        class Tagger(nn.Module):
            def forward(self, x, tags):
                out = self.fc(x)
                return F.binary_cross_entropy_with_logits(out, tags)
        """,
        message="pass the logits",
    ),
    # self.criterion built in __init__ with pos_weight, called in the training step: only the
    # input is rewritten, so the attribute's call is fixed and its arguments kept
    Flagged(
        """
        import torch
        import pytorch_lightning as pl
        from torch import nn


        class Classifier(pl.LightningModule):
            def __init__(self, pos_weight):
                super().__init__()
                self.criterion = nn.BCEWithLogitsLoss(pos_weight=pos_weight)

            def training_step(self, batch, batch_idx):
                x, y = batch
                logits = self.model(x)
                loss = self.criterion(torch.sigmoid(logits), y.float())
                return loss
        """,
        (15,),
        fixed="""
        import torch
        import pytorch_lightning as pl
        from torch import nn


        class Classifier(pl.LightningModule):
            def __init__(self, pos_weight):
                super().__init__()
                self.criterion = nn.BCEWithLogitsLoss(pos_weight=pos_weight)

            def training_step(self, batch, batch_idx):
                x, y = batch
                logits = self.model(x)
                loss = self.criterion(logits, y.float())
                return loss
        """,
        message="`BCEWithLogitsLoss` of a sigmoid",
    ),
    # the probabilities kept in a name read again later: recomputed at the use
    Flagged(
        """
        import torch
        from torch import nn


        def step(model, x, y, optimizer):
            criterion = nn.BCEWithLogitsLoss()
            scores = model(x)
            probs = scores.sigmoid()
            loss = criterion(probs, y)
            loss.backward()
            optimizer.step()
            return loss.item(), (probs > 0.5).float().mean()
        """,
        (10,),
        fixed="""
        import torch
        from torch import nn


        def step(model, x, y, optimizer):
            criterion = nn.BCEWithLogitsLoss()
            scores = model(x)
            probs = scores.sigmoid()
            loss = criterion(scores, y)
            loss.backward()
            optimizer.step()
            return loss.item(), (probs > 0.5).float().mean()
        """,
    ),
    # an inline constructor, the function imported under an alias, torch.special.expit
    Flagged(
        """
        import torch
        from torch import nn


        def loss_fn(z, y):
            return nn.BCEWithLogitsLoss(reduction="sum")(torch.sigmoid(z), y)
        """,
        (7,),
        fixed="""
        import torch
        from torch import nn


        def loss_fn(z, y):
            return nn.BCEWithLogitsLoss(reduction="sum")(z, y)
        """,
    ),
    Flagged(
        """
        import torch
        from torch.nn.functional import binary_cross_entropy_with_logits as bce_logits


        def edge_loss(edge_logits, edge_gt):
            edge_prob = torch.special.expit(edge_logits)
            return bce_logits(edge_prob, edge_gt, reduction="mean")
        """,
        (8,),
        fixed="""
        import torch
        from torch.nn.functional import binary_cross_entropy_with_logits as bce_logits


        def edge_loss(edge_logits, edge_gt):
            return bce_logits(edge_logits, edge_gt, reduction="mean")
        """,
    ),
    # a helper that returns a sigmoid, and a model ending in nn.Sigmoid: reported, no fix
    Flagged(
        """
        import torch
        import torch.nn.functional as F


        def predict(net, x):
            return torch.sigmoid(net(x))


        def train_step(net, x, y):
            return F.binary_cross_entropy_with_logits(predict(net, x), y)
        """,
        (11,),
        message="(made by `predict`)",
    ),
    Flagged(
        """
        import torch
        from torch import nn

        model = nn.Sequential(nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 1), nn.Sigmoid())
        criterion = nn.BCEWithLogitsLoss()


        def train(loader, optimizer):
            for x, y in loader:
                loss = criterion(model(x).squeeze(1), y)
                loss.backward()
                optimizer.step()
        """,
        (11,),
    ),
    # a subscripted sigmoid: reported, no fix (the logits are not a plain call's input)
    Flagged(
        """
        import torch
        import torch.nn.functional as F


        def objectness(pred, target):
            conf = torch.sigmoid(pred)[..., 4]
            return F.binary_cross_entropy_with_logits(conf, target[..., 4])
        """,
        (8,),
    ),
    # in evaluation too: the loss value itself is wrong, not only its gradient
    Flagged(
        """
        import torch
        import torch.nn.functional as F


        @torch.no_grad()
        def validate(model, x, y):
            return F.binary_cross_entropy_with_logits(model(x).sigmoid(), y).item()
        """,
        (8,),
        fixed="""
        import torch
        import torch.nn.functional as F


        @torch.no_grad()
        def validate(model, x, y):
            return F.binary_cross_entropy_with_logits(model(x), y).item()
        """,
    ),
]

LOGITS_SILENT = [
    Silent(s)
    for s in [
        # the logits themselves
        """
        import torch
        import torch.nn.functional as F


        def loss(z, y):
            return F.binary_cross_entropy_with_logits(z, y)
        """,
        # a sigmoid as the target: distillation from a teacher's probabilities
        """
        import torch
        from torch import nn

        criterion = nn.BCEWithLogitsLoss()


        def distill(student, teacher, x):
            return criterion(student(x), torch.sigmoid(teacher(x)).detach())
        """,
        # a sigmoid into the loss that expects probabilities (TNL105's site, not this rule's)
        """
        import torch
        import torch.nn.functional as F


        def loss(z, y):
            return F.binary_cross_entropy(torch.sigmoid(z).clamp(1e-6, 1 - 1e-6), y)
        """,
        # logits recovered from probabilities
        """
        import torch
        import torch.nn.functional as F


        def loss(p, y):
            return F.binary_cross_entropy_with_logits(torch.logit(p, eps=1e-6), y)
        """,
        # a name that is a sigmoid on one branch only
        """
        import torch
        import torch.nn.functional as F


        def loss(z, y, calibrated):
            out = torch.sigmoid(z) if calibrated else z
            return F.binary_cross_entropy_with_logits(out, y)
        """,
        # a model ending in a Linear layer
        """
        import torch
        from torch import nn

        model = nn.Sequential(nn.Linear(128, 64), nn.Sigmoid(), nn.Linear(64, 1))
        criterion = nn.BCEWithLogitsLoss()


        def train(x, y):
            return criterion(model(x).squeeze(1), y)
        """,
        # a tanh scaled into logits, and the sigmoid going to another loss
        """
        import torch
        import torch.nn.functional as F


        def losses(z, y):
            gated = F.binary_cross_entropy_with_logits(5 * torch.tanh(z), y)
            return gated + F.mse_loss(torch.sigmoid(z), y)
        """,
        # a project function named sigmoid that is not one
        """
        import torch
        import torch.nn.functional as F


        def sigmoid(x):
            return x * 2


        def loss(z, y):
            return F.binary_cross_entropy_with_logits(sigmoid(z), y)
        """,
        # the gate's sigmoid multiplies features, the logits go to the loss
        """
        import torch
        from torch import nn


        class Gated(nn.Module):
            def forward(self, h, y):
                gate = torch.sigmoid(self.gate(h))
                logits = self.out(gate * h)
                return nn.functional.binary_cross_entropy_with_logits(logits, y)
        """,
    ]
]

# A model of another module whose forward ends in a sigmoid, trained with a logits loss.
HEADS = """
import torch
from torch import nn


class ProbHead(nn.Module):
    def forward(self, h):
        return torch.sigmoid(self.fc(h))
"""
LOGITS_PROJECTS = [
    harness.Project(
        {
            "pkg/__init__.py": "",
            "pkg/heads.py": HEADS,
            "pkg/train.py": """
                import torch
                import torch.nn.functional as F
                from pkg.heads import ProbHead


                def step(h, y):
                    return F.binary_cross_entropy_with_logits(ProbHead()(h), y)
                """,
        },
        {"pkg/train.py": (8,)},
        message="made by",
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL115", LOGITS_FLAGGED, LOGITS_SILENT, LOGITS_PROJECTS))
def test_sigmoid_into_logits_loss(code, case):
    harness.check(code, case)
