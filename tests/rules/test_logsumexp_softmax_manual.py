"""TNL109 logsumexp-manual and TNL110 softmax-manual: exps summed or normalised without the max
subtracted, in the forms training code writes them, and the stable look-alikes."""

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent

H = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"

SOFTMAX_FLAGGED = [
    # attention in a forward, through names: the exp and sum lines go
    Flagged(
        H + "class Attn(nn.Module):\n"
        "    def forward(self, q, k):\n"
        "        scores = q @ k.transpose(-2, -1)\n"
        "        e = torch.exp(scores)\n"
        "        s = e.sum(dim=-1, keepdim=True)\n"
        "        return e / s\n",
        (11,),
        H + "class Attn(nn.Module):\n"
        "    def forward(self, q, k):\n"
        "        scores = q @ k.transpose(-2, -1)\n"
        "        return torch.softmax(scores, dim=-1)\n",
    ),
    # a contrastive loss in a training step, inline with a temperature
    Flagged(
        H + "def training_step(model, x, t=0.07):\n"
        "    sim = model(x)\n"
        "    p = torch.exp(sim / t) / torch.exp(sim / t).sum(1, keepdim=True)\n"
        "    return -torch.diagonal(p).mean()\n",
        (8,),
        H + "def training_step(model, x, t=0.07):\n"
        "    sim = model(x)\n"
        "    p = torch.softmax(sim / t, 1)\n"
        "    return -torch.diagonal(p).mean()\n",
    ),
    # method form on an attribute's output
    Flagged(
        H + "class Head(nn.Module):\n"
        "    def forward(self, x):\n"
        "        logits = self.proj(x)\n"
        "        return logits.exp() / logits.exp().sum(-1, keepdim=True)\n",
        (9,),
        H + "class Head(nn.Module):\n    def forward(self, x):\n        logits = self.proj(x)\n        return torch.softmax(logits, -1)\n",
    ),
    # in place: div_ and /= (no rewrite)
    Flagged(
        H + "def weights(scores):\n    w = scores.exp()\n    w.div_(w.sum(dim=1, keepdim=True))\n    return w\n",
        (8,),
    ),
    Flagged(
        H + "def weights(scores):\n    w = torch.exp(scores)\n    w /= w.sum(-1, keepdim=True)\n    return w\n",
        (8,),
    ),
    # a sum over everything, and a reshaped sum: reported, no exact softmax
    Flagged(
        H + "def pool(h, v):\n    a = torch.exp(h @ v)\n    a = a / a.sum()\n    return (a[:, None] * h).sum(0)\n",
        (8,),
    ),
    Flagged(
        H + "def probs(x):\n    e = torch.exp(x)\n    return e / e.sum(1)[:, None]\n",
        (8,),
    ),
    # torch.div, with the aliases of F
    Flagged(
        H + "def helper(logits):\n    return torch.div(torch.exp(logits), torch.exp(logits).sum(dim=-1, keepdim=True))\n",
        (7,),
    ),
    # Sinkhorn (SwAV): the first normalisation of the exp, through a transpose
    Flagged(
        H + "@torch.no_grad()\n"
        "def distributed_sinkhorn(out, epsilon=0.05):\n"
        "    Q = torch.exp(out / epsilon).t()\n"
        "    sum_Q = torch.sum(Q)\n"
        "    Q /= sum_Q\n"
        "    for it in range(3):\n"
        "        Q /= torch.sum(Q, dim=1, keepdim=True)\n"
        "    return Q.t()\n",
        (10,),
    ),
    # an exp of a negated score over a temperature is no Gaussian: reported
    Flagged(H + "def soft_assign(d, t):\n    w = torch.exp(-d / t)\n    return w / w.sum(1)[:, None]\n", (8,)),
    # a log of it, with TNL103 off: still reported here
    Flagged(
        H + "def lp(x):\n    return torch.log(torch.exp(x) / torch.exp(x).sum(-1, keepdim=True))\n",
        (7,),
        H + "def lp(x):\n    return torch.log(torch.softmax(x, -1))\n",
    ),
    # look-alikes of the stable forms below that are not stable: a helper that returns a max on
    # one path only, a max on one branch only, a max filled where a mask says (not where it is
    # infinite), a quotient under a test of another tensor's emptiness or of non-emptiness
    Flagged(
        H + "def _row_shift(x, dim):\n"
        "    if x.dim() == 0:\n"
        "        return x.amax(dim, keepdim=True)\n"
        "    return x.mean(dim, keepdim=True)\n"
        "\n"
        "\n"
        "class Attn(nn.Module):\n"
        "    def forward(self, scores):\n"
        "        e = torch.exp(scores - _row_shift(scores, -1))\n"
        "        return e / e.sum(-1, keepdim=True)\n",
        (15,),
    ),
    Flagged(
        H + "def probs(x, stable):\n"
        "    if stable:\n"
        "        m = x.amax(-1, keepdim=True)\n"
        "    else:\n"
        "        m = x.mean(-1, keepdim=True)\n"
        "    e = torch.exp(x - m)\n"
        "    return e / e.sum(-1, keepdim=True)\n",
        (12,),
        H + "def probs(x, stable):\n"
        "    if stable:\n"
        "        m = x.amax(-1, keepdim=True)\n"
        "    else:\n"
        "        m = x.mean(-1, keepdim=True)\n"
        "    return torch.softmax(x - m, -1)\n",
    ),
    Flagged(
        H + "def probs(x, pad):\n"
        "    m = x.amax(-1, keepdim=True)\n"
        "    m = m.masked_fill(pad, 0.0)\n"
        "    e = torch.exp(x - m)\n"
        "    return e / e.sum(-1, keepdim=True)\n",
        (10,),
        H + "def probs(x, pad):\n    m = x.amax(-1, keepdim=True)\n    m = m.masked_fill(pad, 0.0)\n    return torch.softmax(x - m, -1)\n",
    ),
    Flagged(
        H + "def probs(x, y):\n"
        "    if y.numel() == 0:\n"
        "        e = torch.exp(x)\n"
        "        return e / e.sum(-1, keepdim=True)\n"
        "    return y\n",
        (9,),
        H + "def probs(x, y):\n    if y.numel() == 0:\n        return torch.softmax(x, -1)\n    return y\n",
    ),
    Flagged(
        H + "def probs(x):\n    if x.numel() > 0:\n        return torch.exp(x) / torch.exp(x).sum(-1, keepdim=True)\n    return x\n",
        (8,),
        H + "def probs(x):\n    if x.numel() > 0:\n        return torch.softmax(x, -1)\n    return x\n",
    ),
]

SOFTMAX_SILENT = [
    # max-subtracted: inline, through a name, through a tuple unpack and detach (SupCon)
    Silent(H + "def f(x):\n    e = torch.exp(x - x.max(dim=-1, keepdim=True).values)\n    return e / e.sum(-1, keepdim=True)\n"),
    Silent(H + "def f(x):\n    x = x - x.amax(1, keepdim=True)\n    return x.exp() / x.exp().sum(1, keepdim=True)\n"),
    Silent(
        H + "def supcon(a, b, t):\n"
        "    logits = torch.matmul(a, b.T) / t\n"
        "    logits_max, _ = torch.max(logits, dim=1, keepdim=True)\n"
        "    z = logits - logits_max.detach()\n"
        "    return torch.exp(z) / torch.exp(z).sum(1, keepdim=True)\n"
    ),
    Silent(
        H + "def f(x, t):\n    m = x.max(-1, keepdim=True)[0]\n    e = torch.exp((x - m) / t)\n    return e / e.sum(-1, keepdim=True)\n"
    ),
    # exp of log-probabilities (bounded by 1), renormalised after filtering
    Silent(H + "def f(logits):\n    lprobs = F.log_softmax(logits, -1)\n    p = lprobs.exp()\n    return p / p.sum(-1, keepdim=True)\n"),
    Silent(H + "def f(x):\n    p = torch.exp(x - torch.logsumexp(x, -1, keepdim=True))\n    return p / p.sum(-1, keepdim=True)\n"),
    # the built-ins, a masked exp, a different tensor's sum, a sum of something else
    Silent(H + "def f(x):\n    return torch.softmax(x, -1) + F.softmax(x, dim=1)\n"),
    Silent(H + "def f(x, mask):\n    e = torch.exp(x) * mask\n    return e / e.sum(-1, keepdim=True)\n"),
    Silent(H + "def f(x, y):\n    return torch.exp(x) / torch.exp(y).sum(-1, keepdim=True)\n"),
    Silent(H + "def f(x):\n    return torch.exp(x) / x.sum(-1, keepdim=True)\n"),
    # Gaussian kernels normalised over their own grid: the exponent is at most 0, and 0 at the
    # centre (kornia's filters and pyramid, speechbrain's FastSpeech2 on the corpus)
    Silent(
        H + "def gaussian(window_size, sigma, mean):\n"
        "    x = torch.arange(window_size, dtype=sigma.dtype) - mean\n"
        "    gauss = torch.exp(-x.pow(2.0) / (2 * sigma.pow(2.0)))\n"
        "    return gauss / gauss.sum(-1, keepdim=True)\n"
    ),
    Silent(
        H + "def kernel(sigma: float, ksize: int):\n"
        "    x = torch.arange(ksize, dtype=torch.float64) - ksize // 2\n"
        "    kernel = torch.exp(-0.5 * x**2 / sigma**2)\n"
        "    return (kernel / kernel.sum()).float()\n"
    ),
    Silent(
        H + "def kernel2d(size, sigma):\n"
        "    coords = torch.arange(size, dtype=torch.float32)\n"
        "    g = coords**2\n"
        "    g = (-(g.unsqueeze(0) + g.unsqueeze(1)) / (2 * sigma**2)).exp()\n"
        "    g /= g.sum()\n"
        "    return g\n"
    ),
    # numpy and math are not torch
    Silent(
        "import numpy as np\nimport math\nimport torch\ndef f(x, v):\n    return np.exp(x) / np.exp(x).sum(1, keepdims=True), math.exp(v) / sum([math.exp(v)])\n"
    ),
    # the max subtracted through a helper of the file whose every return is one (torch's
    # `_softmax` decomposition and its `_softmax_unbacked_safe_amax`), through every branch that
    # assigns it, and with its infinite entries filled (exact: such rows are inf or 0 anyway)
    Silent(
        H + "def _safe_amax(x, dim):\n"
        "    if x.ndim == 0:\n"
        "        return torch.amax(x, dim, keepdim=True)\n"
        "    pad = x.new_full((*x.shape[:-1], 1), float('-inf'))\n"
        "    x = torch.cat((x, pad), dim=dim)\n"
        "    return torch.amax(x, dim, keepdim=True)\n"
        "\n"
        "\n"
        "def _softmax(x, dim):\n"
        "    x_max = _safe_amax(x, dim)\n"
        "    unnormalized = torch.exp(x - x_max)\n"
        "    return unnormalized / torch.sum(unnormalized, dim, keepdim=True)\n"
    ),
    Silent(
        H + "def row_max(x):\n"
        "    return x.detach().max(dim=-1, keepdim=True).values\n"
        "\n"
        "\n"
        "class Attn(nn.Module):\n"
        "    def forward(self, q, k):\n"
        "        scores = q @ k.transpose(-2, -1)\n"
        "        w = (scores - row_max(scores)).exp()\n"
        "        return w / w.sum(-1, keepdim=True)\n"
    ),
    Silent(
        H + "def probs(x, fast):\n"
        "    if fast:\n"
        "        m = x.amax(-1, keepdim=True)\n"
        "    else:\n"
        "        m, _ = x.max(-1, keepdim=True)\n"
        "    e = torch.exp(x - m)\n"
        "    return e / e.sum(-1, keepdim=True)\n"
    ),
    Silent(
        H + "def probs(x):\n"
        "    m = torch.amax(x, -1, keepdim=True)\n"
        "    m = torch.where(torch.isinf(m), 0.0, m)\n"
        "    e = torch.exp(x - m)\n"
        "    return e / e.sum(-1, keepdim=True)\n"
    ),
    # only an empty input reaches it: nothing to overflow
    Silent(
        H + "def probs(x, dim):\n"
        "    if x.numel() == 0:\n"
        "        return torch.exp(x) / torch.exp(x).sum(dim, keepdim=True)\n"
        "    return torch.softmax(x, dim)\n"
    ),
    Silent(
        H + "def probs(x, dim):\n"
        "    if x.numel() > 0:\n"
        "        return torch.softmax(x, dim)\n"
        "    else:\n"
        "        e = x.exp()\n"
        "        return e / e.sum(dim, keepdim=True)\n"
    ),
]

LSE_FLAGGED = [
    Flagged(
        H + "class EBM(nn.Module):\n"
        "    def forward(self, x):\n"
        "        energies = self.net(x)\n"
        "        return -torch.log(torch.exp(-energies).sum(dim=1))\n",
        (9,),
        H + "class EBM(nn.Module):\n"
        "    def forward(self, x):\n"
        "        energies = self.net(x)\n"
        "        return -torch.logsumexp(-energies, dim=1)\n",
    ),
    # method form, keepdim kept, a log_softmax written out
    Flagged(
        H + "def log_probs(logits):\n    return logits - logits.exp().sum(-1, keepdim=True).log()\n",
        (7,),
        H + "def log_probs(logits):\n    return logits - torch.logsumexp(logits, -1, keepdim=True)\n",
    ),
    # through a name read only by the log: the exp line goes
    Flagged(
        H + "def training_step(model, x):\n"
        "    scores = model(x)\n"
        "    e = scores.exp()\n"
        "    loss = torch.log(e.sum(1)).mean()\n"
        "    loss.backward()\n",
        (9,),
        H + "def training_step(model, x):\n    scores = model(x)\n    loss = torch.logsumexp(scores, 1).mean()\n    loss.backward()\n",
    ),
    # torch.sum function form
    Flagged(
        H + "def helper(x):\n    return torch.log(torch.sum(torch.exp(x), dim=0))\n",
        (7,),
        H + "def helper(x):\n    return torch.logsumexp(x, dim=0)\n",
    ),
    # mean: logsumexp - log(n), math imported by the file already
    Flagged(
        "import math\n" + H + "def dv_bound(t_joint, t_marg):\n    return t_joint.mean() - torch.log(torch.exp(t_marg).mean(0))\n",
        (8,),
        "import math\n" + H + "def dv_bound(t_joint, t_marg):\n"
        "    return t_joint.mean() - (torch.logsumexp(t_marg, 0) - math.log(t_marg.shape[0]))\n",
    ),
    # mean without a dim: no fix
    Flagged(H + "def mine(t):\n    return torch.log(torch.mean(torch.exp(t)))\n", (7,)),
    # logaddexp, on attributes
    Flagged(
        H + "class Mix(nn.Module):\n    def forward(self, a, b):\n        return torch.log(torch.exp(self.w * a) + torch.exp(b))\n",
        (8,),
        H + "class Mix(nn.Module):\n    def forward(self, a, b):\n        return torch.logaddexp(self.w * a, b)\n",
    ),
    # three terms, and exps through names: no fix
    Flagged(H + "def f(a, b, c):\n    return torch.log(a.exp() + b.exp() + c.exp())\n", (7,)),
    Flagged(H + "def f(a, b):\n    ea = torch.exp(a)\n    eb = torch.exp(b)\n    return torch.log(ea + eb)\n", (9,)),
    # a sum without a dim: no fix
    Flagged(H + "def f(x):\n    return torch.exp(x).sum().log()\n", (7,)),
    # an exp of an input that is tested for emptiness elsewhere, and a where that keeps it where
    # only one of the inputs is infinite (log(exp(-inf) + exp(b)) is log(exp(b)), which overflows)
    Flagged(
        H + "def log_partition(energies, mask):\n"
        "    if mask.numel() == 0:\n"
        "        return torch.exp(-energies).sum(-1).log()\n"
        "    return torch.logsumexp(-energies.masked_fill(~mask, float('inf')), -1)\n",
        (8,),
        H + "def log_partition(energies, mask):\n"
        "    if mask.numel() == 0:\n"
        "        return torch.logsumexp(-energies, -1)\n"
        "    return torch.logsumexp(-energies.masked_fill(~mask, float('inf')), -1)\n",
    ),
    Flagged(
        H + "def log_mix(a, b):\n    return torch.where(torch.isinf(a), torch.log(torch.exp(a) + torch.exp(b)), torch.logaddexp(a, b))\n",
        (7,),
        H + "def log_mix(a, b):\n    return torch.where(torch.isinf(a), torch.logaddexp(a, b), torch.logaddexp(a, b))\n",
    ),
    Flagged(
        H + "def log_mix(a, b, keep):\n"
        "    mixed = torch.where(keep, torch.log(torch.exp(a) + torch.exp(b)), a)\n"
        "    return torch.where(torch.isinf(b), b, mixed)\n",
        (7,),
        H + "def log_mix(a, b, keep):\n"
        "    mixed = torch.where(keep, torch.logaddexp(a, b), a)\n"
        "    return torch.where(torch.isinf(b), b, mixed)\n",
    ),
]

LSE_SILENT = [
    Silent(H + "def f(x):\n    m = x.max(dim=-1, keepdim=True).values\n    return torch.log(torch.exp(x - m).sum(-1, keepdim=True)) + m\n"),
    Silent(
        H + "def f(x):\n    m, _ = torch.max(x, 1, keepdim=True)\n    z = x - m\n    return m + torch.log(z.exp().sum(1, keepdim=True))\n"
    ),
    Silent(H + "def f(logits):\n    log_probs = F.log_softmax(logits, -1)\n    return torch.log(log_probs.exp().sum(-1))\n"),
    # timm's generalised-mean pools: a scaled max-subtracted exp, the max a max pool
    Silent(
        H + "class LsePool(nn.Module):\n"
        "    def forward(self, x):\n"
        "        x_max = F.adaptive_max_pool2d(x, 1)\n"
        "        exp_x = torch.exp(self.r * (x - x_max))\n"
        "        sum_exp = exp_x.mean(dim=(2, 3), keepdim=True)\n"
        "        return x_max + (1.0 / self.r) * torch.log(sum_exp)\n"
    ),
    Silent(H + "def f(x):\n    return torch.logsumexp(x, -1) + torch.logaddexp(x, x)\n"),
    Silent(H + "def f(x):\n    return torch.log(1 + torch.exp(x)) + torch.log1p(torch.exp(x))\n"),
    Silent(H + "def f(x, mask):\n    return torch.log((torch.exp(x) * mask).sum(1) + 1e-8)\n"),
    Silent(H + "def f(x, y):\n    return torch.log(torch.exp(x) + y) + torch.log(x.sum(1)) + torch.exp(torch.log(x).sum(1))\n"),
    Silent(
        "import math\nimport numpy as np\nimport torch\ndef f(x, v):\n    return np.log(np.exp(x).sum(1)) + math.log(math.exp(v) + math.exp(v))\n"
    ),
    Silent(H + "class M(nn.Module):\n    def training_step(self, x):\n        self.log('lse', torch.exp(x).sum(1))\n"),
    # torch's `_log_softmax` decomposition: the max through a helper of the file
    Silent(
        H + "def _safe_amax(x, dim):\n"
        "    return torch.amax(x, dim, keepdim=True)\n"
        "\n"
        "\n"
        "def _log_softmax(x, dim):\n"
        "    x_max = _safe_amax(x, dim)\n"
        "    shifted = x - x_max\n"
        "    return shifted - torch.log(torch.sum(torch.exp(shifted), dim, keepdim=True))\n"
    ),
    # torch's `_refs.logsumexp`: an empty input alone takes the naive form; the max, reassigned
    # with its infinite entries filled, still shifts every row exactly
    Silent(
        H + "def logsumexp(self, dim, keepdim=False):\n"
        "    if self.numel() == 0:\n"
        "        return torch.sum(torch.exp(self), dim, keepdim).log()\n"
        "    maxes = torch.amax(torch.real(self), dim, keepdim=True)\n"
        "    maxes = torch.masked_fill(maxes, maxes.abs() == float('inf'), 0)\n"
        "    maxes_squeezed = maxes if keepdim else torch.squeeze(maxes, dim)\n"
        "    result = torch.sum(torch.exp(self - maxes), dim, keepdim)\n"
        "    return result.log().add(maxes_squeezed)\n"
    ),
    # torch's `_refs.logaddexp`: the naive form kept only where both inputs are the same infinity
    Silent(
        H + "def logaddexp(a, b):\n"
        "    mask = torch.real(a) >= torch.real(b)\n"
        "    max_ = torch.where(mask, a, b)\n"
        "    min_ = torch.where(mask, b, a)\n"
        "    inf_mask = torch.logical_and(torch.logical_not(torch.isfinite(torch.real(a))), torch.real(a) == torch.real(b))\n"
        "    neg_min_mask = torch.real(min_) < 0\n"
        "    inf_vals = torch.where(neg_min_mask, min_, torch.log(torch.exp(min_) + torch.exp(max_)))\n"
        "    return torch.where(inf_mask, inf_vals, max_ + torch.log1p(torch.exp(min_ - max_)))\n"
    ),
    Silent(
        H + "def log_mix(a, b):\n"
        "    both_inf = torch.isinf(a) & (a == b)\n"
        "    return torch.where(both_inf, torch.log(a.exp() + b.exp()), torch.logaddexp(a, b))\n"
    ),
]


@pytest.mark.parametrize(
    "code, case",
    harness.params("TNL110", SOFTMAX_FLAGGED, SOFTMAX_SILENT) + harness.params("TNL109", LSE_FLAGGED, LSE_SILENT),
)
def test_table(code, case):
    harness.check(code, case)


LOGGED = H + "def lp(x):\n    return torch.log(torch.exp(x) / torch.exp(x).sum(-1, keepdim=True))\n"
LOGGED_NAME = H + "def lp(x):\n    p = torch.exp(x) / torch.exp(x).sum(-1, keepdim=True)\n    return p.log()\n"


@pytest.mark.parametrize("source", [LOGGED, LOGGED_NAME])
def test_log_of_hand_softmax_has_one_owner(source):
    """TNL103 owns the log of a hand-written softmax; either rule alone still reports it."""
    both = harness.findings("TNL103", source, together=("TNL110",))
    assert [f.code for f in both] == ["TNL103"]
    assert [f.code for f in harness.findings("TNL110", source)] == ["TNL110"]
    assert [f.code for f in harness.findings("TNL103", source)] == ["TNL103"]


def test_softmax_read_beyond_the_log_is_reported_too():
    """An entropy reads the quotient in a product as well: its overflow is not the log's."""
    source = H + "def ent(x):\n    p = torch.exp(x) / torch.exp(x).sum(-1, keepdim=True)\n    return -(p * torch.log(p)).sum(-1)\n"
    found = sorted((f.code, f.line) for f in harness.findings("TNL103", source, together=("TNL110",)))
    assert found == [("TNL103", 8), ("TNL110", 7)]


# TNL110: one entry of a softmax written out, the InfoNCE loss by hand (measured: features of
# scale 1 at temperature 0.07 give similarities of 324, and the loss is inf where float64's
# cross entropy is 195; no rewrite is offered, the message names `log_softmax` and `cross_entropy`)
INFO_NCE_FLAGGED = [
    Flagged(
        H + "def info_nce(q, k, labels, t=0.07):\n"
        "    sim = q @ k.t() / t\n"
        "    pos = sim.gather(1, labels[:, None])\n"
        "    return -torch.log(torch.exp(pos) / torch.exp(sim).sum(dim=1, keepdim=True)).mean()\n",
        (9,),
        None,
        message="log_softmax",
    ),
    Flagged(
        H + "class Contrast(nn.Module):\n"
        "    def forward(self, a, b):\n"
        "        logits = a @ b.T * self.scale\n"
        "        ratio = logits.diag().exp() / logits.exp().sum(1)\n"
        "        return -ratio.log().mean()\n",
        (9,),
        None,
    ),
]

INFO_NCE_SILENT = [
    # the max subtracted first
    Silent(
        H + "def info_nce(q, k, labels):\n"
        "    sim = q @ k.t()\n"
        "    sim = sim - sim.max(dim=1, keepdim=True).values\n"
        "    pos = sim.gather(1, labels[:, None])\n"
        "    return -torch.log(torch.exp(pos) / torch.exp(sim).sum(dim=1, keepdim=True)).mean()\n"
    ),
    # the numerator's exp is of another tensor: no softmax entry
    Silent(H + "def ratio(a, b):\n    return torch.exp(a) / torch.exp(b).sum(dim=1, keepdim=True)\n"),
    # entries picked from log-probabilities: exp of them is at most 1
    Silent(
        H + "def picked(logits, labels):\n"
        "    log_probs = F.log_softmax(logits, dim=-1)\n"
        "    return log_probs.gather(1, labels[:, None]).exp() / log_probs.exp().sum(1, keepdim=True)\n"
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL110", INFO_NCE_FLAGGED, INFO_NCE_SILENT))
def test_info_nce_written_out(code, case):
    harness.check(code, case)
