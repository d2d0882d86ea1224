"""TNL201 on a sum of exponentials used as a divisor (issue 16 item 5): `exp(-v)` of a distance,
a square or a norm (a Gaussian or Laplacian kernel) is positive in exact arithmetic but exactly 0
once v >= 104 in float32 (17.5 in float16, 92.75 in bfloat16; measured on torch 2.13 CPU), so
a query far beyond the kernel's width from every key sums to 0: measured, a Nadaraya-Watson
estimate with keys 20 and 25 away at sigma = 1 gives a NaN forward and NaN gradients of the
values and of sigma. A softmax's `exp(x - max)` keeps a 1 in every row, and exp of a value of
unknown sign is no evidence; `e / e.sum(d)` of such an exp is a softmax by hand, TNL110's while
it is on."""

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent

HEAD = """\
    import torch
    from torch import nn


    class Smoother(nn.Module):
"""

NADARAYA = HEAD + (
    "        def forward(self, q, keys, values, sigma):\n"
    "            d2 = ((q[:, None] - keys[None]) ** 2).sum(-1)\n"
    "            w = torch.exp(-d2 / (2 * sigma**2))\n"
    "            return (w @ values) / w.sum(-1, keepdim=True)\n"
)
RBF = HEAD + (
    "        def forward(self, x, centers, values, gamma):\n"
    "            d = torch.cdist(x, centers)\n"
    "            return (torch.exp(-gamma * d) @ values) / torch.exp(-gamma * d).sum(-1, keepdim=True)\n"
)
SOFT_ASSIGN = HEAD + (
    "        def forward(self, x, centers, tau):\n"
    "            w = torch.exp(-torch.cdist(x, centers) / tau)\n"
    "            return w / w.sum(-1, keepdim=True)\n"
)

UNDERFLOW = "when every exponential underflows"

FLAGGED = [
    Flagged(
        NADARAYA,
        (9,),
        NADARAYA.replace("w.sum(-1, keepdim=True)\n", "w.sum(-1, keepdim=True).clamp_min(1e-12)\n"),
        message=UNDERFLOW,
    ),
    Flagged(
        RBF,
        (8,),
        RBF.replace("d).sum(-1, keepdim=True)\n", "d).sum(-1, keepdim=True).clamp_min(1e-12)\n"),
        message=UNDERFLOW,
    ),
    # a softmax by hand of such an exp: the division rule's while TNL110 is off
    Flagged(
        SOFT_ASSIGN,
        (8,),
        SOFT_ASSIGN.replace("w.sum(-1, keepdim=True)\n", "w.sum(-1, keepdim=True).clamp_min(1e-12)\n"),
        message=UNDERFLOW,
    ),
]

SILENT = [
    # the max subtracted: one term of every row is exp(0) = 1
    Silent(
        HEAD + "        def forward(self, s, v):\n"
        "            e = torch.exp(s - s.max(-1, keepdim=True).values)\n"
        "            return (e @ v) / e.sum(-1, keepdim=True)\n"
    ),
    # exp of scores of unknown sign: no evidence that every term underflows
    Silent(
        HEAD + "        def forward(self, s, v):\n            e = torch.exp(-s)\n            return (e @ v) / e.sum(-1, keepdim=True)\n"
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL201", FLAGGED, SILENT))
def test_a_sum_of_exponentials_of_distances_can_underflow(code, case):
    harness.check(code, case)


def test_a_softmax_by_hand_of_such_an_exp_is_reported_once():
    """TNL110 owns `e / e.sum(d)` while it is on (torch.softmax removes the underflow too)."""
    assert [f.code for f in harness.findings("TNL201", SOFT_ASSIGN, together=("TNL110",))] == ["TNL110"]
