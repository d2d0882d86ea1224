"""TNL101 / TNL102: KL divergence with probabilities where PyTorch wants log-probabilities."""

import textwrap

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Silent
from torchnumlint.engine import lint_text
from torchnumlint.rules.registry import registry

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"


def src(body):
    return HEAD + "def f(a, b, t, x, teacher):\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n"


# (body, finding line within the body, fixed body or None when no rewrite is offered)
FLAGGED = [
    (
        'return F.kl_div(F.log_softmax(a, -1), F.softmax(b, -1), reduction="batchmean")',
        1,
        'return F.kl_div(F.log_softmax(a, -1), F.log_softmax(b, -1), reduction="batchmean", log_target=True)',
    ),
    # the method form
    (
        'return F.kl_div(a.log_softmax(-1), b.softmax(-1), reduction="batchmean")',
        1,
        'return F.kl_div(a.log_softmax(-1), b.log_softmax(-1), reduction="batchmean", log_target=True)',
    ),
    # torch.softmax and torch.nn.functional spelled out
    (
        "return torch.nn.functional.kl_div(a, torch.softmax(b, dim=1))",
        1,
        "return torch.nn.functional.kl_div(a, torch.log_softmax(b, dim=1), log_target=True)",
    ),
    # explicit log_target=False is replaced
    (
        'return F.kl_div(a, F.softmax(b, 1), reduction="sum", log_target=False)',
        1,
        'return F.kl_div(a, F.log_softmax(b, 1), reduction="sum", log_target=True)',
    ),
    # keyword arguments in any order
    (
        'return F.kl_div(target=F.softmax(b, dim=-1), input=a, reduction="batchmean")',
        1,
        'return F.kl_div(target=F.log_softmax(b, dim=-1), input=a, reduction="batchmean", log_target=True)',
    ),
    # through a name read only here: the assignment is rewritten
    (
        'p = F.softmax(b / 2.0, dim=-1)\nreturn F.kl_div(a, p, reduction="batchmean")',
        2,
        'p = F.log_softmax(b / 2.0, dim=-1)\nreturn F.kl_div(a, p, reduction="batchmean", log_target=True)',
    ),
    # nn.KLDivLoss called inline
    (
        'return nn.KLDivLoss(reduction="batchmean")(a, F.softmax(b, -1))',
        1,
        'return nn.KLDivLoss(reduction="batchmean", log_target=True)(a, F.log_softmax(b, -1))',
    ),
    # nn.KLDivLoss through a local name: reported, the constructor may be shared, no rewrite
    ('crit = nn.KLDivLoss(reduction="batchmean")\nreturn crit(a, F.softmax(b, -1))', 2, None),
    # nested inside a larger expression, multiplied by T**2
    (
        'return 4.0 * F.kl_div(F.log_softmax(a / 2, 1), F.softmax(b / 2, 1), reduction="batchmean") + 1',
        1,
        'return 4.0 * F.kl_div(F.log_softmax(a / 2, 1), F.log_softmax(b / 2, 1), reduction="batchmean", log_target=True) + 1',
    ),
    # multi-line call
    (
        "return F.kl_div(\n    F.log_softmax(a, -1),\n    F.softmax(b, -1),\n)",
        3,
        "return F.kl_div(\n    F.log_softmax(a, -1),\n    F.log_softmax(b, -1),\n    log_target=True,\n)",
    ),
    # a name read twice: reported without a rewrite
    ("q = F.softmax(b, -1)\nloss = F.kl_div(a, q)\nreturn loss, q", 2, None),
    # **kwargs may hold log_target: reported without a rewrite
    ("kw = {}\nreturn F.kl_div(a, F.softmax(b, -1), **kw)", 2, None),
]


CLEAN = [
    # already log-space
    "return F.kl_div(F.log_softmax(a, -1), F.log_softmax(b, -1), log_target=True)",
    # detached target, either way round
    "return F.kl_div(a, F.softmax(b, -1).detach())",
    "return F.kl_div(a, F.softmax(b.detach(), -1))",
    "return F.kl_div(a, F.softmax(t.data, -1))",
    # computed under no_grad in the same function
    "with torch.no_grad():\n    p = F.softmax(teacher(x), -1)\nreturn F.kl_div(a, p)",
    "with torch.no_grad():\n    logits = teacher(x)\nreturn F.kl_div(a, F.softmax(logits / 2.0, -1))",
    # the whole call under no_grad / inference_mode
    "with torch.inference_mode():\n    return F.kl_div(a, F.softmax(b, -1))",
    # a target that is not a softmax
    "return F.kl_div(a, t)",
    "return F.kl_div(a, torch.sigmoid(b))",
    # a reassignment between the softmax and the use breaks the chain
    "p = F.softmax(b, -1)\np = p.detach()\nreturn F.kl_div(a, p)",
    # log_target=True with a softmax is another mistake, not this one
    "return F.kl_div(a, F.softmax(b, -1), log_target=True)",
    # a kl_div that is not torch's
    "from mylib import kl_div\nreturn kl_div(a, F.softmax(b, -1))",
    # another loss module
    "return nn.MSELoss()(a, F.softmax(b, -1))",
]


TNL101_CASES = harness.params(
    "TNL101",
    [Flagged(src(body), (6 + line,), src(after) if after else None) for body, line, after in FLAGGED],
    [Silent(src(body)) for body in CLEAN],
)


@pytest.mark.parametrize("code, case", TNL101_CASES)
def test_tnl101_table(code, case):
    harness.check(code, case)


def aliased(head, call):
    """A one-line function returning `call` under the import line `head`."""
    return f"{head}\ndef f(a, b):\n    return {call}\n"


# every import form: the fix keeps the user's spelling (an imported name's module gets an alias)
ALIASES = [
    Flagged(aliased(head, call), (3,), aliased(fixed_head, after))
    for head, call, fixed_head, after in [
        (
            "import torch.nn.functional as F",
            "F.kl_div(a, F.softmax(b, -1))",
            "import torch.nn.functional as F",
            "F.kl_div(a, F.log_softmax(b, -1), log_target=True)",
        ),
        (
            "from torch.nn import functional as F",
            "F.kl_div(a, F.softmax(b, -1))",
            "from torch.nn import functional as F",
            "F.kl_div(a, F.log_softmax(b, -1), log_target=True)",
        ),
        (
            "from torch import nn",
            "nn.functional.kl_div(a, nn.functional.softmax(b, -1))",
            "from torch import nn",
            "nn.functional.kl_div(a, nn.functional.log_softmax(b, -1), log_target=True)",
        ),
        (
            "from torch.nn.functional import kl_div as kd, softmax as sm",
            "kd(a, sm(b, -1))",
            "from torch.nn.functional import kl_div as kd, softmax as sm\nimport torch.nn.functional as F",
            "kd(a, F.log_softmax(b, -1), log_target=True)",
        ),
        (
            "import torch",
            "torch.nn.functional.kl_div(a, torch.special.softmax(b, -1))",
            "import torch",
            "torch.nn.functional.kl_div(a, torch.special.log_softmax(b, -1), log_target=True)",
        ),
        (
            "import torch.nn as tnn",
            "tnn.KLDivLoss()(a, b.softmax(-1))",
            "import torch.nn as tnn",
            "tnn.KLDivLoss(log_target=True)(a, b.log_softmax(-1))",
        ),
        (
            "from torch.nn import KLDivLoss",
            "KLDivLoss()(a, b.softmax(-1))",
            "from torch.nn import KLDivLoss",
            "KLDivLoss(log_target=True)(a, b.log_softmax(-1))",
        ),
    ]
] + [
    # a criterion on self is followed; its constructor is elsewhere, so no rewrite
    Flagged(
        """
        import torch.nn as nn
        class Distill(nn.Module):
            def __init__(self):
                super().__init__()
                self.kl = nn.KLDivLoss(reduction="batchmean")
            def forward(self, s, t):
                return self.kl(s.log_softmax(-1), t.softmax(-1))
    """,
        (8,),
    ),
    # positional log_target is set in place, in the function and in the module
    Flagged(
        src('return F.kl_div(a, F.softmax(b, -1), None, None, "sum", False)'),
        (7,),
        src('return F.kl_div(a, F.log_softmax(b, -1), None, None, "sum", True)'),
    ),
    Flagged(
        src('return nn.KLDivLoss(None, None, "sum", False)(a, F.softmax(b, -1))'),
        (7,),
        src('return nn.KLDivLoss(None, None, "sum", True)(a, F.log_softmax(b, -1))'),
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL101", ALIASES))
def test_tnl101_spellings(code, case):
    harness.check(code, case)


TNL102_FLAGGED = [
    ('return F.kl_div(F.softmax(a, -1), t, reduction="batchmean")', 'return F.kl_div(F.log_softmax(a, -1), t, reduction="batchmean")'),
    ("return F.kl_div(a.softmax(dim=1), t)", "return F.kl_div(a.log_softmax(dim=1), t)"),
    ("return nn.KLDivLoss()(torch.softmax(a, 1), t)", "return nn.KLDivLoss()(torch.log_softmax(a, 1), t)"),
]
TNL102_CLEAN = ["return F.kl_div(F.log_softmax(a, -1), t)", "return F.kl_div(a, t)", "return F.kl_div(torch.log(t + 1e-8), b)"]


# the harness checks that plain --fix leaves the unsafe fix alone and --unsafe-fixes applies it
@pytest.mark.parametrize(
    "code, case",
    harness.params(
        "TNL102",
        [Flagged(src(body), (7,), src(after)) for body, after in TNL102_FLAGGED],
        [Silent(src(body)) for body in TNL102_CLEAN],
    ),
)
def test_tnl102_table(code, case):
    harness.check(code, case)


DETACHED_THROUGH_ARITHMETIC = [
    # a temperature does not bring a gradient back
    Silent(src("with torch.no_grad():\n    tl = teacher(x)\nreturn F.kl_div(a, F.softmax(tl / 2.0, 1))")),
    Silent(src("with torch.no_grad():\n    tl = teacher(x)\nT = 4.0\nreturn F.kl_div(a, F.softmax(tl / T, 1))")),
    Silent(src("return F.kl_div(a, F.softmax(t.detach() / x.temperature, 1))")),
    Silent(src("return F.kl_div(a, F.softmax(-t.detach(), 1))")),
    # a target made from data
    Silent(src("y = torch.tensor(x)\nreturn F.kl_div(a, y.softmax(-1))")),
]

# a computed side still carries gradients
COMPUTED_SIDE = [
    Flagged(
        src("with torch.no_grad():\n    tl = teacher(x)\nreturn F.kl_div(a, F.softmax(tl / b.sum(), 1))"),
        (9,),
        src("with torch.no_grad():\n    tl = teacher(x)\nreturn F.kl_div(a, F.log_softmax(tl / b.sum(), 1), log_target=True)"),
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL101", COMPUTED_SIDE, DETACHED_THROUGH_ARITHMETIC))
def test_tnl101_detached_through_arithmetic_and_data(code, case):
    harness.check(code, case)


# ---------------------------------------------------------------------------------------------
# Where no gradient reaches the target's logits, the NaN of its underflow is never computed

NO_GRADIENT = {
    "a-teacher-model": """\
        import torch.nn as nn
        import torch.nn.functional as F

        class Distiller(nn.Module):
            def forward(self, x, T=4.0):
                s = self.student(x)
                t = self.teacher(x)
                return F.kl_div(F.log_softmax(s / T, -1), F.softmax(t / T, -1), reduction="batchmean") * T * T
        """,
    "teacher-logits-by-name": """\
        import torch.nn.functional as F

        def kd_loss(student_logits, teacher_logits, T):
            p = F.softmax(teacher_logits.float() / T, dim=-1)
            return F.kl_div(F.log_softmax(student_logits / T, dim=-1), p, reduction="batchmean")
        """,
    "teacher-output-field": """\
        import torch.nn.functional as F

        def training_step(model, teacher, batch):
            out_teacher = teacher(**batch)
            logits = model(**batch).logits
            return F.kl_div(F.log_softmax(logits, -1), F.softmax(out_teacher.logits, -1), reduction="batchmean")
        """,
    "every-caller-passes-a-detached-target": """\
        import torch
        import torch.nn.functional as F

        def consistency(pred_logits, target_logits, T=1.0):
            return F.kl_div(F.log_softmax(pred_logits / T, -1), F.softmax(target_logits / T, -1), reduction="batchmean")

        class Trainer:
            def step(self, x, x_aug):
                with torch.no_grad():
                    ref = self.ema(x)
                return consistency(self.model(x_aug), ref)

            def step_plain(self, x):
                out = self.model(x)
                return consistency(out, out.detach(), T=2.0)

            def step_kw(self, x):
                return consistency(target_logits=self.model(x).detach(), pred_logits=self.model(x))
        """,
    "a-method-whose-callers-detach": """\
        import torch.nn as nn
        import torch.nn.functional as F

        class Loss(nn.Module):
            def kl(self, a, b):
                return F.kl_div(a.log_softmax(-1), b.softmax(-1), reduction="batchmean")

            def forward(self, a, b):
                return self.kl(a, b.detach()) + self.kl(b, a.detach())
        """,
    "read-as-a-number": """\
        import torch.nn.functional as F

        def log_divergence(a, b, history):
            history.append(F.kl_div(a.log_softmax(-1), b.softmax(-1), reduction="batchmean").item())
        """,
}


@pytest.mark.parametrize("code, case", harness.params("TNL101", silent=[Silent(c) for c in NO_GRADIENT.values()]))
def test_tnl101_no_gradient_reaches_the_target(code, case):
    harness.check(code, case)


# a peer in mutual learning
GRADIENT = [
    Flagged(
        """\
        import torch.nn.functional as F

        def mutual(own_logits, peer_logits):
            return F.kl_div(F.log_softmax(own_logits, -1), F.softmax(peer_logits, -1), reduction="batchmean")

        def train_step(net_a, net_b, x):
            a, b = net_a(x), net_b(x)
            return mutual(a, b) + mutual(b, a)
        """,
        (4,),
        """\
        import torch.nn.functional as F

        def mutual(own_logits, peer_logits):
            return F.kl_div(F.log_softmax(own_logits, -1), F.log_softmax(peer_logits, -1), reduction="batchmean", log_target=True)

        def train_step(net_a, net_b, x):
            a, b = net_a(x), net_b(x)
            return mutual(a, b) + mutual(b, a)
        """,
    ),
    # one caller passes a live target
    Flagged(
        """\
        import torch.nn.functional as F

        def consistency(pred, target):
            return F.kl_div(F.log_softmax(pred, -1), F.softmax(target, -1), reduction="batchmean")

        def step(model, x, x_aug):
            out = model(x)
            return consistency(model(x_aug), out.detach()) + consistency(out, model(x_aug))
        """,
        (4,),
        """\
        import torch.nn.functional as F

        def consistency(pred, target):
            return F.kl_div(F.log_softmax(pred, -1), F.log_softmax(target, -1), reduction="batchmean", log_target=True)

        def step(model, x, x_aug):
            out = model(x)
            return consistency(model(x_aug), out.detach()) + consistency(out, model(x_aug))
        """,
    ),
    # no caller in the file
    Flagged(
        """\
        import torch.nn.functional as F

        def symmetric_kl(p_logits, q_logits):
            return F.kl_div(F.log_softmax(p_logits, -1), F.softmax(q_logits, -1), reduction="sum")
        """,
        (4,),
        """\
        import torch.nn.functional as F

        def symmetric_kl(p_logits, q_logits):
            return F.kl_div(F.log_softmax(p_logits, -1), F.log_softmax(q_logits, -1), reduction="sum", log_target=True)
        """,
    ),
    # a teacher scaled by a computed value
    Flagged(
        """\
        import torch.nn.functional as F

        def loss(student_logits, teacher_logits, w):
            return F.kl_div(F.log_softmax(student_logits, -1), F.softmax(w.sum() * teacher_logits + student_logits, -1))
        """,
        (4,),
        """\
        import torch.nn.functional as F

        def loss(student_logits, teacher_logits, w):
            return F.kl_div(F.log_softmax(student_logits, -1), F.log_softmax(w.sum() * teacher_logits + student_logits, -1), log_target=True)
        """,
    ),
    # an unrelated call of the same name does not silence it
    Flagged(
        """\
        import torch.nn.functional as F

        def distill(student_logits, target_logits):
            return F.kl_div(F.log_softmax(student_logits, -1), F.softmax(target_logits, -1), reduction="batchmean")

        class Logger:
            def record(self, log, a, b):
                log.distill(a.detach(), b.detach())
        """,
        (4,),
        """\
        import torch.nn.functional as F

        def distill(student_logits, target_logits):
            return F.kl_div(F.log_softmax(student_logits, -1), F.log_softmax(target_logits, -1), reduction="batchmean", log_target=True)

        class Logger:
            def record(self, log, a, b):
                log.distill(a.detach(), b.detach())
        """,
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL101", GRADIENT))
def test_tnl101_a_gradient_reaches_the_target(code, case):
    harness.check(code, case)


def test_tnl101_tnl102_messages_say_a_rewritten_name_holds_log_probabilities():
    rules = [registry()["TNL101"], registry()["TNL102"]]
    code = src('q = F.softmax(b, -1)\nr = F.softmax(a, -1)\nreturn F.kl_div(r, q, reduction="batchmean")')
    messages = {f.code: f.message for f in lint_text("m.py", code, rules)}
    assert messages["TNL101"].endswith("(the fix makes `q` hold log-probabilities)")
    assert messages["TNL102"].endswith("(the fix makes `r` hold log-probabilities)")
    inline = src("return F.kl_div(a, F.softmax(b, -1))")
    assert "hold log-probabilities" not in lint_text("m.py", inline, rules)[0].message


MODULE_LEVEL_LOSS = """\
        import torch.nn as nn
        import torch.nn.functional as F

        kl = nn.KLDivLoss(reduction="batchmean")


        def mutual(a, b):
            return kl(F.log_softmax(a, -1), F.softmax(b, -1))
        """


# a module-level loss instance counts like a local one (reported; the constructor may be shared, no
# rewrite); bound twice, it is not followed
@pytest.mark.parametrize(
    "code, case",
    harness.params(
        "TNL101",
        [Flagged(MODULE_LEVEL_LOSS, (8,))],
        [Silent(MODULE_LEVEL_LOSS.replace("\n\n\n        def", "\n        kl = None\n\n\n        def"))],
    ),
)
def test_tnl101_a_module_level_loss_instance_counts_like_a_local_one(code, case):
    harness.check(code, case)


# Gradient flow, not names: a target named like a teacher but computed by the student's own model
# (prompt tuning's self-distillation: the same weights with and without the prompt) carries the
# gradient of the parameters both share; a helper whose callers in the file pass such logits too.
SELF_DISTILL = """\
    import torch
    import torch.nn.functional as F


    def self_distill(model, prompt, x, T=2.0):
        student_logits = model(torch.cat([prompt, x], 1))
        teacher_logits = model(x)
        return F.kl_div(F.log_softmax(student_logits / T, -1), F.softmax(teacher_logits / T, -1), reduction="batchmean")
    """
HELPER_KD = """\
    import torch.nn.functional as F


    def kd_loss(student_logits, teacher_logits):
        return F.kl_div(F.log_softmax(student_logits, -1), F.softmax(teacher_logits, -1), reduction="batchmean")


    def step(model, prompt, x):
        return kd_loss(model(prompt + x), model(x))
    """
SEPARATE_TEACHER = """\
    import torch
    import torch.nn.functional as F


    def distill(student, teacher, x):
        teacher_logits = teacher(x)
        return F.kl_div(F.log_softmax(student(x), -1), F.softmax(teacher_logits, -1), reduction="batchmean")


    def kd_loss(student_logits, teacher_logits):
        return F.kl_div(F.log_softmax(student_logits, -1), F.softmax(teacher_logits, -1), reduction="batchmean")


    def step(model, teacher, x):
        with torch.no_grad():
            t = teacher(x)
        return kd_loss(model(x), t)
    """


@pytest.mark.parametrize(
    "code, case",
    harness.params(
        "TNL101",
        [
            Flagged(
                SELF_DISTILL,
                (8,),
                SELF_DISTILL.replace(
                    'F.softmax(teacher_logits / T, -1), reduction="batchmean")',
                    'F.log_softmax(teacher_logits / T, -1), reduction="batchmean", log_target=True)',
                ),
            ),
            Flagged(
                HELPER_KD,
                (5,),
                HELPER_KD.replace(
                    'F.softmax(teacher_logits, -1), reduction="batchmean")',
                    'F.log_softmax(teacher_logits, -1), reduction="batchmean", log_target=True)',
                ),
            ),
        ],
        [Silent(SEPARATE_TEACHER)],
    ),
)
def test_tnl101_a_teacher_by_name_that_shares_the_students_model_carries_gradients(code, case):
    harness.check(code, case)


# A KL over a head of 2 or 3 classes is no exception: a softmax entry is exactly 0 in float32 once
# its logit trails the row's maximum by 103.97, the same gap for 2, 3, 1000 or 32000 classes
# (measured, torch 2.13 CPU; bfloat16 92.75 for every count), and the KL's gradient is NaN past
# it. The class count bounds nothing; only the logits' spread decides, so the rule does not ask it.
FEW_CLASSES = [
    Flagged(
        HEAD + "class PairConsistency(nn.Module):\n"
        "    def __init__(self, dim):\n"
        "        super().__init__()\n"
        "        self.head = nn.Linear(dim, 2)\n"
        "\n"
        "    def forward(self, x, noisy):\n"
        "        clean = self.head(x)\n"
        "        return F.kl_div(F.log_softmax(self.head(noisy), -1), F.softmax(clean, -1), reduction='batchmean')\n",
        (13,),
        HEAD + "class PairConsistency(nn.Module):\n"
        "    def __init__(self, dim):\n"
        "        super().__init__()\n"
        "        self.head = nn.Linear(dim, 2)\n"
        "\n"
        "    def forward(self, x, noisy):\n"
        "        clean = self.head(x)\n"
        "        return F.kl_div(F.log_softmax(self.head(noisy), -1), F.log_softmax(clean, -1), reduction='batchmean', log_target=True)\n",
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL101", FEW_CLASSES))
def test_tnl101_a_head_of_two_classes_underflows_at_the_same_gap(code, case):
    harness.check(code, case)
