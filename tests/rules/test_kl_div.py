"""TNL101 / TNL102: KL divergence with probabilities where PyTorch wants log-probabilities."""

import textwrap

import pytest

from tests.conftest import fixed, lint

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"


def src(body):
    return HEAD + "def f(a, b, t, x, teacher):\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n"


# (body, finding line within the body, fixed body or None when no rewrite is offered)
FLAGGED = [
    ('return F.kl_div(F.log_softmax(a, -1), F.softmax(b, -1), reduction="batchmean")', 1,
     'return F.kl_div(F.log_softmax(a, -1), F.log_softmax(b, -1), reduction="batchmean", log_target=True)'),
    # the method form
    ('return F.kl_div(a.log_softmax(-1), b.softmax(-1), reduction="batchmean")', 1,
     'return F.kl_div(a.log_softmax(-1), b.log_softmax(-1), reduction="batchmean", log_target=True)'),
    # torch.softmax and torch.nn.functional spelled out
    ('return torch.nn.functional.kl_div(a, torch.softmax(b, dim=1))', 1,
     'return torch.nn.functional.kl_div(a, torch.log_softmax(b, dim=1), log_target=True)'),
    # explicit log_target=False is replaced
    ('return F.kl_div(a, F.softmax(b, 1), reduction="sum", log_target=False)', 1,
     'return F.kl_div(a, F.log_softmax(b, 1), reduction="sum", log_target=True)'),
    # keyword arguments in any order
    ('return F.kl_div(target=F.softmax(b, dim=-1), input=a, reduction="batchmean")', 1,
     'return F.kl_div(target=F.log_softmax(b, dim=-1), input=a, reduction="batchmean", log_target=True)'),
    # through a name read only here: the assignment is rewritten
    ('p = F.softmax(b / 2.0, dim=-1)\nreturn F.kl_div(a, p, reduction="batchmean")', 2,
     'p = F.log_softmax(b / 2.0, dim=-1)\nreturn F.kl_div(a, p, reduction="batchmean", log_target=True)'),
    # nn.KLDivLoss called inline
    ('return nn.KLDivLoss(reduction="batchmean")(a, F.softmax(b, -1))', 1,
     'return nn.KLDivLoss(reduction="batchmean", log_target=True)(a, F.log_softmax(b, -1))'),
    # nn.KLDivLoss through a local name: reported, the constructor may be shared, no rewrite
    ('crit = nn.KLDivLoss(reduction="batchmean")\nreturn crit(a, F.softmax(b, -1))', 2, None),
    # nested inside a larger expression, multiplied by T**2
    ('return 4.0 * F.kl_div(F.log_softmax(a / 2, 1), F.softmax(b / 2, 1), reduction="batchmean") + 1', 1,
     'return 4.0 * F.kl_div(F.log_softmax(a / 2, 1), F.log_softmax(b / 2, 1), reduction="batchmean", log_target=True) + 1'),
    # multi-line call
    ('return F.kl_div(\n    F.log_softmax(a, -1),\n    F.softmax(b, -1),\n)', 3,
     'return F.kl_div(\n    F.log_softmax(a, -1),\n    F.log_softmax(b, -1),\n    log_target=True,\n)'),
    # a name read twice: reported without a rewrite
    ('q = F.softmax(b, -1)\nloss = F.kl_div(a, q)\nreturn loss, q', 2, None),
    # **kwargs may hold log_target: reported without a rewrite
    ('kw = {}\nreturn F.kl_div(a, F.softmax(b, -1), **kw)', 2, None),
]


@pytest.mark.parametrize("body, line, after", FLAGGED, ids=range(len(FLAGGED)))
def test_tnl101_flagged(body, line, after):
    code = src(body)
    assert lint(code, "TNL101") == [("TNL101", 6 + line)]
    assert fixed(code, "TNL101", unsafe=False) == (src(after) if after else code)
    if after:
        assert lint(src(after), "TNL101") == []


CLEAN = [
    # already log-space
    'return F.kl_div(F.log_softmax(a, -1), F.log_softmax(b, -1), log_target=True)',
    # detached target, either way round
    'return F.kl_div(a, F.softmax(b, -1).detach())',
    'return F.kl_div(a, F.softmax(b.detach(), -1))',
    'return F.kl_div(a, F.softmax(t.data, -1))',
    # computed under no_grad in the same function
    'with torch.no_grad():\n    p = F.softmax(teacher(x), -1)\nreturn F.kl_div(a, p)',
    'with torch.no_grad():\n    logits = teacher(x)\nreturn F.kl_div(a, F.softmax(logits / 2.0, -1))',
    # the whole call under no_grad / inference_mode
    'with torch.inference_mode():\n    return F.kl_div(a, F.softmax(b, -1))',
    # a target that is not a softmax
    'return F.kl_div(a, t)',
    'return F.kl_div(a, torch.sigmoid(b))',
    # a reassignment between the softmax and the use breaks the chain
    'p = F.softmax(b, -1)\np = p.detach()\nreturn F.kl_div(a, p)',
    # log_target=True with a softmax is another mistake, not this one
    'return F.kl_div(a, F.softmax(b, -1), log_target=True)',
    # a kl_div that is not torch's
    'from mylib import kl_div\nreturn kl_div(a, F.softmax(b, -1))',
    # another loss module
    'return nn.MSELoss()(a, F.softmax(b, -1))',
]


@pytest.mark.parametrize("body", CLEAN, ids=range(len(CLEAN)))
def test_tnl101_clean(body):
    assert lint(src(body), "TNL101") == []


def test_tnl101_every_import_alias():
    for head, call in [
        ("import torch.nn.functional as F", "F.kl_div(a, F.softmax(b, -1))"),
        ("from torch.nn import functional as F", "F.kl_div(a, F.softmax(b, -1))"),
        ("from torch import nn", "nn.functional.kl_div(a, nn.functional.softmax(b, -1))"),
        ("from torch.nn.functional import kl_div as kd, softmax as sm", "kd(a, sm(b, -1))"),
        ("import torch", "torch.nn.functional.kl_div(a, torch.special.softmax(b, -1))"),
        ("import torch.nn as tnn", "tnn.KLDivLoss()(a, b.softmax(-1))"),
        ("from torch.nn import KLDivLoss", "KLDivLoss()(a, b.softmax(-1))"),
    ]:
        assert lint(f"{head}\ndef f(a, b):\n    return {call}\n", "TNL101") == [("TNL101", 3)], head


def test_tnl101_criterion_on_self_is_followed():
    code = """
        import torch.nn as nn
        class Distill(nn.Module):
            def __init__(self):
                super().__init__()
                self.kl = nn.KLDivLoss(reduction="batchmean")
            def forward(self, s, t):
                return self.kl(s.log_softmax(-1), t.softmax(-1))
    """
    assert lint(code, "TNL101") == [("TNL101", 8)]


@pytest.mark.parametrize(
    "body, after",
    [
        ('return F.kl_div(F.softmax(a, -1), t, reduction="batchmean")',
         'return F.kl_div(F.log_softmax(a, -1), t, reduction="batchmean")'),
        ('return F.kl_div(a.softmax(dim=1), t)', 'return F.kl_div(a.log_softmax(dim=1), t)'),
        ('return nn.KLDivLoss()(torch.softmax(a, 1), t)', 'return nn.KLDivLoss()(torch.log_softmax(a, 1), t)'),
    ],
)
def test_tnl102_flagged_and_fixed_only_with_unsafe_fixes(body, after):
    code = src(body)
    assert lint(code, "TNL102") == [("TNL102", 7)]
    assert fixed(code, "TNL102", unsafe=False) == code
    assert fixed(code, "TNL102", unsafe=True) == src(after)


@pytest.mark.parametrize(
    "body",
    ["return F.kl_div(F.log_softmax(a, -1), t)", "return F.kl_div(a, t)", "return F.kl_div(torch.log(t + 1e-8), b)"],
)
def test_tnl102_clean(body):
    assert lint(src(body), "TNL102") == []


@pytest.mark.parametrize(
    "body",
    [
        # a temperature does not bring a gradient back
        "with torch.no_grad():\n    tl = teacher(x)\nreturn F.kl_div(a, F.softmax(tl / 2.0, 1))",
        "with torch.no_grad():\n    tl = teacher(x)\nT = 4.0\nreturn F.kl_div(a, F.softmax(tl / T, 1))",
        "return F.kl_div(a, F.softmax(t.detach() / x.temperature, 1))",
        "return F.kl_div(a, F.softmax(-t.detach(), 1))",
        # a target made from data
        "y = torch.tensor(x)\nreturn F.kl_div(a, y.softmax(-1))",
    ],
)
def test_tnl101_detached_through_arithmetic_and_data(body):
    assert lint(src(body), "TNL101") == []


def test_tnl101_a_computed_side_still_carries_gradients():
    body = "with torch.no_grad():\n    tl = teacher(x)\nreturn F.kl_div(a, F.softmax(tl / b.sum(), 1))"
    assert lint(src(body), "TNL101") == [("TNL101", 9)]
