"""TNL103 log-of-softmax by the evidence for its spread: a softmax's probability is exactly 0 only
past a spread of ~104 in float32 (measured: 103.97 for two classes, 93.60 for 32000), which the
logits of a learned map reach and data scores of the batch do not. A softmax of logits (a
submodule's output, a matrix product, a parameter its callers pass such) is reported and the
evidence named; a softmax of data fields (a sentence score, a soft label shipped with the batch)
only in strict mode; a softmax of a value of unknown origin is reported as before."""

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Project, Silent

HEAD = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n\n\n"

_HEAD_MODULE = HEAD + (
    "class TaggerHead(nn.Module):\n"
    "    def __init__(self, dim, num_tags):\n"
    "        super().__init__()\n"
    "        self.proj = nn.Linear(dim, num_tags)\n"
    "\n"
    "    def forward(self, hidden, tags):\n"
    "        logits = self.proj(hidden)\n"
    "        probs = F.softmax(logits, dim=-1)\n"
    "        return F.nll_loss(probs.log().flatten(0, 1), tags.flatten())\n"
)

# rerank-style: a soft target built from per-hypothesis scores read from the batch
_SCORES_FROM_BATCH = HEAD + (
    "class ListwiseCriterion(nn.Module):\n"
    "    def __init__(self, temperature=0.5):\n"
    "        super().__init__()\n"
    "        self.temperature = temperature\n"
    "\n"
    "    def forward(self, model, sample):\n"
    "        scores = model(sample['src_tokens'], sample['hypotheses'])\n"
    "        return self.listwise_kl(scores, sample['metric'][:, 0].view(-1, 8))\n"
    "\n"
    "    def listwise_kl(self, scores, metric):\n"
    "        lo = torch.min(metric, 1, keepdim=True).values\n"
    "        hi = metric.max(1, keepdim=True).values\n"
    "        scaled = (metric - lo) / (hi - lo + torch.finfo(metric.dtype).eps)\n"
    "        q = F.softmax(scaled / self.temperature, dim=-1)\n"
    "        log_p = F.log_softmax(scores, dim=-1)\n"
    "        return (q * (q.log() - log_p)).sum()\n"
)

_SOFT_LABELS = HEAD + (
    "def soft_label_entropy(batch):\n    q = F.softmax(batch['label_scores'] / 2.0, dim=-1)\n    return -(q * q.log()).sum(-1).mean()\n"
)

FLAGGED = [
    # the logits of a linear head: the evidence is named
    Flagged(
        _HEAD_MODULE,
        (14,),
        fixed=_HEAD_MODULE.replace("F.softmax(logits", "F.log_softmax(logits").replace("probs.log()", "probs"),
        message="the output of `self.proj`",
    ),
    # an LM head written as a product with the embedding matrix
    Flagged(
        HEAD + "def lm_loss(hidden, emb, targets):\n    logits = hidden @ emb.weight.t()\n"
        "    p = logits.float().softmax(-1)\n    return F.nll_loss(torch.log(p).view(-1, p.size(-1)), targets.view(-1))\n",
        (9,),
        message="a matrix product",
    ),
    # a softmax of data is reported in strict mode, saying so
    Flagged(
        _SOFT_LABELS,
        (8,),
        fixed=_SOFT_LABELS.replace("(q * q.log())", "(q * F.log_softmax(batch['label_scores'] / 2.0, dim=-1))"),
        strict=True,
        message="strict mode: the softmax's input is data of the batch",
    ),
    Flagged(
        _SCORES_FROM_BATCH,
        (21,),
        fixed=_SCORES_FROM_BATCH.replace("(q.log() - log_p)", "(F.log_softmax(scaled / self.temperature, dim=-1) - log_p)"),
        strict=True,
        message="strict mode",
    ),
    # a value of unknown origin (no caller in the project) is still reported by default
    Flagged(
        HEAD + "def log_probs(logits, T):\n    return torch.log(F.softmax(logits / T, dim=-1))\n",
        (7,),
        fixed=HEAD + "def log_probs(logits, T):\n    return F.log_softmax(logits / T, dim=-1)\n",
    ),
]

SILENT = [
    # data scores of the batch, bounded (a metric normalised to [0, 1]), passed through a method
    Silent(_SCORES_FROM_BATCH),
    # soft labels shipped with the batch
    Silent(_SOFT_LABELS),
]

_HELPER = HEAD + ("def listwise_target_entropy(values, T=1.0):\n    p = F.softmax(values / T, dim=-1)\n    return -(p * p.log()).sum(-1)\n")

PROJECTS = [
    # the helper's callers pass logits of a product: the caller is named
    Project(
        files={
            "pkg/losses.py": _HELPER,
            "pkg/train.py": (
                "from pkg.losses import listwise_target_entropy\n"
                "\n"
                "\n"
                "def step(hidden, item_emb):\n"
                "    scores = hidden @ item_emb.T\n"
                "    entropy = listwise_target_entropy(scores)\n"
                "    return entropy.mean()\n"
            ),
        },
        lines={"pkg/losses.py": (8,)},
        fixed={"pkg/losses.py": _HELPER.replace("-(p * p.log())", "-(p * F.log_softmax(values / T, dim=-1))")},
        message="passed as `values` by the call at pkg/train.py:6",
    ),
    # every caller passes a field of the batch: silent by default
    Project(
        files={
            "pkg/losses.py": _HELPER,
            "pkg/train.py": (
                "from pkg.losses import listwise_target_entropy\n"
                "\n"
                "\n"
                "def step(batch):\n"
                "    entropy = listwise_target_entropy(batch['rewards'], T=0.5)\n"
                "    return entropy.mean()\n"
            ),
        },
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL103", FLAGGED, SILENT, PROJECTS))
def test_log_of_softmax_spread(code, case):
    harness.check(code, case)
