"""Stronger summaries (issue 16 item 3, and the producer forms of item 7): what a helper, a
`forward` or a module attribute gives when it is written less plainly. A tuple element of
`forward`'s return (`recon, mu, logvar = model(x)`, `return self.both(x)[1]`), a returned name
bound more than once (known when every binding agrees, its value-keeping rebinding `p =
p.float()` aside; an in-place change makes it unknown), a module-level `net = net.to(device)`,
`log_softmax(x).exp()` as a softmax, a softmax written out (`x.exp() / x.exp().sum(d,
keepdim=True)`, or built in place with `.div_()`), `partial(F.softmax, dim=-1)` kept in an
attribute, and `nn.Sequential(*layers)` of a list whose last layer is known. The probe is
`test_producers._answers`: what `call_kind` answers for the argument of each `torch.log` /
`torch.exp` / `F.nll_loss` of the source."""

import pytest

from tests.rules import harness
from tests.rules.harness import Project
from tests.rules.test_producers import _one

PRODUCING = [
    pytest.param(
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class VAEClassifier(nn.Module):
            def forward(self, x):
                h = self.encoder(x)
                mu, logvar = h.chunk(2, dim=-1)
                return self.decoder(mu), F.softmax(self.cls(mu), dim=-1), logvar

        def loss(x, y):
            recon, probs, logvar = VAEClassifier()(x)
            return -torch.log(probs).gather(1, y[:, None]).mean()
        """,
        ("softmax", -1),
        id="an-element-of-forward's-tuple",
    ),
    pytest.param(
        """
        import torch
        import torch.nn as nn

        class Head(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.proj = nn.Linear(dim, 10)
                self.act = nn.Sigmoid()

            def both(self, x):
                z = self.proj(x)
                return z, self.act(z)

            def forward(self, x):
                return self.both(x)[1]

        def score(x):
            return torch.log(Head(16)(x))
        """,
        ("sigmoid", None),
        id="an-element-of-a-method's-tuple-returned",
    ),
    pytest.param(
        """
        import torch
        import torch.nn.functional as F

        def class_probs(logits, flat):
            p = F.softmax(logits, dim=-1)
            if flat:
                p = F.softmax(logits.flatten(1), dim=-1)
            p = p.float()
            return p

        def nll(logits, y):
            return -torch.log(class_probs(logits, True)).mean()
        """,
        ("softmax", -1),
        id="a-returned-name-bound-twice-the-same-way",
    ),
    pytest.param(
        """
        import torch

        def stable_softmax(x):
            return x.exp() / x.exp().sum(-1, keepdim=True)

        def nll(x):
            return -torch.log(stable_softmax(x)).mean()
        """,
        ("softmax", -1),
        id="a-softmax-written-out",
    ),
    pytest.param(
        """
        import torch

        def attention_weights(scores):
            w = (scores - scores.amax(dim=-1, keepdim=True)).exp()
            w.div_(w.sum(dim=-1, keepdim=True))
            return w

        def entropy(scores):
            p = attention_weights(scores)
            return -(p * torch.log(p)).sum(-1)
        """,
        ("softmax", -1),
        id="a-softmax-built-in-place-with-div_",
    ),
    pytest.param(
        """
        import torch
        import torch.nn.functional as F

        def probs(logits):
            return F.log_softmax(logits, dim=1).exp()

        def nll(logits, y):
            return -torch.log(probs(logits)).gather(1, y[:, None]).mean()
        """,
        ("softmax", 1),
        id="exp-of-log_softmax",
    ),
    pytest.param(
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        from functools import partial

        class Attention(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn_fn = partial(F.softmax, dim=-1)

            def forward(self, q, k):
                attn = self.attn_fn(q @ k.transpose(-2, -1))
                return -(attn * torch.log(attn)).sum(-1)
        """,
        ("softmax", -1),
        id="partial-softmax-in-an-attribute",
    ),
]

SEQUENTIAL = """
    import torch
    import torch.nn as nn

    class MLPClassifier(nn.Module):
        def __init__(self, dims, classes):
            super().__init__()
            layers = []
            for a, b in zip(dims, dims[1:]):
                layers += [nn.Linear(a, b), nn.ReLU()]
            layers.append(nn.Linear(dims[-1], classes))
            layers.append(nn.Softmax(dim=1))
            self.net = nn.Sequential(*layers)

        def forward(self, x):
            return self.net(x)

    def nll(x, y):
        return -torch.log(MLPClassifier([64, 32], 10)(x)).gather(1, y[:, None]).mean()
    """
PRODUCING.append(pytest.param(SEQUENTIAL, ("softmax", 1), id="sequential-of-a-list-ending-in-a-softmax"))

SILENT = [
    pytest.param(
        SEQUENTIAL.replace(
            "            layers.append(nn.Softmax(dim=1))\n",
            "            if probabilities:\n                layers.append(nn.Softmax(dim=1))\n",
        ).replace("classes):", "classes, probabilities):"),
        id="sequential-of-a-list-whose-softmax-is-conditional",
    ),
    pytest.param(
        SEQUENTIAL.replace(
            "self.net = nn.Sequential(*layers)", "layers.insert(0, nn.Flatten())\n            self.net = nn.Sequential(*layers)"
        ),
        id="sequential-of-a-list-changed-afterwards",
    ),
    pytest.param(
        SEQUENTIAL.replace(
            "layers.append(nn.Softmax(dim=1))", "layers.append(nn.Softmax(dim=1))\n            layers.append(nn.Dropout(0.1))"
        ),
        id="sequential-of-a-list-ending-in-dropout",
    ),
    pytest.param(
        """
        import torch
        import torch.nn.functional as F

        def class_probs(logits, mask):
            p = F.softmax(logits, dim=-1)
            p[mask] = 0
            return p

        def nll(logits, mask):
            return -torch.log(class_probs(logits, mask)).mean()
        """,
        id="a-softmax-changed-in-place",
    ),
    pytest.param(
        """
        import torch
        import torch.nn.functional as F

        def scores(logits, probabilities):
            p = logits
            if probabilities:
                p = F.softmax(logits, dim=-1)
            return p

        def nll(logits):
            return -torch.log(scores(logits, True)).mean()
        """,
        id="a-name-bound-two-different-ways",
    ),
    pytest.param(
        """
        import torch

        def ratio(x, y):
            return x.exp() / y.exp().sum(-1, keepdim=True)

        def nll(x, y):
            return -torch.log(ratio(x, y)).mean()
        """,
        id="an-exp-over-another-sum-of-exps",
    ),
    pytest.param(
        """
        import torch

        def weights(x):
            e = x.exp()
            e.mul_(2)
            return e / e.sum(-1)

        def nll(x):
            return -torch.log(weights(x)).mean()
        """,
        id="a-sum-without-keepdim-and-an-in-place-product",
    ),
    pytest.param(
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class VAE(nn.Module):
            def forward(self, x):
                mu, logvar = self.encoder(x).chunk(2, dim=-1)
                return self.decoder(mu), F.softmax(mu, -1), logvar

        def kl(x):
            recon, probs, logvar = VAE()(x)
            return torch.exp(logvar)
        """,
        id="another-element-of-the-tuple",
    ),
    pytest.param(
        """
        import torch
        import torch.nn.functional as F

        def probs(logits):
            return F.softmax(logits, dim=-1).log().exp()

        def nll(logits):
            return torch.log(probs(logits))
        """,
        id="exp-of-a-log-not-a-log_softmax",
    ),
]


@pytest.mark.parametrize("source, expected", PRODUCING)
def test_stronger_summaries_produce(source, expected):
    assert _one(source) == expected


@pytest.mark.parametrize("source", SILENT)
def test_stronger_summary_look_alikes(source):
    assert _one(source) is None


# Across files, as a rule reports it: the class's file holds the softmax, the script uses it
MODEL = """\
    import torch.nn as nn
    import torch.nn.functional as F


    class Classifier(nn.Module):
        def __init__(self, dim, classes):
            super().__init__()
            self.fc = nn.Linear(dim, classes)

        def forward(self, x):
            logits = self.fc(x)
            return logits, F.softmax(logits, dim=-1)
    """

PROJECTS = [
    Project(
        {
            "models/classifier.py": MODEL,
            "train.py": """\
        import torch
        from models.classifier import Classifier

        net = Classifier(128, 10)
        net = net.to("cuda")


        def step(x, y):
            logits, probs = net(x)
            return -torch.log(probs).gather(1, y[:, None]).mean()
        """,
        },
        lines={"train.py": (10,)},
    ),
    # the logits element is no softmax
    Project(
        {
            "models/classifier.py": MODEL,
            "train.py": """\
        import torch
        from models.classifier import Classifier

        net = Classifier(128, 10)
        net = net.to("cuda")


        def step(x, y):
            logits, probs = net(x)
            return torch.log(logits.abs() + 1).mean()
        """,
        }
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL103", projects=PROJECTS))
def test_an_element_of_a_module_in_another_file(code, case):
    harness.check(code, case)


# A rule that names the producer in its message names the call unpacked (no fix: the logits are
# inside the helper)
UNPACKED_SIGMOID = """\
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    class Detector(nn.Module):
        def forward(self, x):
            z = self.cls(x)
            return z, torch.sigmoid(z)


    def loss(det, x, y):
        logits, probs = Detector()(x)
        return F.binary_cross_entropy(probs, y)
    """


@pytest.mark.parametrize(
    "code, case",
    harness.params(
        "TNL105",
        flagged=[
            harness.Flagged(UNPACKED_SIGMOID, (14,), message="made by `Detector()`"),
        ],
        silent=[
            harness.Silent(UNPACKED_SIGMOID.replace("F.binary_cross_entropy(probs, y)", "F.binary_cross_entropy_with_logits(logits, y)")),
        ],
    ),
)
def test_an_unpacked_sigmoid_into_bce(code, case):
    harness.check(code, case)
