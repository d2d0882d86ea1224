"""Magnitude hazards in test code (`rules/test_code.py`): a test's model trains for a few steps,
so a saturating sigmoid (TNL105), a softmax spread past ~104 (TNL103) or an exp past 88.7
(TNL111) is strict-mode only there; the same code in the library reports."""

import pytest

from tests.rules import harness
from tests.rules.harness import Project
from torchnumlint.rules.test_code import STRICT_IN_TESTS

_GAN = """\
import torch
import torch.nn.functional as F
from torch import nn


class TinyGAN(nn.Module):
    def __init__(self):
        super().__init__()
        self.disc = nn.Sequential(nn.Linear(8, 1), nn.Sigmoid())

    def adversarial_loss(self, y_hat, y):
        return F.binary_cross_entropy(y_hat, y)

    def training_step(self, x, valid):
        return self.adversarial_loss(self.disc(x), valid)
"""

_RANKER = """\
import torch
from torch import nn


class Ranker(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.score = nn.Linear(d, 4)

    def forward(self, h):
        return torch.log(torch.softmax(self.score(h), dim=-1))
"""

_GATE = """\
import torch


def gated(h, w):
    return h / (1 + torch.exp(-(h @ w)))
"""


def _both(code, path, source, line, fixed=None):
    """The file at `path`: silent by default, flagged with the test-code note in strict mode."""
    return (
        Project(files={path: source}),
        Project(files={path: source}, lines={path: (line,)}, strict=True, message=STRICT_IN_TESTS, fixed={path: fixed} if fixed else {}),
    )


PROJECTS = {
    "TNL105": (
        Project(files={"models/gan.py": _GAN}, lines={"models/gan.py": (12,)}),
        *_both("TNL105", "tests/helpers/advanced_models.py", _GAN, 12),
        *_both("TNL105", "test_gan.py", _GAN, 12),
    ),
    "TNL103": (
        Project(
            files={"ranking/model.py": _RANKER},
            lines={"ranking/model.py": (11,)},
            fixed={
                "ranking/model.py": _RANKER.replace(
                    "torch.log(torch.softmax(self.score(h), dim=-1))", "torch.log_softmax(self.score(h), dim=-1)"
                )
            },
        ),
        Project(files={"tests/unit/conftest.py": _RANKER}),
    ),
    "TNL111": (
        Project(
            files={"layers.py": _GATE},
            lines={"layers.py": (5,)},
            fixed={"layers.py": _GATE.replace("h / (1 + torch.exp(-(h @ w)))", "h * torch.sigmoid(h @ w)")},
        ),
        Project(files={"model_test.py": _GATE}),
    ),
}


@pytest.mark.parametrize("code, case", [p for code, cases in PROJECTS.items() for p in harness.params(code, projects=cases)])
def test_magnitude_hazards_in_test_code_are_strict_only(code, case):
    harness.check(code, case)
