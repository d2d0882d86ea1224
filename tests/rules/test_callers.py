"""Callers in other files (issue 16 item 2): a helper's parameter is what its callers anywhere in
the project pass. The call is found through an imported name, a module attribute, a relative
import, an instance of a project class (`crit(a, b)` reaches `forward`, `obj.method(x)`), and a
module kept in `self.attr`; the finding names the caller as `file:line`. Look-alikes: callers
that pass a real teacher (another model, under no_grad, detached), a function of the same name
in another module, and a caller whose argument is the default."""

import textwrap
from pathlib import Path

import pytest

from tests.rules import harness
from tests.rules.harness import Flagged, Project, Silent

KL_HELPER = """\
    import torch.nn.functional as F


    def consistency_kl(student_logits, teacher_logits, T=1.0):
        p = F.softmax(teacher_logits / T, dim=-1)
        return F.kl_div(F.log_softmax(student_logits / T, dim=-1), p, reduction="batchmean")
    """
KL_HELPER_FIXED = """\
    import torch.nn.functional as F


    def consistency_kl(student_logits, teacher_logits, T=1.0):
        p = F.log_softmax(teacher_logits / T, dim=-1)
        return F.kl_div(F.log_softmax(student_logits / T, dim=-1), p, reduction="batchmean", log_target=True)
    """


def _train(import_line: str, call: str, teacher: str = "model(clean)") -> str:
    """A prompt-tuning step that computes both views with `model` (the target is named like a
    teacher's but carries the prompt's gradient) and calls the KL helper as `call`."""
    return f"""\
    import torch
    {import_line}


    def train_step(model, optimizer, clean, augmented):
        teacher_logits = {teacher}
        student_logits = model(augmented)
        loss = {call}
        loss.backward()
        optimizer.step()
        return loss
    """


LOSS_MODULE = """\
    import torch.nn as nn
    import torch.nn.functional as F


    class ConsistencyLoss(nn.Module):
        def __init__(self, T=2.0):
            super().__init__()
            self.T = T

        def forward(self, student_logits, teacher_logits):
            q = F.softmax(teacher_logits / self.T, dim=-1)
            return F.kl_div(F.log_softmax(student_logits / self.T, dim=-1), q, reduction="batchmean")
    """
LOSS_MODULE_FIXED = LOSS_MODULE.replace("q = F.softmax", "q = F.log_softmax").replace(
    'reduction="batchmean")', 'reduction="batchmean", log_target=True)'
)

FLAGGED = [
    # the seed's shape: `from helpers import f; f(x)`
    Project(
        {
            "losses/kl.py": KL_HELPER,
            "train.py": _train("from losses.kl import consistency_kl", "consistency_kl(student_logits, teacher_logits)"),
        },
        lines={"losses/kl.py": (6,)},
        fixed={"losses/kl.py": KL_HELPER_FIXED},
        message="`teacher_logits` is passed with a gradient by the call at train.py:8",
    ),
    # `import helpers; helpers.f(x)`, keywords at the call, a temperature
    Project(
        {
            "helpers.py": KL_HELPER,
            "scripts/tune.py": _train(
                "import helpers", "helpers.consistency_kl(teacher_logits=teacher_logits, student_logits=student_logits, T=2.0)"
            ),
        },
        lines={"helpers.py": (6,)},
        fixed={"helpers.py": KL_HELPER_FIXED},
        message="scripts/tune.py:8",
    ),
    # a relative import inside a package, under an alias
    Project(
        {
            "pkg/__init__.py": "",
            "pkg/kl.py": KL_HELPER,
            "pkg/engine.py": _train("from .kl import consistency_kl as ckl", "ckl(student_logits, teacher_logits)"),
        },
        lines={"pkg/kl.py": (6,)},
        fixed={"pkg/kl.py": KL_HELPER_FIXED},
        message="pkg/engine.py:8",
    ),
    # an instance of a project loss module: `crit(a, b)` reaches `forward` (self is bound)
    Project(
        {
            "models/losses.py": LOSS_MODULE,
            "train.py": """\
            from models.losses import ConsistencyLoss

            crit = ConsistencyLoss(T=4.0)


            def train_step(model, optimizer, clean, augmented):
                teacher_logits = model(clean)
                loss = crit(model(augmented), teacher_logits)
                loss.backward()
                optimizer.step()
            """,
        },
        lines={"models/losses.py": (12,)},
        fixed={"models/losses.py": LOSS_MODULE_FIXED},
        message="train.py:8",
    ),
    # the loss module kept in `self.criterion` of a trainer in another file
    Project(
        {
            "models/losses.py": LOSS_MODULE,
            "trainer.py": """\
            import torch
            from models.losses import ConsistencyLoss


            class PromptTrainer:
                def __init__(self, model):
                    self.model = model
                    self.criterion = ConsistencyLoss()

                def step(self, clean, augmented):
                    teacher_logits = self.model(clean)
                    return self.criterion(self.model(augmented), teacher_logits)
            """,
        },
        lines={"models/losses.py": (12,)},
        fixed={"models/losses.py": LOSS_MODULE_FIXED},
        message="trainer.py:12",
    ),
    # a method of a local instance: `obj.method(x)`
    Project(
        {
            "objectives.py": """\
            import torch.nn.functional as F


            class Objectives:
                def consistency(self, student_logits, teacher_logits):
                    return F.kl_div(F.log_softmax(student_logits, -1), F.softmax(teacher_logits, -1), reduction="sum")
            """,
            "run.py": """\
            from objectives import Objectives


            def step(model, x, x_aug):
                objectives = Objectives()
                return objectives.consistency(model(x_aug), model(x))
            """,
        },
        lines={"objectives.py": (6,)},
        fixed={
            "objectives.py": """\
            import torch.nn.functional as F


            class Objectives:
                def consistency(self, student_logits, teacher_logits):
                    return F.kl_div(F.log_softmax(student_logits, -1), F.log_softmax(teacher_logits, -1), reduction="sum", log_target=True)
            """
        },
        message="run.py:6",
    ),
    # two callers: a real teacher in one, the student's own model in the other; the second is named
    Project(
        {
            "helpers.py": KL_HELPER,
            "distill.py": _train(
                "from helpers import consistency_kl", "consistency_kl(student_logits, teacher_logits)", teacher="teacher(clean).detach()"
            ),
            "tune.py": _train("from helpers import consistency_kl", "consistency_kl(student_logits, teacher_logits)"),
        },
        lines={"helpers.py": (6,)},
        fixed={"helpers.py": KL_HELPER_FIXED},
        message="tune.py:8",
    ),
]

# a method of a base class in another file, called through `self.` in a subclass
BASE = """\
    import torch.nn as nn
    import torch.nn.functional as F


    class DistillBase(nn.Module):
        def consistency(self, student_logits, teacher_logits):
            return F.kl_div(F.log_softmax(student_logits, -1), F.softmax(teacher_logits, -1), reduction="batchmean")
    """
FLAGGED.append(
    Project(
        {
            "base.py": BASE,
            "prompt.py": """\
        from base import DistillBase


        class PromptTuner(DistillBase):
            def training_step(self, clean, augmented):
                teacher_logits = self.model(clean)
                return self.consistency(self.model(augmented), teacher_logits)
        """,
        },
        lines={"base.py": (7,)},
        fixed={
            "base.py": BASE.replace(
                'F.softmax(teacher_logits, -1), reduction="batchmean")',
                'F.log_softmax(teacher_logits, -1), reduction="batchmean", log_target=True)',
            )
        },
        message="prompt.py:7",
    )
)

SILENT = [
    # a different model under no_grad: no gradient reaches the target
    Project(
        {
            "losses/kl.py": KL_HELPER,
            "train.py": """\
        import torch
        from losses.kl import consistency_kl


        def distill_step(student, teacher, x):
            with torch.no_grad():
                teacher_logits = teacher(x)
            return consistency_kl(student(x), teacher_logits)
        """,
        }
    ),
    # the student's own model, detached at the caller
    Project(
        {
            "helpers.py": KL_HELPER,
            "train.py": _train("import helpers", "helpers.consistency_kl(student_logits, teacher_logits)", teacher="model(clean).detach()"),
        }
    ),
    # a teacher module beside the student in a trainer: another model, named so
    Project(
        {
            "models/losses.py": LOSS_MODULE,
            "trainer.py": """\
        from models.losses import ConsistencyLoss


        class Distiller:
            def __init__(self, student, teacher):
                self.student, self.teacher = student, teacher
                self.criterion = ConsistencyLoss()

            def step(self, x):
                return self.criterion(self.student(x), self.teacher(x))
        """,
        }
    ),
    # a function of the same name in another module is not a call of the helper
    Project(
        {
            "helpers.py": KL_HELPER,
            "other.py": "def consistency_kl(a, b):\n    return (a - b).abs().mean()\n",
            "train.py": _train("from other import consistency_kl", "consistency_kl(student_logits, teacher_logits)"),
        }
    ),
    # a local class of the same name in the caller's file shadows nothing of the helper's file
    Project(
        {
            "models/losses.py": LOSS_MODULE,
            "train.py": """\
        import torch.nn as nn


        class ConsistencyLoss(nn.Module):
            def forward(self, a, b):
                return (a - b).pow(2).mean()


        def step(model, x, x_aug):
            crit = ConsistencyLoss()
            return crit(model(x_aug), model(x))
        """,
        }
    ),
]


# an instance of a loss module in its own file: `crit(a, b)` beside the class reaches `forward`
OWN_FILE = (
    LOSS_MODULE
    + """\


    def train_step(model, clean, augmented):
        crit = ConsistencyLoss()
        teacher_logits = model(clean)
        return crit(model(augmented), teacher_logits)
    """
)
OWN = [
    Flagged(
        OWN_FILE,
        (12,),
        OWN_FILE.replace("q = F.softmax", "q = F.log_softmax").replace('reduction="batchmean")', 'reduction="batchmean", log_target=True)'),
        message="line 18",
    ),
    Silent(OWN_FILE.replace("teacher_logits = model(clean)", "teacher_logits = model(clean).detach()")),
    Silent(
        OWN_FILE.replace("def train_step(model,", "def train_step(model, teacher,").replace(
            "teacher_logits = model(clean)", "teacher_logits = teacher(clean)"
        )
    ),
]


@pytest.mark.parametrize(
    "code, case",
    harness.params(
        "TNL101",
        flagged=[c for c in OWN if isinstance(c, Flagged)],
        silent=[c for c in OWN if isinstance(c, Silent)],
        projects=FLAGGED + SILENT,
    ),
)
def test_tnl101_callers_in_other_files(code, case):
    harness.check(code, case)


# A mask parameter is what the callers in other files pass: a selection from one is evidence
MASK_HELPER = """\
    import torch


    def masked_mean(x, mask):
        return (x * mask).sum(0) / mask.sum(0)
    """

MASKS = [
    Project(
        {
            "utils/pooling.py": MASK_HELPER,
            "heads.py": """\
        from utils.pooling import masked_mean


        def class_means(feats, labels, num_classes):
            return [masked_mean(feats, (labels == c).float()[:, None]) for c in range(num_classes)]
        """,
        },
        lines={"utils/pooling.py": (5,)},
        message="passed to `masked_mean` by the call (heads.py:5)",
    ),
    # padding masks from every caller: no evidence
    Project(
        {
            "utils/pooling.py": MASK_HELPER,
            "encoder.py": """\
        from utils import pooling


        def pooled(h, attention_mask):
            return pooling.masked_mean(h, attention_mask[..., None])
        """,
        }
    ),
]


@pytest.mark.parametrize("code, case", harness.params("TNL201", projects=MASKS))
def test_tnl201_mask_callers_in_other_files(code, case):
    harness.check(code, case)


# Through a run with the cache: the helper's finding rests on the caller's file, so a change
# there (the target detached) re-lints the helper; a pre-commit run on the helper alone reads
# the caller from the disk.
def test_a_run_judges_the_callers_file_and_the_cache_follows_it(tmp_path):
    from tests.test_cache import lint, project
    from torchnumlint.config import Settings
    from torchnumlint.runner import Options, run

    train = textwrap.dedent(_train("from helpers import consistency_kl", "consistency_kl(student_logits, teacher_logits)"))
    folder = project(tmp_path, helpers=textwrap.dedent(KL_HELPER), train=train)
    found = [(Path(f.path).name, f.line, f.code) for f in lint(folder).findings]
    assert found == [("helpers.py", 6, "TNL101")]
    assert "train.py:8" in lint(folder).findings[0].message  # from the cache, the same words
    alone = run([str(folder / "helpers.py")], Settings(), options=Options(cache=False))
    assert [(Path(f.path).name, f.line) for f in alone.findings] == [("helpers.py", 6)]
    (folder / "train.py").write_text(train.replace("model(clean)", "model(clean).detach()"))
    assert lint(folder).findings == []
