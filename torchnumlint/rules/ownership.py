"""One hazard, one finding: which rule reports a site that two rules recognise.

Some sites fit two rules (a division by `x.norm(dim=d, keepdim=True)` of the same x is a division
by a norm, TNL201, and a normalisation by hand, TNL202). Each such kind of site has one owner,
declared here; the other rule stays silent there only while the owner is enabled for the file, so
that `--ignore TNL202` or `--select TNL201` never hides the hazard itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext

# kind of site -> the rule that owns it, and why it is the better report there
OWNERS: Dict[str, str] = {
    # `x / x.norm(dim=d, keepdim=True)`: F.normalize is an exact rewrite, a clamp is not
    "normalize": "TNL202",
    # `x / torch.sqrt(v)`: the division's fix clamps inside the root
    "root-as-divisor": "TNL201",
    # `n = torch.sqrt(v)` ... `x / n`: reported (and guarded) where the root is computed
    "named-root": "TNL206",
    # `torch.sqrt((x ** 2).sum(d))`: vector_norm is an exact rewrite, a clamp is not
    "root-of-sum-of-squares": "TNL204",
    # `torch.log(e / e.sum(d, keepdim=True))`: log_softmax removes the overflow and the underflow
    "log-of-hand-softmax": "TNL103",
    # `log(1 + exp(x))`: softplus also removes the overflow, log1p only the rounding of 1 + x
    "log-one-plus-exp": "TNL108",
    # `log(1 - sigmoid(x))`: logsigmoid(-x) is finite where the sigmoid saturates, log1p is not
    "log-one-minus-sigmoid": "TNL104",
    # `log(p) - log(1 - p)` of a sigmoid p: logsigmoid(x) - logsigmoid(-x) is exact, logit(eps) clamps
    "log-odds-of-sigmoid": "TNL104",
    # `-(y * log(p) + (1 - y) * log(1 - p))` of a sigmoid p (TNL105's form, TNL104's logs): the
    # logsigmoid fix of each log is exact even where y broadcasts, which with_logits refuses
    "handwritten-bce": "TNL104",
    # `(a * b).sum(d) / (a.norm(dim=d) * b.norm(dim=d))`: F.cosine_similarity is an exact rewrite,
    # a clamp of the product of norms is not
    "manual-cosine": "TNL203",
    # `log(softmax(x))` that may be 0 by underflow: log_softmax is exact, a clamp is not
    "log-of-softmax": "TNL103",
    # `log(sigmoid(x))`: logsigmoid is exact, a clamp is not
    "log-of-sigmoid": "TNL104",
    # `log(p / (1 - p))`, `log(p) - log(1 - p)`: logit(p, eps) clamps both edges, a clamp_min one
    "log-odds": "TNL112",
    # `e / e.sum(d)` of `e = exp(-dist / t)`: torch.softmax removes the underflow to 0/0 as well
    "hand-softmax": "TNL110",
    # `torch.where(n > 0, s / n, 0)` of a norm, sum or count: the division rule knows its zero
    "division-in-where": "TNL201",
    # `torch.sqrt(((a[:, None] - b[None]) ** 2).sum(-1))`: cdist is exact and skips the N x M x D tensor
    "pairwise-distance": "TNL205",
    # `scores.masked_fill(m, -1e9)` on float16 scores in a module forward TNL301 judges: TNL305 fixes it
    "fp16-fill": "TNL305",
    # `x / (t + 1e-8)` of a float16 `t` in a module forward TNL301 judges: TNL303 fixes the eps
    "fp16-eps": "TNL303",
}


def owned_elsewhere(ctx: "FileContext", code: str, site: str) -> bool:
    """Whether the rule `code` should leave a `site` to its owner: the owner is another rule and
    is enabled for this file."""
    owner = OWNERS[site]
    return owner != code and ctx.enabled(owner)
