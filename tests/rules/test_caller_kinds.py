"""A parameter is the softmax or sigmoid its callers pass (issue 16 item 2): `made_by` asks the
callers of the enclosing function (`rules/callers.py`) when a value is a parameter, one caller's
softmax is enough, and the finding names that caller (`file:line`, or `line N` in the same file).
Callers through an imported name, a module attribute, `self.method`, an instance of a project
class, and a function handed on (passed to a function of its file, kept in `self.attr`).
Look-alikes: callers that pass clamped or log-space values, a softmax passed for another
parameter, the default, a same-named function elsewhere, a function handed to code in another
file (not followed: one step, one file)."""

import textwrap
from pathlib import Path

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Project, Silent
from tests.test_cache import linted  # noqa: F401  # the fixture: the paths a run lints

NLL_HELPER = """\
    import torch
    import torch.nn.functional as F


    def nll_of_probs(probs, targets):
        return F.nll_loss(torch.log(probs), targets)
    """

ENTROPY_HELPER = """\
    import torch


    def prediction_entropy(p):
        return -(p * torch.log(p)).sum(dim=-1).mean()
    """


def _caller(imports: str, body: str) -> str:
    """A training step in its own module that imports the helper and calls it in `body`."""
    lines = "".join(f"    {line}\n" for line in textwrap.dedent(body).strip().splitlines())
    return (
        f"import torch.nn.functional as F\n{imports}\n\n\ndef training_step(model, images, targets):\n    logits = model(images)\n{lines}"
    )


TNL103 = [
    # `from losses import f`: the softmax written at the call
    Project(
        {
            "losses.py": NLL_HELPER,
            "train.py": _caller("from losses import nll_of_probs", "return nll_of_probs(F.softmax(logits, dim=1), targets)"),
        },
        lines={"losses.py": (6,)},
        message="`probs` is a softmax: the call at train.py:7 passes `F.softmax(logits, dim=1)`",
    ),
    # `import utils.losses as L; L.f(x)`, the softmax through a local name, passed by keyword
    Project(
        {
            "utils/__init__.py": "",
            "utils/losses.py": NLL_HELPER,
            "engine.py": _caller(
                "import utils.losses as L",
                """\
                probs = logits.softmax(-1)
                return L.nll_of_probs(targets=targets, probs=probs)
                """,
            ),
        },
        lines={"utils/losses.py": (6,)},
        message="engine.py:8",
    ),
    # an entropy regulariser whose caller passes the output of a helper that returns a softmax
    Project(
        {
            "metrics.py": ENTROPY_HELPER,
            "heads.py": """\
            import torch.nn.functional as F


            def class_probabilities(logits, temperature=1.0):
                return F.softmax(logits / temperature, dim=-1)
            """,
            "train.py": _caller(
                "from heads import class_probabilities\nfrom metrics import prediction_entropy",
                "return F.cross_entropy(logits, targets) - 0.1 * prediction_entropy(class_probabilities(logits))",
            ),
        },
        lines={"metrics.py": (5,)},
        message="train.py:8",
    ),
    # a method of the same class, called as `self.method(...)` in `forward`
    Project(
        {
            "model.py": """\
            import torch
            import torch.nn as nn
            import torch.nn.functional as F


            class Classifier(nn.Module):
                def __init__(self, dim, classes):
                    super().__init__()
                    self.head = nn.Linear(dim, classes)

                def confidence_penalty(self, probs):
                    return (probs * torch.log(probs)).sum(-1).mean()

                def forward(self, x, y):
                    logits = self.head(x)
                    return F.cross_entropy(logits, y) + self.confidence_penalty(F.softmax(logits, dim=-1))
            """
        },
        lines={"model.py": (12,)},
        message="the call at line 16 passes",
    ),
    # two callers: one passes log-probabilities, the other a softmax: the second is evidence
    Project(
        {
            "losses.py": NLL_HELPER,
            "eval.py": _caller(
                "from losses import nll_of_probs", "return nll_of_probs(F.log_softmax(logits, 1).exp().clamp_min(1e-8), targets)"
            ),
            "train.py": _caller("from losses import nll_of_probs", "return nll_of_probs(logits.softmax(1), targets)"),
        },
        lines={"losses.py": (6,)},
        message="train.py:7",
    ),
]

TNL103_SILENT = [
    # every caller clamps away the zeros first
    Project(
        {
            "losses.py": NLL_HELPER,
            "train.py": _caller("from losses import nll_of_probs", "return nll_of_probs(F.softmax(logits, 1).clamp_min(1e-6), targets)"),
        }
    ),
    # the softmax is passed for the other parameter (soft targets), the probabilities are a ratio of counts
    Project(
        {
            "losses.py": NLL_HELPER,
            "train.py": _caller(
                "from losses import nll_of_probs",
                "return nll_of_probs((logits.detach().abs() + 1) / (logits.detach().abs() + 1).sum(1, keepdim=True), targets.softmax(0))",
            ),
        }
    ),
    # a function of the same name in another module gets the softmax
    Project(
        {
            "losses.py": NLL_HELPER,
            "legacy.py": "import torch.nn.functional as F\n\n\ndef nll_of_probs(log_probs, targets):\n    return F.nll_loss(log_probs, targets)\n",
            "train.py": _caller("from legacy import nll_of_probs", "return nll_of_probs(F.softmax(logits, dim=1), targets)"),
        }
    ),
    # a parameter whose callers are not in the project: nothing is known of it
    Project({"losses.py": NLL_HELPER}),
    # the caller relies on the default, which is no probability
    Project(
        {
            "losses.py": """\
            import torch


            def smoothed_log(x, floor=None):
                return torch.log(x if floor is None else x.clamp_min(floor))
            """,
            "train.py": _caller("from losses import smoothed_log", "return smoothed_log(logits.exp() + 1.0)"),
        }
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL103", projects=TNL103 + TNL103_SILENT))
def test_tnl103_parameter_softmax_from_callers(code, case):
    harness.check(code, case)


CE_MODULE = """\
    import torch.nn as nn
    import torch.nn.functional as F


    class SoftTargetLoss(nn.Module):
        def forward(self, scores, labels):
            return F.cross_entropy(scores, labels, label_smoothing=0.1)
    """

TNL113 = [
    # an instance of a project loss module in another file: `crit(probs, y)` reaches `forward`
    Project(
        {
            "criterion.py": CE_MODULE,
            "trainer.py": """\
            import torch
            from criterion import SoftTargetLoss


            class Trainer:
                def __init__(self, model):
                    self.model = model
                    self.criterion = SoftTargetLoss()

                def step(self, batch):
                    scores = torch.softmax(self.model(batch["x"]), dim=1)
                    return self.criterion(scores, batch["y"])
            """,
        },
        lines={"criterion.py": (7,)},
        message="`scores` is a softmax: the call at trainer.py:12 passes `torch.softmax(",
    ),
    # the same module, called with logits: a look-alike
    Project(
        {
            "criterion.py": CE_MODULE,
            "trainer.py": """\
            from criterion import SoftTargetLoss


            def step(model, x, y):
                crit = SoftTargetLoss()
                return crit(model(x), y)
            """,
        }
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL113", projects=TNL113))
def test_tnl113_parameter_softmax_from_callers(code, case):
    harness.check(code, case)


LOG_LIKELIHOOD = """\
    import torch


    def bernoulli_log_likelihood(mean, x):
        return (x * torch.log(mean) + (1 - x) * torch.log(1 - mean)).sum(-1)
    """

TNL104 = [
    # a VAE decoder's sigmoid passed to a likelihood helper of another module
    Project(
        {
            "likelihoods.py": LOG_LIKELIHOOD,
            "vae.py": """\
            import torch
            import torch.nn as nn
            from likelihoods import bernoulli_log_likelihood


            class VAE(nn.Module):
                def __init__(self, decoder):
                    super().__init__()
                    self.decoder = decoder

                def loss(self, x, z):
                    recon = torch.sigmoid(self.decoder(z))
                    return -bernoulli_log_likelihood(recon, x).mean()
            """,
        },
        lines={"likelihoods.py": (5, 5)},
        message="vae.py:13",
    ),
    # the decoder's output clamped away from 0 and 1 first: silent
    Project(
        {
            "likelihoods.py": LOG_LIKELIHOOD,
            "vae.py": """\
            import torch
            from likelihoods import bernoulli_log_likelihood


            def loss(decoder, x, z):
                recon = torch.sigmoid(decoder(z)).clamp(1e-6, 1 - 1e-6)
                return -bernoulli_log_likelihood(recon, x).mean()
            """,
        }
    ),
]


# Methods of instances other than `self` whose class is known, and tuples passed between methods.
INSTANCES = [
    Project(
        {
            "heads.py": """\
            import torch.nn as nn
            import torch.nn.functional as F


            class Head(nn.Module):
                def __init__(self, dim, classes):
                    super().__init__()
                    self.fc = nn.Linear(dim, classes)

                def logits_and_probs(self, x):
                    logits = self.fc(x)
                    return logits, F.softmax(logits, dim=-1)
            """,
            "model.py": """\
            import torch
            import torch.nn as nn
            import torch.nn.functional as F
            from heads import Head


            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.head = Head(16, 4)

                def forward(self, x, y):
                    _, probs = self.head.logits_and_probs(x)
                    return F.nll_loss(torch.log(probs), y)


            def evaluate(x, y):
                head = Head(16, 4)
                logits, probs = head.logits_and_probs(x)
                return F.nll_loss(torch.log(probs), y), F.nll_loss(torch.log(logits.exp() + 1), y)
            """,
        },
        lines={"model.py": (14, 20)},
    ),
    Flagged(
        """\
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Model(nn.Module):
            def split(self, h):
                return h, h.softmax(-1)

            def forward(self, x, y):
                logits, probs = self.split(x)
                return F.nll_loss(torch.log(probs), y) + F.nll_loss(torch.log(logits.sigmoid() + 1), y)
        """,
        (12,),
    ),
    # `self.split` is the module's method: a tensor's `split` would give parts of its input
    Silent(
        """\
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Model(nn.Module):
            def split(self, h):
                return h, h.clamp(1e-6, 1.0)

            def forward(self, x, y):
                logits, probs = self.split(x.softmax(-1))
                return F.nll_loss(torch.log(probs), y)
        """
    ),
]


@pytest.mark.parametrize(
    "code, case",
    harness.params(
        "TNL103",
        flagged=[c for c in INSTANCES if isinstance(c, Flagged)],
        silent=[c for c in INSTANCES if isinstance(c, Silent)],
        projects=[c for c in INSTANCES if isinstance(c, Project)],
    ),
)
def test_tnl103_methods_of_known_instances_and_returned_tuples(code, case):
    harness.check(code, case)


@pytest.mark.parametrize("code, case", harness.params("TNL104", projects=TNL104))
def test_tnl104_parameter_sigmoid_from_callers(code, case):
    harness.check(code, case)


# Functions handed on: passed to a function of the same file and called through its parameter,
# or kept in `self.attr` and called through it.
HANDED = """\
    import torch
    import torch.nn.functional as F


    def entropy_bonus(probs):
        return (probs * torch.log(probs)).sum(-1).mean()


    def fit(model, loader, optimizer, regulariser, weight=0.01):
        for x, y in loader:
            logits = model(x)
            loss = F.cross_entropy(logits, y) + weight * regulariser({arg})
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


    def main(model, loader):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        fit(model, loader, optimizer, regulariser=entropy_bonus)
    """

KEPT = """\
    import torch
    import torch.nn.functional as F


    def consistency(p, q):
        return (p * (torch.log(p) - q.log_softmax(-1))).sum(-1).mean()


    class MeanTeacher:
        def __init__(self, student, teacher):
            self.student, self.teacher = student, teacher
            self.consistency_fn = consistency

        def step(self, x):
            with torch.no_grad():
                target = self.teacher(x)
            return self.consistency_fn({arg}, self.student(x))
    """

PARTIAL = """\
    import functools
    import torch
    import torch.nn.functional as F


    def entropy(probs, scale=1.0):
        return scale * (probs * torch.log(probs)).sum(-1).mean()


    class Regulariser:
        def __init__(self, weight):
            self.penalty = functools.partial(entropy, scale=weight)

        def __call__(self, logits):
            return self.penalty({arg})


    def evaluate(model, x):
        score = entropy
        return score(model(x).detach().abs() + 1.0)
    """

HANDED_CASES = [
    Flagged(PARTIAL.format(arg="logits.softmax(-1)"), (7,), message="the call at line 15 passes `logits.softmax(-1)`"),
    Silent(PARTIAL.format(arg="logits.softmax(-1).clamp(1e-6, 1.0)")),
    # a partial that binds a positional argument shifts the positions: not followed
    Silent(
        PARTIAL.format(arg="logits.softmax(-1)").replace("functools.partial(entropy, scale=weight)", "functools.partial(entropy, weight)")
    ),
    Flagged(HANDED.format(arg="F.softmax(logits, dim=-1)"), (6,), message="`probs` is a softmax: the call at line 12 passes"),
    Silent(HANDED.format(arg="F.log_softmax(logits, dim=-1)")),
    Flagged(KEPT.format(arg="F.softmax(target, dim=-1)"), (6,), message="the call at line 17 passes `F.softmax(target, dim=-1)`"),
    Silent(KEPT.format(arg="F.softmax(target, dim=-1).clamp_min(1e-8)")),
    # kept in an attribute but the class calls another one
    Silent(KEPT.format(arg="F.softmax(target, dim=-1)").replace("return self.consistency_fn(", "return self.kl_fn(")),
]

# a function of another file kept in `self.attr` by `__init__` (as itself or a keyword partial)
SHARPNESS = """\
    import torch


    def sharpness(probs, weight=1.0):
        return weight * (probs * torch.log(probs)).sum(-1).mean()
    """
KEEPER = """\
    import functools
    import torch.nn.functional as F
    from losses import sharpness


    class Trainer:
        def __init__(self, model, weight):
            self.model = model
            self.penalty = {held}

        def step(self, x, y):
            logits = self.model(x)
            return F.cross_entropy(logits, y) + self.penalty({arg})
    """
KEPT_ELSEWHERE = [
    Project(
        {"losses.py": SHARPNESS, "trainer.py": KEEPER.format(held="functools.partial(sharpness, weight=weight)", arg="logits.softmax(-1)")},
        lines={"losses.py": (5,)},
        message="the call at trainer.py:13 passes `logits.softmax(-1)`",
    ),
    Project(
        {"losses.py": SHARPNESS, "trainer.py": KEEPER.format(held="sharpness", arg="F.softmax(logits, dim=-1)")},
        lines={"losses.py": (5,)},
        message="trainer.py:13",
    ),
    Project({"losses.py": SHARPNESS, "trainer.py": KEEPER.format(held="sharpness", arg="F.log_softmax(logits, dim=-1).exp() + 1e-6")}),
    # a partial that binds the first parameter by position: the call's argument is the second one's
    Project({"losses.py": SHARPNESS, "trainer.py": KEEPER.format(held="functools.partial(sharpness, weight)", arg="logits.softmax(-1)")}),
]

# handed to a function of another file: not followed (one step, in its own file)
HANDED_ELSEWHERE = Project(
    {
        "regularisers.py": """\
        import torch


        def entropy_bonus(probs):
            return (probs * torch.log(probs)).sum(-1).mean()
        """,
        "loop.py": HANDED.replace("def entropy_bonus(probs):\n        return (probs * torch.log(probs)).sum(-1).mean()\n", "").format(
            arg="F.softmax(logits, dim=-1)"
        ),
    }
)


@pytest.mark.parametrize(
    "code, case",
    harness.params(
        "TNL103",
        flagged=[c for c in HANDED_CASES if isinstance(c, Flagged)],
        silent=[c for c in HANDED_CASES if isinstance(c, Silent)],
        projects=[HANDED_ELSEWHERE, *KEPT_ELSEWHERE],
    ),
)
def test_tnl103_functions_handed_on(code, case):
    harness.check(code, case)


# The speed layer: the finding rests on the caller's argument, so an edit there re-lints the helper.
def test_an_edit_at_the_caller_relints_the_helper(tmp_path):
    from tests.test_cache import lint, project

    train = textwrap.dedent(_caller("from losses import nll_of_probs", "return nll_of_probs(F.softmax(logits, dim=1), targets)"))
    folder = project(tmp_path, losses=textwrap.dedent(NLL_HELPER), train=train)
    found = lint(folder).findings
    assert [(Path(f.path).name, f.line, f.code) for f in found] == [("losses.py", 6, "TNL103")]
    assert "train.py:7" in found[0].message
    (folder / "train.py").write_text(train.replace("F.softmax(logits, dim=1)", "F.softmax(logits, dim=1).clamp_min(1e-6)"))
    assert lint(folder).findings == []
    (folder / "train.py").write_text(train)
    assert [f.line for f in lint(folder).findings] == [6]


# Each new fact a file reads from its callers is a fact of the caller's file, so the fingerprint
# follows it: an edit that changes only that fact re-lints the callee (and its finding follows),
# a comment does not. (`summaries.FileSummary.passes`, the call fact of a function kept in
# `self.attr`, the caller's argument under `callers_digest`.)
FINGERPRINT = [
    pytest.param(
        {
            "losses": NLL_HELPER,
            "train": _caller("from losses import nll_of_probs", "return nll_of_probs(F.softmax(logits, dim=1), targets)"),
        },
        ("F.softmax(logits, dim=1)", "F.relu(logits) + 1"),
        id="passes",
    ),
    pytest.param(
        {"losses": SHARPNESS, "trainer": KEEPER.format(held="sharpness", arg="logits.softmax(-1)")},
        ("self.penalty = sharpness", "self.penalty = F.mse_loss"),
        id="function-kept-in-an-attribute",
    ),
    pytest.param(
        {
            "losses": NLL_HELPER,
            "train": _caller("from losses import nll_of_probs", "probs = F.softmax(logits, dim=1)\nreturn nll_of_probs(probs, targets)"),
        },
        ("probs = F.softmax(logits, dim=1)", "probs = F.softmax(logits, dim=1).clamp_min(1e-6)"),
        id="argument-through-a-name",
    ),
]


@pytest.mark.parametrize("files, edit", FINGERPRINT)
def test_an_edit_of_a_callers_fact_relints_the_callee_and_a_comment_does_not(tmp_path, linted, files, edit):
    from tests.test_cache import lint, project

    folder = project(tmp_path, **{name: textwrap.dedent(text) for name, text in files.items()})
    caller = next(name for name in files if name != "losses") + ".py"
    cold = lint(folder).findings
    assert [(Path(f.path).name, f.code) for f in cold] == [("losses.py", "TNL103")]
    text = (folder / caller).read_text()
    (folder / caller).write_text(text + "# a comment changes no fact\n")
    linted.clear()
    assert lint(folder).findings == cold and linted == [caller]
    assert edit[0] in text
    (folder / caller).write_text(text.replace(edit[0], edit[1]))
    linted.clear()
    assert [f for f in lint(folder).findings if f.code == "TNL103"] == [] and "losses.py" in linted
