"""Evidence before a report (the default mode): a division or root rule reports only with
evidence that its argument reaches the hazard, a gradient rule only where a gradient can flow, and
no rule on values that are not torch tensors. Each false form here stands next to a true one that
still fires. The cases are written the way training and model code is written.

Every case runs through the shared harness (tests/rules/harness.py) under the rule it is about,
with the whole division and root family enabled together, as a user's run enables it: the rule
reports the hazard with its exact fix (or none) and no other rule of the family reports it too; a
look-alike is silent for all four."""

import functools

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent
from torchnumlint.config import Config
from torchnumlint.rules.registry import registry
from torchnumlint.runner import Options, run

DIVISION = ("TNL201", "TNL202", "TNL204", "TNL206")

flagged = functools.partial(Flagged, together=DIVISION)
silent = functools.partial(Silent, together=DIVISION)


def family_params(cases):
    """pytest parameters for `(rule, case)` pairs: each case under the rule it is about."""
    by_rule = {}
    for rule, case in cases:
        flagged_cases, silent_cases = by_rule.setdefault(rule, ([], []))
        (silent_cases if isinstance(case, Silent) else flagged_cases).append(case)
    return [param for rule, (f, s) in by_rule.items() for param in harness.params(rule, f, s)]


# ---------------------------------------------------------------------------------------------
# 3. It can be zero for real inputs

REACHES_ZERO = [
    # a count of a mask: an all-padding batch selects nothing (a float mask by name can be soft:
    # clamped at eps)
    (
        "TNL201",
        flagged(
            """
     import torch
     def masked_mean(hidden, attention_mask):
         m = attention_mask.unsqueeze(-1).float()
         return (hidden * m).sum(1) / m.sum(1)
     """,
            (5,),
            """
     import torch
     def masked_mean(hidden, attention_mask):
         m = attention_mask.unsqueeze(-1).float()
         return (hidden * m).sum(1) / m.sum(1).clamp_min(1e-12)
     """,
            strict=True,
            message="strict mode",
        ),
    ),
    # ... a padding mask is no evidence (empty only for a sequence with no tokens); a selection is:
    # labels compared with a class, which a batch can lack
    (
        "TNL201",
        flagged(
            """
     import torch
     def class_mean(hidden, labels, c):
         m = (labels == c).unsqueeze(-1).float()
         return (hidden * m).sum(0) / m.sum(0)
     """,
            (5,),
            """
     import torch
     def class_mean(hidden, labels, c):
         m = (labels == c).unsqueeze(-1).float()
         return (hidden * m).sum(0) / m.sum(0).clamp_min(1)
     """,
            safe=True,
            message="`labels == c` (line 4) picks one class, which a batch can lack",
        ),
    ),
    # a comparison's count: clamped at 1, exact, SAFE (an ignore index is padding: strict mode)
    (
        "TNL201",
        flagged(
            """
     import torch
     def token_loss(losses, labels: torch.Tensor):
         return losses.sum() / (labels != -100).sum()
     """,
            (4,),
            """
     import torch
     def token_loss(losses, labels: torch.Tensor):
         return losses.sum() / (labels != -100).sum().clamp_min(1)
     """,
            safe=True,
            strict=True,
        ),
    ),
    # the overlaps of two different sets (anchors against ground truth) can all miss the threshold
    (
        "TNL201",
        flagged(
            """
     import torch
     from torchvision.ops import box_iou
     def matched_loss(losses, anchors, gt_boxes, iou_thres: float):
         matched = box_iou(anchors, gt_boxes).max(1).values > iou_thres
         return (losses * matched).sum() / matched.sum()
     """,
            (6,),
            message="keeps the values past a threshold",
        ),
    ),
    (
        "TNL201",
        flagged(
            """
     import torch
     def confident_loss(losses, scores: torch.Tensor, thr: float):
         return losses.sum() / (scores > thr).sum()
     """,
            (4,),
            """
     import torch
     def confident_loss(losses, scores: torch.Tensor, thr: float):
         return losses.sum() / (scores > thr).sum().clamp_min(1)
     """,
            safe=True,
            message="`scores > thr` (line 4) keeps the values past a threshold",
        ),
    ),
    # standardising data that can be constant (equal rewards in a sparse-reward episode); `adv`
    # is not known to be a tensor: no torch-only fix
    (
        "TNL201",
        flagged(
            """
     import torch
     def normalise_advantages(adv):
         return (adv - adv.mean()) / adv.std()
     """,
            (4,),
            strict=True,
            message="constant data",
        ),
    ),
    # advantages unpacked from a batch of rollouts
    (
        "TNL201",
        flagged(
            """
     import torch
     def training_step(self, batch):
         states, actions, adv = batch
         adv = (adv - adv.mean()) / adv.std()
         return adv
     """,
            (5,),
            strict=True,
        ),
    ),
    # weights given by a caller the project does not show: strict mode only (tests/rules/
    # test_given_weights.py judges them at their callers); of unknown sign: no clamp
    (
        "TNL201",
        flagged(
            """
     import torch
     def weighted_mean(x, weights):
         w_sum = weights.sum(dim=-1, keepdim=True)
         return (weights * x).sum(dim=-1, keepdim=True) / w_sum
     """,
            (5,),
            strict=True,
        ),
    ),
    # a sum of relu outputs
    (
        "TNL201",
        flagged(
            """
     import torch
     import torch.nn.functional as F
     def share(scores):
         pos = F.relu(scores)
         return pos / pos.sum(-1, keepdim=True)
     """,
            (6,),
            """
     import torch
     import torch.nn.functional as F
     def share(scores):
         pos = F.relu(scores)
         return pos / pos.sum(-1, keepdim=True).clamp_min(1e-12)
     """,
        ),
    ),
    # the direction between two points that can coincide
    (
        "TNL202",
        flagged(
            """
     import torch
     def direction(p0, p1):
         d = p1 - p0
         return d / d.norm(dim=-1, keepdim=True)
     """,
            (5,),
            """
     import torch
     def direction(p0, p1):
         d = p1 - p0
         return torch.nn.functional.normalize(d, dim=-1)
     """,
        ),
    ),
    # the rows a module is given: padding rows are all 0
    (
        "TNL202",
        flagged(
            """
     import torch
     class Pool(torch.nn.Module):
         def forward(self, tokens):
             return tokens / tokens.norm(dim=-1, keepdim=True)
     """,
            (5,),
            """
     import torch
     class Pool(torch.nn.Module):
         def forward(self, tokens):
             return torch.nn.functional.normalize(tokens, dim=-1)
     """,
        ),
    ),
    # a layer norm by hand: the root mean square of a centred row is 0 for a constant row
    (
        "TNL201",
        flagged(
            """
     import torch
     class Norm(torch.nn.Module):
         def forward(self, h):
             centred = h - h.mean(-1, keepdim=True)
             return centred / torch.sqrt((centred ** 2).mean(-1, keepdim=True))
     """,
            (6,),
            """
     import torch
     class Norm(torch.nn.Module):
         def forward(self, h):
             centred = h - h.mean(-1, keepdim=True)
             return centred / torch.sqrt((centred ** 2).mean(-1, keepdim=True).clamp_min(1e-12))
     """,
        ),
    ),
    (
        "TNL206",
        flagged(
            """
     import torch
     class Spread(torch.nn.Module):
         def forward(self, h):
             centred = h - h.mean(-1, keepdim=True)
             return torch.sqrt((centred ** 2).mean(-1)).mean()
     """,
            (6,),
            """
     import torch
     class Spread(torch.nn.Module):
         def forward(self, h):
             centred = h - h.mean(-1, keepdim=True)
             return torch.sqrt((centred ** 2).mean(-1).clamp_min(1e-12)).mean()
     """,
        ),
    ),
    # pairwise distances of a batch with itself: 0 on the diagonal, in a training step
    (
        "TNL204",
        flagged(
            """
     import torch
     def distances(emb):
         return torch.sqrt(((emb[:, None] - emb[None]) ** 2).sum(-1))

     def train_step(model, opt, x):
         loss = -distances(model(x)).mean()
         loss.backward()
         opt.step()
     """,
            (4,),
            """
     import torch
     def distances(emb):
         return torch.linalg.vector_norm(emb[:, None] - emb[None], dim=-1)

     def train_step(model, opt, x):
         loss = -distances(model(x)).mean()
         loss.backward()
         opt.step()
     """,
        ),
    ),
    # a variance by hand cancels below 0
    (
        "TNL206",
        flagged(
            """
     import torch
     def layer_std(h):
         mu = h.mean(-1, keepdim=True)
         return torch.sqrt((h * h).mean(-1, keepdim=True) - mu ** 2)
     """,
            (5,),
            """
     import torch
     def layer_std(h):
         mu = h.mean(-1, keepdim=True)
         return torch.sqrt(((h * h).mean(-1, keepdim=True) - mu ** 2).clamp_min(1e-12))
     """,
        ),
    ),
]

# the std of a network's output over large dims (classifier-free guidance rescaling)
GUIDANCE_RESCALE = """
    import torch
    def rescale(cfg, text):
        std_text = text.std(dim=list(range(1, text.ndim)), keepdim=True)
        std_cfg = cfg.std(dim=list(range(1, cfg.ndim)), keepdim=True)
        return cfg * (std_text / std_cfg)
    """

NO_EVIDENCE = [
    ("TNL201", silent(GUIDANCE_RESCALE)),
    # merge-NMS: every kept box overlaps itself with IoU 1 > t, so no row of the weights is empty
    (
        "TNL201",
        silent("""
    import torch
    from torchvision.ops import box_iou, nms
    def merged_boxes(x, iou_thres):
        boxes, scores = x[:, :4], x[:, 4]
        i = nms(boxes, scores, iou_thres)
        iou = box_iou(boxes[i], boxes) > iou_thres
        weights = iou * scores[None]
        return torch.mm(weights, x[:, :4]) / weights.sum(1, keepdim=True)
    """),
    ),
    # standardising freshly sampled latents: never constant
    (
        "TNL201",
        silent("""
    import torch
    def renoise(shape, anchor_std, anchor_mean):
        latents = torch.randn(shape)
        smoothed = torch.nn.functional.avg_pool2d(latents, 3, 1, 1)
        return (smoothed - smoothed.mean()) / smoothed.std() * anchor_std + anchor_mean
    """),
    ),
    # a fixed positive kernel
    (
        "TNL201",
        silent("""
    import torch
    def gaussian(size, sigma):
        x = torch.arange(size) - size // 2
        k = torch.exp(-(x ** 2) / (2 * sigma ** 2))
        return k / k.sum()
    """),
    ),
    # a learned parameter's norm (weight normalisation)
    (
        "TNL202",
        silent("""
    import torch
    class Proto(torch.nn.Module):
        def forward(self, x):
            w = self.weight / self.weight.norm(dim=1, keepdim=True)
            return x @ w.t()
    """),
    ),
    # a network output's norm
    (
        "TNL202",
        silent("""
    import torch
    class Guidance(torch.nn.Module):
        def forward(self, x):
            pred = self.unet(x)
            return pred / torch.norm(pred, dim=-1, keepdim=True)
    """),
    ),
    # a residual's norm: a prediction and a noisy measurement do not coincide
    (
        "TNL204",
        silent("""
    import torch
    class ResidualLoss(torch.nn.Module):
        def forward(self, pred, measured):
            return torch.sqrt(((pred - measured) ** 2).sum())
    """),
    ),
    # the determinant of a 2 x 2 covariance (its callers add eps to the diagonal)
    (
        "TNL206",
        silent("""
    import torch
    class Whiten(torch.nn.Module):
        def forward(self, vrr, vii, vri):
            delta = vrr * vii - vri ** 2
            return delta.sqrt()
    """),
    ),
    # a noise schedule's sigmas: plain state of an object with no parameters, no gradient
    (
        "TNL206",
        silent("""
    import torch
    class Scheduler:
        def step(self, sample, eps):
            sigma = self.sigmas[self.index]
            sigma_hat = sigma * (self.gamma + 1)
            return sample + eps * (sigma_hat ** 2 - sigma ** 2) ** 0.5
    """),
    ),
    # 1 - alpha_bar of a schedule
    (
        "TNL206",
        silent("""
    import torch
    def q_sample(x0, noise, alpha_bar):
        return torch.sqrt(alpha_bar) * x0 + torch.sqrt(1 - alpha_bar) * noise
    """),
    ),
]


@pytest.mark.parametrize("code, case", family_params(REACHES_ZERO + NO_EVIDENCE))
def test_reported_with_evidence_that_it_reaches_zero_and_only_then(code, case):
    harness.check(code, case)


# The same distance in a clustering routine that never trains: no gradient is shown, so the
# NaN-gradient claim is made in strict mode only, and says so.
CLUSTER_SPREAD = """
    import torch
    def spread(points):
        return torch.sqrt(((points[:, None] - points[None]) ** 2).sum(-1)).sum()
    """

STRICT_MODE = [
    # strict mode reports what has no evidence, and says so
    (
        "TNL201",
        flagged(
            GUIDANCE_RESCALE,
            (6,),
            """
    import torch
    def rescale(cfg, text):
        std_text = text.std(dim=list(range(1, text.ndim)), keepdim=True)
        std_cfg = cfg.std(dim=list(range(1, cfg.ndim)), keepdim=True)
        return cfg * (std_text / std_cfg.clamp_min(1e-12))
    """,
            strict=True,
            message="strict mode",
        ),
    ),
    ("TNL204", silent(CLUSTER_SPREAD)),
    (
        "TNL204",
        flagged(
            CLUSTER_SPREAD,
            (4,),
            """
    import torch
    def spread(points):
        return torch.linalg.vector_norm(points[:, None] - points[None], dim=-1).sum()
    """,
            strict=True,
            message="strict mode",
        ),
    ),
]

# `pos[i] - pos[j]` over a graph's edges is 0 only for self-loops, which such code leaves out; the
# pairwise differences of a tensor with itself are 0 on the diagonal. A cosine clamped inside the
# unit interval never makes 1 - cos^2 negative.
LOOK_ALIKE_EVIDENCE = [
    (
        "TNL204",
        silent("""
    import torch
    class Interaction(torch.nn.Module):
        def forward(self, pos, edge_index):
            i, j = edge_index
            return (pos[i] - pos[j]).pow(2).sum(dim=-1).sqrt()
    """),
    ),
    (
        "TNL204",
        flagged(
            """
    import torch
    class Repulsion(torch.nn.Module):
        def forward(self, emb):
            return torch.sqrt(((emb[:, None] - emb[None]) ** 2).sum(-1)).mean()
    """,
            (5,),
            """
    import torch
    class Repulsion(torch.nn.Module):
        def forward(self, emb):
            return torch.linalg.vector_norm(emb[:, None] - emb[None], dim=-1).mean()
    """,
        ),
    ),
    (
        "TNL206",
        silent("""
    import torch
    class AngularMargin(torch.nn.Module):
        def forward(self, cosine):
            cosine = torch.clamp(cosine, -1 + 1e-7, 1 - 1e-7)
            return torch.sqrt(1.0 - torch.pow(cosine, 2))
    """),
    ),
    (
        "TNL206",
        flagged(
            """
    import torch
    class AngularMargin(torch.nn.Module):
        def forward(self, cosine):
            return torch.sqrt(1.0 - torch.pow(cosine, 2))
    """,
            (5,),
            """
    import torch
    class AngularMargin(torch.nn.Module):
        def forward(self, cosine):
            return torch.sqrt((1.0 - torch.pow(cosine, 2)).clamp_min(1e-12))
    """,
        ),
    ),
]


@pytest.mark.parametrize("code, case", family_params(STRICT_MODE + LOOK_ALIKE_EVIDENCE))
def test_strict_mode_and_look_alike_evidence(code, case):
    harness.check(code, case)


# ---------------------------------------------------------------------------------------------
# 1. It is a torch tensor; 7. fixes right for the value

MASK_COUNT = """
    import torch
    def mean_over(values, mask):
        return values.sum() / mask.sum()
    """
ANNOTATED_MASK_COUNT = MASK_COUNT.replace("mask)", "mask: torch.Tensor)")

VALUE_KINDS = [
    # numpy values in a torch file
    (
        "TNL201",
        silent(
            """
    import numpy as np
    import torch
    def stats(values):
        arr = np.asarray(values)
        mask = arr > 0
        return (arr - arr.mean()) / arr.std() + arr.sum() / mask.sum() + np.sqrt(arr.var())
    """,
            strict=True,
        ),
    ),
    # a signed sum gets no clamp: with w of either sign, a clamp would turn -0.5 into 1e-12
    (
        "TNL201",
        flagged(
            """
    import torch
    def weighted(x, weights):
        return (x * weights).sum(-1) / weights.sum(-1)
    """,
            (4,),
            strict=True,
        ),
    ),
    # a count of a mask whose type the code does not show: reported, but `clamp_min` is a tensor
    # method, so no fix
    ("TNL201", flagged(MASK_COUNT, (4,), strict=True)),
    # a mask by name can be soft (a sum of 0.5 must stay 0.5): clamped at eps, UNSAFE
    (
        "TNL201",
        flagged(
            ANNOTATED_MASK_COUNT,
            (4,),
            """
    import torch
    def mean_over(values, mask: torch.Tensor):
        return values.sum() / mask.sum().clamp_min(1e-12)
    """,
            strict=True,
        ),
    ),
    # a comparison's sum is an integer count: clamped at 1, exact, SAFE
    (
        "TNL201",
        flagged(
            ANNOTATED_MASK_COUNT.replace("mask.sum()", "(mask > 0).sum()"),
            (4,),
            """
    import torch
    def mean_over(values, mask: torch.Tensor):
        return values.sum() / (mask > 0).sum().clamp_min(1)
    """,
            safe=True,
            strict=True,
        ),
    ),
]


@pytest.mark.parametrize("code, case", family_params(VALUE_KINDS))
def test_torch_values_only_and_fixes_right_for_the_value(code, case):
    harness.check(code, case)


# ---------------------------------------------------------------------------------------------
# 2. A gradient can flow

NO_GRADIENT = [
    # a Lightning validation step runs under no_grad
    (
        "TNL204",
        silent(
            """
    import torch
    class Model(torch.nn.Module):
        def validation_step(self, batch, idx):
            d = batch[0] - batch[1]
            return torch.sqrt((d ** 2).sum(-1))
    """,
            strict=True,
        ),
    ),
    # a helper reached only from evaluation code
    (
        "TNL204",
        silent(
            """
    import torch
    def distance(a, b):
        return torch.sqrt(((a - b) ** 2).sum(-1))

    @torch.no_grad()
    def evaluate(model, loader):
        return [distance(model(x), y) for x, y in loader]
    """,
            strict=True,
        ),
    ),
    # dataset code
    (
        "TNL204",
        silent(
            """
    import torch
    class Points(torch.utils.data.Dataset):
        def __getitem__(self, i):
            p, q = self.pairs[i]
            return torch.sqrt(((p - q) ** 2).sum(-1))
    """,
            strict=True,
        ),
    ),
    (
        "TNL204",
        silent(
            """
    import torch
    def collate_pairs(batch):
        a = torch.stack([b[0] for b in batch])
        c = torch.stack([b[1] for b in batch])
        return torch.sqrt(((a - c) ** 2).sum(-1))
    """,
            strict=True,
        ),
    ),
    # a pipeline's __call__
    (
        "TNL204",
        silent(
            """
    import torch
    class TextPipeline:
        def __call__(self, a, b):
            return torch.sqrt(((a - b) ** 2).sum(-1))
    """,
            strict=True,
        ),
    ),
    # detached, index-derived values
    (
        "TNL204",
        silent(
            """
    import torch
    def grid_distance(n):
        ys = torch.arange(n)[:, None]
        xs = torch.arange(n)[None, :]
        return torch.sqrt(((ys - xs) ** 2).sum(-1))
    """,
            strict=True,
        ),
    ),
    (
        "TNL204",
        silent(
            """
    import torch
    class Patches(torch.nn.Module):
        def forward(self, mask, center):
            rows, cols = torch.where(mask > 0)
            points = torch.stack([rows, cols], -1)
            return torch.sqrt(((points[:, None] - points[None]) ** 2).sum(-1))
    """,
            strict=True,
        ),
    ),
    (
        "TNL206",
        silent(
            """
    import torch
    def rmse_metric(pred, target):
        return torch.sqrt(((pred.detach() - target) ** 2).mean()).item()
    """,
            strict=True,
        ),
    ),
    # a method helper called only from evaluation
    (
        "TNL204",
        silent(
            """
    import torch
    class Retrieval(torch.nn.Module):
        def _distances(self, e):
            return torch.sqrt(((e[:, None] - e[None]) ** 2).sum(-1))

        @torch.no_grad()
        def evaluate(self, e):
            return self._distances(e)
    """,
            strict=True,
        ),
    ),
]

GRADIENT = [
    # the same helper with a training caller
    (
        "TNL204",
        flagged(
            """
    import torch
    def distances(e):
        return torch.sqrt(((e[:, None] - e[None]) ** 2).sum(-1))

    @torch.no_grad()
    def evaluate(model, loader):
        return [distances(model(x)) for x, _ in loader]

    def train_step(model, x):
        distances(model(x)).mean().backward()
    """,
            (4,),
            """
    import torch
    def distances(e):
        return torch.linalg.vector_norm(e[:, None] - e[None], dim=-1)

    @torch.no_grad()
    def evaluate(model, loader):
        return [distances(model(x)) for x, _ in loader]

    def train_step(model, x):
        distances(model(x)).mean().backward()
    """,
        ),
    ),
    # a helper of a script run at module level
    (
        "TNL204",
        flagged(
            """
    import torch
    def distances(e):
        return torch.sqrt(((e[:, None] - e[None]) ** 2).sum(-1))

    def train(model, x):
        distances(model(x)).mean().backward()

    if __name__ == "__main__":
        train(None, None)
    """,
            (4,),
            """
    import torch
    def distances(e):
        return torch.linalg.vector_norm(e[:, None] - e[None], dim=-1)

    def train(model, x):
        distances(model(x)).mean().backward()

    if __name__ == "__main__":
        train(None, None)
    """,
        ),
    ),
]


@pytest.mark.parametrize("code, case", family_params(NO_GRADIENT + GRADIENT))
def test_a_gradient_claim_needs_a_gradient(code, case):
    harness.check(code, case)


# ---------------------------------------------------------------------------------------------
# No finding of any default-on rule in a file that does not import torch


def test_no_finding_in_a_tree_of_files_that_never_import_torch(tmp_path):
    """Every rule's own bad examples, with torch's imports turned into numpy's: the same text
    shapes, no torch code, so nothing is reported."""
    rules = [rule for rule in registry().values() if rule.default]
    count = 0
    for rule in rules:
        for i, example in enumerate(rule.examples):
            text = "\n".join(
                "import numpy as np" if line.lstrip().startswith(("import torch", "from torch")) else line
                for line in example.bad.splitlines()
            )
            folder = tmp_path / rule.code.lower()
            folder.mkdir(exist_ok=True)
            (folder / f"example_{i}.py").write_text(text + "\n")
            count += 1
    result = run([str(tmp_path)], Config(root=tmp_path), rules, Options())
    assert result.files == count and not result.errors
    assert result.findings == []


# ---------------------------------------------------------------------------------------------
# Regressions found in review

DROPOUT_SCALE = """
    import torch
    def dropout_scale(x, keep_prob: torch.Tensor, invalid_pos: torch.Tensor):
        return x / keep_prob.sum(dim=-1) + x / invalid_pos.sum(dim=-1)
    """

REGRESSIONS = [
    # a bytes annotation is no crash
    ("TNL201", flagged("import torch\ndef f(x: b'Tensor'):\n    return x / x.sum()\n", (3,), strict=True)),
    # forward evidence is a module's forward, not any function so named
    (
        "TNL202",
        silent("""
    import torch
    class Builder:
        def build(self):
            def forward(x):
                return x / x.norm(dim=1, keepdim=True)
            return forward
    """),
    ),
    (
        "TNL202",
        flagged(
            """
    import torch
    class Head(torch.nn.Module):
        def forward(self, x):
            return x / x.norm(dim=1, keepdim=True)
    """,
            (5,),
            """
    import torch
    class Head(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.normalize(x, dim=1)
    """,
        ),
    ),
    # mask words are whole words (`keep_prob`, `invalid_pos` are none), a compound mask word counts
    ("TNL201", silent(DROPOUT_SCALE)),
    (
        "TNL201",
        flagged(
            DROPOUT_SCALE.replace("invalid_pos", "matched_mask"),
            (4,),
            """
    import torch
    def dropout_scale(x, keep_prob: torch.Tensor, matched_mask: torch.Tensor):
        return x / keep_prob.sum(dim=-1) + x / matched_mask.sum(dim=-1).clamp_min(1e-12)
    """,
        ),
    ),
    (
        "TNL201",
        flagged(
            DROPOUT_SCALE.replace("invalid_pos", "fg_masks"),
            (4,),
            """
    import torch
    def dropout_scale(x, keep_prob: torch.Tensor, fg_masks: torch.Tensor):
        return x / keep_prob.sum(dim=-1) + x / fg_masks.sum(dim=-1).clamp_min(1e-12)
    """,
        ),
    ),
    # a mask that SELECTS rows keeps them whole: here it drops the self-loops, whose vectors are
    # the zero ones, so it is the guard (pytorch_geometric's edge directions)
    (
        "TNL201",
        silent("""
    import torch
    class EdgeDirections(torch.nn.Module):
        def forward(self, pos, edge_index):
            vec = pos[edge_index[0]] - pos[edge_index[1]]
            keep = edge_index[0] != edge_index[1]
            vec[keep] = vec[keep] / torch.norm(vec[keep], dim=1).unsqueeze(1)
            return vec
    """),
    ),
    # a mask that ZEROES rows makes them all-zero: reported (by TNL202, whose site it is)
    (
        "TNL202",
        flagged(
            """
    import torch
    class MaskedDirections(torch.nn.Module):
        def forward(self, feats, mask):
            kept = feats * mask[..., None]
            return kept / torch.linalg.vector_norm(kept, dim=-1, keepdim=True)
    """,
            (6,),
            """
    import torch
    class MaskedDirections(torch.nn.Module):
        def forward(self, feats, mask):
            kept = feats * mask[..., None]
            return torch.nn.functional.normalize(kept, dim=-1)
    """,
            strict=True,
        ),
    ),
    # ... and by default where the mask is a selection that can zero every row it touches
    (
        "TNL202",
        flagged(
            """
    import torch
    class VisibleDirections(torch.nn.Module):
        def forward(self, feats, visible_mask):
            kept = feats * visible_mask[..., None]
            return kept / torch.linalg.vector_norm(kept, dim=-1, keepdim=True)
    """,
            (6,),
            """
    import torch
    class VisibleDirections(torch.nn.Module):
        def forward(self, feats, visible_mask):
            kept = feats * visible_mask[..., None]
            return torch.nn.functional.normalize(kept, dim=-1)
    """,
            message="when a mask zeroes a whole row: `visible_mask` selects by its name",
        ),
    ),
]


@pytest.mark.parametrize("code, case", family_params(REGRESSIONS))
def test_regressions_found_in_review(code, case):
    harness.check(code, case)


def test_a_long_chain_of_rebindings_is_answered_once_per_node(monkeypatch):
    """`h = h * h + h * h` sixty times: each node's kind is worked out once (it was 1.7 million
    times, 9 s, before answers were kept)."""
    from torchnumlint.rules import evidence

    calls = []
    real = evidence._value_kind
    monkeypatch.setattr(evidence, "_value_kind", lambda *args: calls.append(1) or real(*args))
    code = "import torch\ndef f(w, h):\n" + "    h = h * h + h * h\n" * 60 + "    return w / h.sum()\n"
    harness.findings("TNL201", code, strict=True, together=DIVISION)
    assert 0 < len(calls) < 2000


# ---------------------------------------------------------------------------------------------
# Names bound more than once: every binding that may reach the use. A guard on one way leaves the
# other's zero, reported with that way's evidence and no fix (a clamp would rewrite every way)

REBINDINGS = [
    # a straight-line rebinding is followed
    (
        "TNL201",
        flagged(
            """
    import torch
    import torch.nn.functional as F
    def share(x, w):
        w = F.relu(w)
        return (x * w).sum(-1) / w.sum(-1)
    """,
            (6,),
            """
    import torch
    import torch.nn.functional as F
    def share(x, w):
        w = F.relu(w)
        return (x * w).sum(-1) / w.sum(-1).clamp_min(1e-12)
    """,
        ),
    ),
    # a rebinding in a branch: `w` is `w.abs()` (all 0 for a zero row) or `w.abs() + 1` (guarded)
    (
        "TNL201",
        flagged(
            """
    import torch
    def share(x, w, flag):
        w = w.abs()
        if flag:
            w = w + 1
        return x / w.sum()
    """,
            (7,),
            message="absolute values are 0, as `w` is assigned on line 4",
        ),
    ),
    # in a loop, a binding of the same iteration is followed; where one of the last iteration
    # also reaches, the first iteration's relu outputs can all be 0
    (
        "TNL201",
        flagged(
            """
    import torch
    def accumulate(x, ws):
        for w in ws:
            t = torch.relu(w)
            t = t.sum()
            x = x / t
        return x
    """,
            (7,),
            """
    import torch
    def accumulate(x, ws):
        for w in ws:
            t = torch.relu(w)
            t = t.sum()
            x = x / t.clamp_min(1e-12)
        return x
    """,
        ),
    ),
    (
        "TNL201",
        flagged(
            """
    import torch
    def accumulate(x, ws):
        t = torch.relu(ws[0])
        for w in ws:
            x = x / t.sum()
            t = w.exp()
        return x
    """,
            (6,),
            message="relu outputs are 0, as `t` is assigned on line 4",
        ),
    ),
    (
        "TNL201",
        silent("""
    import torch
    def accumulate(x, ws):
        t = torch.exp(ws[0])
        for w in ws:
            x = x / t.sum()
            t = w.exp()
        return x
    """),
    ),
]


@pytest.mark.parametrize("code, case", family_params(REBINDINGS))
def test_names_bound_more_than_once(code, case):
    harness.check(code, case)


# ---------------------------------------------------------------------------------------------
# What is not a guard: selecting or overwriting the result keeps the forward finite, not the
# gradient (measured: the gradient of torch.where(d > 0, x / d, 0) is NaN where d == 0); the
# claim left is the gradient's, made where the code shows one (here the module's own layer;
# tests/rules/test_edge_tests.py: parameters and their callers)

SELECTED_AWAY = """
    import torch
    class MaskedMean(torch.nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.proj = torch.nn.Linear(dim, dim)

        def forward(self, h, mask):
            n = mask.sum(-1, keepdim=True)
            return torch.where(n > 0, (self.proj(h) * mask).sum(-1, keepdim=True) / n, 0.0)
    """
OVERWRITTEN = """
    import torch
    class MaskedMean(torch.nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.proj = torch.nn.Linear(dim, dim)

        def forward(self, h, mask):
            n = mask.sum(-1, keepdim=True)
            out = (self.proj(h) * mask).sum(-1, keepdim=True) / n
            out[n == 0] = 0
            return out
    """

NOT_GUARDS = [
    # a division selected away by where is still a finding where a gradient flows: the message
    # says why, and no clamp is written inside the where
    ("TNL201", flagged(SELECTED_AWAY, (10,), message="gradient")),
    ("TNL201", silent(SELECTED_AWAY.replace("def forward(self, h, mask):", "@torch.no_grad()\n        def forward(self, h, mask):"))),
    # overwriting the result afterwards is no guard; testing the count first is
    (
        "TNL201",
        flagged(
            OVERWRITTEN,
            (10,),
            """
    import torch
    class MaskedMean(torch.nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.proj = torch.nn.Linear(dim, dim)

        def forward(self, h, mask):
            n = mask.sum(-1, keepdim=True)
            out = (self.proj(h) * mask).sum(-1, keepdim=True) / n.clamp_min(1e-12)
            out[n == 0] = 0
            return out
    """,
        ),
    ),
    (
        "TNL201",
        silent(
            OVERWRITTEN.replace(
                "            out = (self.proj(h)",
                "            if (n == 0).any():\n                return h.new_zeros(n.shape)\n            out = (self.proj(h)",
            )
        ),
    ),
]


@pytest.mark.parametrize("code, case", family_params(NOT_GUARDS))
def test_selecting_or_overwriting_the_result_is_no_guard(code, case):
    harness.check(code, case)


# Crashes and broken fixes found on real code: a function comparing a shape with `()` that holds
# a root candidate (LibCST refuses a bare empty tuple), and `m.softmax(x)` of a module, whose
# `log_softmax` may not exist (Tensor.softmax takes a dim, not a tensor).
MODULE_SOFTMAX = """\
    import torch
    import torch.nn.functional as F

    def step(rnn, x, y):
        return F.nll_loss(torch.log(rnn.softmax(x)), y) + F.cross_entropy(rnn.decoder.softmax(x), y)
    """
CRASHES = [
    (
        "TNL206",
        silent("""
    import torch
    def rmse(pred, target):
        loss = torch.sqrt(((pred - target) ** 2).mean())
        assert loss.shape == ()
        return loss
    """),
    ),
    ("TNL103", silent(MODULE_SOFTMAX)),
    ("TNL113", silent(MODULE_SOFTMAX)),
    # ... while a tensor's softmax over a named dim is still the method form
    (
        "TNL103",
        flagged(
            """
    import torch
    def nll(logits, y, dim):
        return -torch.log(logits.softmax(dim)).gather(dim, y).mean()
    """,
            (4,),
            """
    import torch
    def nll(logits, y, dim):
        return -logits.log_softmax(dim).gather(dim, y).mean()
    """,
        ),
    ),
]


@pytest.mark.parametrize("code, case", family_params(CRASHES))
def test_crashes_and_module_softmaxes(code, case):
    harness.check(code, case)


# Evidence from callers: a helper's mask parameter is what the calls in its file pass. One caller's
# selection makes the finding, named with its line; callers that pass padding masks make none.
HELPER = """
    import torch
    def masked_mean(x, mask):
        return (x * mask).sum(0) / mask.sum(0)
    """
CALLERS = [
    (
        "TNL201",
        flagged(
            HELPER
            + """
    def per_class(feats, labels, num_classes):
        return [masked_mean(feats, (labels == c).float()[:, None]) for c in range(num_classes)]
    def pooled(h, attention_mask):
        return masked_mean(h, attention_mask[..., None])
    """,
            (4,),
            message="passed to `masked_mean` by the call (line 7)",
        ),
    ),
    (
        "TNL201",
        silent(
            HELPER
            + """
    def pooled(h, attention_mask):
        return masked_mean(h, attention_mask[..., None])
    def tokens(h, ids, pad_id):
        return masked_mean(h, (ids != pad_id).float())
    """
        ),
    ),
    # a method's callers through `self.`
    (
        "TNL401",
        flagged(
            """
    import torch
    class Matcher(torch.nn.Module):
        def attend(self, scores, keep):
            return scores.masked_fill(~keep, float("-inf")).softmax(-1)
        def forward(self, scores, iou, thr):
            return self.attend(scores, iou > thr)
    """,
            (5,),
            """
    import torch
    class Matcher(torch.nn.Module):
        def attend(self, scores, keep):
            return scores.masked_fill(~keep, torch.finfo(scores.dtype).min).softmax(-1)
        def forward(self, scores, iou, thr):
            return self.attend(scores, iou > thr)
    """,
            message="passed to `attend` by the call (line 7)",
        ),
    ),
]


@pytest.mark.parametrize("code, case", family_params(CALLERS))
def test_a_parameter_is_what_its_callers_pass(code, case):
    harness.check(code, case)


# A sum of counts or sums (a Dice or IoU denominator) is 0 when every part is: reported with
# evidence for each part (a class absent from both the prediction and the labels), strict otherwise.
DICE = """
    import torch
    def class_dice(pred_labels, labels, c):
        p = pred_labels == c
        t = labels == c
        return 2 * (p & t).sum() / (p.sum() + t.sum())
    """
TOTALS = [
    (
        "TNL201",
        flagged(
            DICE,
            (6,),
            message="`pred_labels == c` (line 4) picks one class, which a batch can lack, and `labels == c` (line 5) picks one class",
        ),
    ),
    (
        "TNL201",
        silent("""
    import torch
    def dice(probs, target, eps=1.0):
        return 2 * (probs * target).sum() / (probs.sum() + target.sum() + eps)
    def token_share(a_mask, b_mask):
        return a_mask.sum() / (a_mask.sum() + b_mask.sum())
    """),
    ),
]


@pytest.mark.parametrize("code, case", family_params(TOTALS))
def test_a_sum_of_counts_is_zero_when_every_part_is(code, case):
    harness.check(code, case)


# A range (max - min) is 0 for constant data: min-max scaling of an input (a blank image) names
# that reason, of a model's output none; both in strict mode only (an exactly constant input was
# read as implausible in real use); a guarded range is silent.
RANGES = [
    (
        "TNL201",
        flagged(
            """
    import torch
    def normalize_image(img: torch.Tensor):
        return (img - img.min()) / (img.max() - img.min())
    """,
            (4,),
            """
    import torch
    def normalize_image(img: torch.Tensor):
        return (img - img.min()) / (img.max() - img.min()).clamp_min(1e-12)
    """,
            strict=True,
            message="a range (max - min), which is 0 for constant data",
        ),
    ),
    (
        "TNL201",
        flagged(
            """
    import torch
    def scale_scores(model, x):
        s = model(x)
        lo = s.amin(-1, keepdim=True)
        return (s - lo) / (s.amax(-1, keepdim=True) - lo)
    """,
            (6,),
            """
    import torch
    def scale_scores(model, x):
        s = model(x)
        lo = s.amin(-1, keepdim=True)
        return (s - lo) / (s.amax(-1, keepdim=True) - lo).clamp_min(1e-12)
    """,
            strict=True,
        ),
    ),
    (
        "TNL201",
        silent("""
    import torch
    def normalize_image(img, eps=1e-6):
        return (img - img.min()) / (img.max() - img.min() + eps)
    def spread(x, y):
        return x / (x.max() - y.min())
    """),
    ),
]


@pytest.mark.parametrize("code, case", family_params(RANGES))
def test_a_range_is_zero_for_constant_data(code, case):
    harness.check(code, case)


# Gradient flow, not names: a function that takes a gradient with torch.autograd.grad (keywords or
# not) differentiates what it computes, like one that calls .backward(); a count-like word in a
# name that is a log or a prediction (`log_dur_pred`) makes no count.
PENALTY = """
    import torch
    def penalty(critic, x):
        h = torch.relu(critic(x))
        n = torch.sqrt((h ** 2).sum(-1))
        g, = torch.autograd.grad(outputs=n.sum(), inputs=x, create_graph=True)
        return g
    """
PENALTY_FIXED = PENALTY.replace("torch.sqrt((h ** 2).sum(-1))", "torch.linalg.vector_norm(h, dim=-1)")
GRADIENT_FLOW = [
    ("TNL204", flagged(PENALTY, (5,), PENALTY_FIXED)),
    (
        "TNL204",
        flagged(
            PENALTY.replace("outputs=n.sum(), inputs=x", "n.sum(), x"),
            (5,),
            PENALTY_FIXED.replace("outputs=n.sum(), inputs=x", "n.sum(), x"),
        ),
    ),
    ("TNL204", silent(PENALTY.replace("        g, = torch.autograd.grad(outputs=n.sum(), inputs=x, create_graph=True)\n", ""))),
]


@pytest.mark.parametrize("code, case", family_params(GRADIENT_FLOW))
def test_autograd_grad_differentiates(code, case):
    harness.check(code, case)


def test_a_log_of_a_predicted_duration_is_no_count():
    from torchnumlint.rules.elementary import says_count

    assert says_count("num_tokens") and says_count("dur") and says_count("node_deg")
    assert not says_count("log_dur_pred") and not says_count("dur_pred") and not says_count("log_counts")


# Labels compared with every class at once (`labels[:, None] == torch.arange(C)`, a one-hot) give
# per-class counts; the column of a class the batch lacks is empty. Positions compared with a
# range (a window, a length) stay no evidence.
ONE_HOT_COUNTS = [
    (
        "TNL201",
        flagged(
            """
    import torch
    def class_means(feats, labels, num_classes: int):
        onehot = (labels[:, None] == torch.arange(num_classes)).float()
        return (onehot.T @ feats) / onehot.sum(0)[:, None]
    """,
            (5,),
            message="compares labels with every class",
            safe=True,
            fixed="""
    import torch
    def class_means(feats, labels, num_classes: int):
        onehot = (labels[:, None] == torch.arange(num_classes)).float()
        return (onehot.T @ feats) / onehot.sum(0)[:, None].clamp_min(1)
    """,
        ),
    ),
    (
        "TNL201",
        silent("""
    import torch
    def window_means(feats, centre, width: int):
        near = (torch.arange(feats.size(0))[:, None] - centre).abs() <= width
        near = near | (torch.arange(feats.size(0))[:, None] == centre)
        return (near.float().T @ feats) / near.sum(0)[:, None]
    """),
    ),
]


@pytest.mark.parametrize("code, case", family_params(ONE_HOT_COUNTS))
def test_labels_against_every_class_count_per_class(code, case):
    harness.check(code, case)
