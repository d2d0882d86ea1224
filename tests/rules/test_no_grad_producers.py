"""TNL201 on a mended division in post-processing (issue 16, pyg's CorrectAndSmooth read FALSE):
once the author re-fills the Inf entries (`scale[scale.isinf()] = 1.0`) only a gradient claim is
left, and it is made by default only where a gradient is shown to reach the division:

- a value returned by a project function or method that runs without autograd (decorated
  `@torch.no_grad()` / `@torch.inference_mode()`, or its whole body under one), or by a module
  whose `forward` does, carries none (`FileSummary.no_grad`, `Summaries.callee_no_grad`);
- a parameter carries one only where a caller in the project passes it a value with a gradient in
  code that differentiates, named in the message; the module's own weights or a model's output
  are shown where they are used.

Measured on torch 2.13 CPU (`sigma / den` with den = [0, 2], the Inf entry re-filled with 1.0):
the forward is finite; the gradient of sigma is NaN and den's is [nan, -0.375]. Computed under
`no_grad`, the same mended value has no gradient to poison."""

import ast
import textwrap

import pytest

from tests.rules import harness
from tests.rules.harness import Project
from torchnumlint.summaries import Summaries, summarize

PROPAGATION = """\
    import torch
    from torch import nn


    class Propagate(nn.Module):
        def __init__(self, steps: int):
            super().__init__()
            self.steps = steps

        @torch.no_grad()
        def forward(self, y, adj):
            for _ in range(self.steps):
                y = adj @ y
            return y
    """

# the divisor comes from the no-grad propagation, the numerator from a parameter; the Inf is mended
CORRECT = """\
    import torch
    from torch import nn
    from graph.propagate import Propagate


    class Corrector(nn.Module):
        def __init__(self):
            super().__init__()
            self.prop = Propagate(3)

        def forward(self, y_soft, y_true, adj):
            return self.correct(y_soft, y_true, adj)

        def correct(self, y_soft, y_true, adj):
            error = y_true - y_soft
            smoothed = self.prop(error, adj)
            sigma = error.abs().sum() / error.size(0)
            scale = sigma / smoothed.abs().sum(dim=1, keepdim=True)
            scale[scale.isinf() | (scale > 1000)] = 1.0
            return y_soft + scale * smoothed
    """

# a module whose own weights make the numerator: the gradient is shown where it is used
OWN_WEIGHTS = """\
    import torch
    from torch import nn
    from graph.propagate import Propagate


    class Rescale(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.prop = Propagate(3)
            self.gain = nn.Linear(dim, 1)

        def forward(self, h, adj):
            smoothed = self.prop(h, adj)
            scale = self.gain(h) / smoothed.abs().sum(dim=1, keepdim=True)
            scale[scale.isinf()] = 1.0
            return scale * smoothed
    """

CLAMPED = ".abs().sum(dim=1, keepdim=True).clamp_min(1e-12)"
CORRECT_FIXED = CORRECT.replace("smoothed.abs().sum(dim=1, keepdim=True)", "smoothed" + CLAMPED)
OWN_WEIGHTS_FIXED = OWN_WEIGHTS.replace("smoothed.abs().sum(dim=1, keepdim=True)", "smoothed" + CLAMPED)

PROJECTS = [
    # pyg's case: a no-grad producer's divisor, parameters no caller gives a gradient
    Project({"graph/propagate.py": PROPAGATION, "graph/correct.py": CORRECT}),
    Project(
        {"graph/propagate.py": PROPAGATION, "graph/correct.py": CORRECT},
        lines={"graph/correct.py": (18,)},
        fixed={"graph/correct.py": CORRECT_FIXED},
        strict=True,
        message="strict mode",
    ),
    # the same post-processing called from evaluation code under no_grad: still nothing
    Project(
        {
            "graph/propagate.py": PROPAGATION,
            "graph/correct.py": CORRECT,
            "run.py": """\
        import torch
        from graph.correct import Corrector


        @torch.no_grad()
        def test(model, post, x, y, adj):
            y_soft = model(x).softmax(dim=-1)
            return post.correct(y_soft, y, adj)
        """,
        }
    ),
    # a training step hands it a model's output: the gradient reaches the mended entry
    Project(
        {
            "graph/propagate.py": PROPAGATION,
            "graph/correct.py": CORRECT,
            "train.py": """\
        import torch
        from graph.correct import Corrector


        def train(model, opt, loader, adj):
            post = Corrector()
            for x, y in loader:
                out = post.correct(model(x).softmax(dim=-1), y, adj)
                loss = torch.nn.functional.nll_loss(out.log(), y.argmax(-1))
                loss.backward()
                opt.step()
        """,
        },
        lines={"graph/correct.py": (18,)},
        fixed={"graph/correct.py": CORRECT_FIXED},
        message="`y_soft` is given a value with a gradient by the call (train.py:8)",
    ),
    # the module's own weights in the numerator: shown here, reported by default
    Project(
        {"graph/propagate.py": PROPAGATION, "graph/rescale.py": OWN_WEIGHTS},
        lines={"graph/rescale.py": (14,)},
        fixed={"graph/rescale.py": OWN_WEIGHTS_FIXED},
        message="keeps the forward finite, not the gradient",
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL201", projects=PROJECTS))
def test_mended_division_reports_only_a_shown_gradient(code, case):
    harness.check(code, case)


def _no_grad(source):
    return summarize("m.py", ast.parse(textwrap.dedent(source))).no_grad


def test_the_summary_records_what_runs_without_autograd():
    source = """
        import torch
        from torch import inference_mode, no_grad


        @torch.no_grad()
        def decorated(x):
            return x * 2


        @no_grad
        def bare(x):
            return x * 2


        def whole_body(x):
            \"\"\"A docstring first.\"\"\"
            with torch.inference_mode():
                return x * 2


        @inference_mode(False)
        def reenabled(x):
            return x * 2


        def partly(x):
            with torch.no_grad():
                y = x * 2
            return x + y


        class Head(torch.nn.Module):
            @torch.inference_mode()
            def forward(self, x):
                return x

            def score(self, x):
                return x
        """
    assert _no_grad(source) == {"decorated", "bare", "whole_body", "Head.forward"}


def test_a_no_grad_forward_is_found_through_an_attribute_and_an_instance():
    files = {
        "graph/propagate.py": summarize("graph/propagate.py", ast.parse(textwrap.dedent(PROPAGATION))),
        "graph/correct.py": summarize("graph/correct.py", ast.parse(textwrap.dedent(CORRECT))),
    }
    summaries = Summaries(files)
    owner = ("graph/correct.py", "Corrector")
    assert summaries.callee_no_grad("graph/correct.py", owner, ("self", "prop"))
    assert summaries.callee_no_grad("graph/correct.py", None, ("new", "Propagate"))
    assert not summaries.callee_no_grad("graph/correct.py", owner, ("self", "correct"))
    assert not summaries.callee_no_grad("graph/correct.py", None, ("new", "Corrector"))


# The same fact for a KL target: a teacher module whose `forward` runs under `no_grad` hands the
# loss a softmax with no gradient (nothing to poison); the same module without it does not.
TEACHERS = """\
    import torch
    from torch import nn


    class EmaTeacher(nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        @torch.no_grad()
        def forward(self, x):
            return self.net(x).softmax(-1)


    class SharedHead(nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x):
            return self.net(x).softmax(-1)
    """

DISTILL = """\
    import torch.nn.functional as F
    from teachers import {cls}


    def distill_step(student, net, opt, x):
        targets = {cls}(net)(x)
        loss = F.kl_div(student(x).log_softmax(-1), targets, reduction="batchmean")
        loss.backward()
        opt.step()
    """

KL_PROJECTS = [
    Project({"teachers.py": TEACHERS, "train.py": DISTILL.format(cls="EmaTeacher")}),
    Project({"teachers.py": TEACHERS, "train.py": DISTILL.format(cls="SharedHead")}, lines={"train.py": (7,)}),
]


@pytest.mark.parametrize("code, case", harness.params("TNL101", projects=KL_PROJECTS))
def test_a_kl_target_from_a_no_grad_forward_carries_no_gradient(code, case):
    harness.check(code, case)
