"""What a helper, a method or a module instance produces (`rules/producers.py`, `summaries.py`).

Each source below uses what a call produced in one `torch.log(...)` (or `torch.exp`,
`F.nll_loss`), the site a rule would ask about: the table says what `call_kind` answers for that argument, as (kind, dim), or
None where the producer is not known to give one kind.
"""

import pickle
import textwrap

import libcst as cst
import pytest

from torchnumlint.config import Config
from torchnumlint.context import FileContext
from torchnumlint.engine import parse
from torchnumlint.index import ProjectIndex, build_index
from torchnumlint.rules.registry import registry
from torchnumlint.rules.producers import call_kind
from torchnumlint.runner import Options, run
from torchnumlint.walk import Visitor


PROBED = ("torch.log", "torch.exp", "torch.nn.functional.nll_loss")


def _answers(source: str, path: str = "model.py", index: ProjectIndex = None):
    """(kind, dim) or None for the first argument of each `torch.log`, `torch.exp` and
    `F.nll_loss` call in `source`."""
    text = textwrap.dedent(source)
    module = parse(text)
    ctx = FileContext(path, text, module, index if index is not None else ProjectIndex.empty())
    found = []

    class _Probe(Visitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            ctx.stack.append(node)
            if isinstance(node, cst.Call) and ctx.qualname(node.func) in PROBED:
                produced = call_kind(ctx, node.args[0].value)
                found.append(None if produced is None else (produced.kind, produced.dim))
            return True

        def on_leave(self, original_node: cst.CSTNode) -> None:
            ctx.stack.pop()

    _Probe().walk(module)
    return found


def _one(source: str, **kwargs):
    found = _answers(source, **kwargs)
    assert len(found) == 1, found
    return found[0]


PRODUCING = [
    pytest.param(
        """
        import torch
        import torch.nn.functional as F

        def class_probs(logits):
            p = F.softmax(logits, dim=-1)
            return p

        def nll(logits, target):
            probs = class_probs(logits)
            return -torch.log(probs).gather(1, target[:, None]).mean()
        """,
        ("softmax", -1),
        id="helper-through-a-name",
    ),
    pytest.param(
        """
        import torch
        from torch import nn

        class Classifier(nn.Module):
            def __init__(self, dim, classes):
                super().__init__()
                self.fc = nn.Linear(dim, classes)

            def probs(self, x):
                return self.fc(x).softmax(1)

            def loss(self, x, y):
                return -(y * torch.log(self.probs(x))).sum(1).mean()
        """,
        ("softmax", 1),
        id="method-of-the-class",
    ),
    pytest.param(
        """
        import torch
        import torch.nn as nn

        class Base(nn.Module):
            def scores(self, h):
                return torch.sigmoid(self.proj(h))

        class Tagger(Base):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(16, 4)

            def forward(self, h, y):
                p = self.scores(h)
                return -(y * torch.log(p) + (1 - y) * torch.log1p(-p)).mean()
        """,
        ("sigmoid", None),
        id="method-of-a-base-class",
    ),
    pytest.param(
        """
        import torch
        import torch.nn as nn

        class Attention(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.qk = nn.Linear(dim, dim)
                self.softmax = nn.Softmax(dim=-1)

            def forward(self, x):
                attn = self.softmax(self.qk(x) @ x.transpose(-2, -1))
                entropy = -(attn * torch.log(attn)).sum(-1)
                return attn @ x, entropy
        """,
        ("softmax", -1),
        id="softmax-module-attribute",
    ),
    pytest.param(
        """
        import torch
        from torch.nn import Sigmoid

        def train_step(model, batch, opt):
            act = Sigmoid()
            out = act(model(batch["x"]))
            loss = -(batch["y"] * torch.log(out)).mean()
            loss.backward()
            opt.step()
        """,
        ("sigmoid", None),
        id="local-module-instance-imported-by-name",
    ),
    pytest.param(
        """
        import math
        import torch

        ACT = torch.nn.Softmax(1)

        def kl_to_uniform(logits):
            q = ACT(logits)
            return (q * (torch.log(q) + math.log(q.shape[1]))).sum(1).mean()
        """,
        ("softmax", 1),
        id="module-level-instance-fully-qualified",
    ),
    pytest.param(
        """
        import torch
        import torch.nn as nn

        class Head(nn.Module):
            def __init__(self, dim, classes):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, classes), nn.Softmax(dim=1))

            def forward(self, x, y):
                p = self.net(x)
                return -torch.log(p).gather(1, y[:, None]).mean()
        """,
        ("softmax", 1),
        id="sequential-attribute",
    ),
    pytest.param(
        """
        import torch
        import torch.nn as nn

        def evaluate(x, y):
            model = nn.Sequential(nn.Linear(8, 1), nn.Sigmoid())
            return torch.log(model(x)).mean()
        """,
        ("sigmoid", None),
        id="sequential-local",
    ),
    pytest.param(
        """
        import torch
        import torch.nn as nn

        class Discriminator(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(784, 1)

            def forward(self, img):
                validity = torch.sigmoid(self.body(img))
                return validity

        def d_loss(real, device):
            disc = Discriminator().to(device)
            return -torch.log(disc(real)).mean()
        """,
        ("sigmoid", None),
        id="project-class-instance",
    ),
    pytest.param(
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class Head(nn.Module):
            def forward(self, h):
                return F.softmax(h, -1)

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = Head()

            def forward(self, h):
                return torch.log(self.head(h))
        """,
        ("softmax", -1),
        id="project-class-attribute",
    ),
    pytest.param(
        """
        import torch
        import torch.nn as nn

        def confidence(logits):
            return torch.log(nn.Softmax(dim=1)(logits)).max(1).values
        """,
        ("softmax", 1),
        id="instance-called-at-once",
    ),
    pytest.param(
        """
        import torch

        def gate(x, hard):
            if hard:
                return torch.sigmoid(x * 10.0)
            return x.sigmoid()

        def gate_penalty(x):
            return torch.log(gate(x, False)).mean()
        """,
        ("sigmoid", None),
        id="every-return-the-same-kind",
    ),
    pytest.param(
        """
        import torch
        import torch.nn.functional as F

        def _normalise(scores):
            return F.softmax(scores, dim=-1)

        def attention_weights(q, k):
            return _normalise(q @ k.transpose(-2, -1))

        def attention_entropy(q, k):
            w = attention_weights(q, k)
            return -(w * torch.log(w)).sum(-1)
        """,
        ("softmax", -1),
        id="helper-calling-a-helper",
    ),
    pytest.param(
        """
        import torch
        import torch.nn as nn

        class Gate(nn.Module):
            def __init__(self):
                super().__init__()
                self.activation = torch.sigmoid

            def forward(self, x):
                return torch.log(self.activation(x))
        """,
        ("sigmoid", None),
        id="function-held-in-an-attribute",
    ),
    pytest.param(
        """
        import torch.nn as nn
        import torch.nn.functional as F

        class Policy(nn.Module):
            def __init__(self):
                super().__init__()
                self.out = nn.LogSoftmax(dim=-1)

            def forward(self, x, y):
                return F.nll_loss(self.out(x), y)
        """,
        ("log_softmax", -1),
        id="logsoftmax-the-good-form",
    ),
    pytest.param(
        """
        import torch

        def row_norms(x):
            return x.norm(dim=-1, keepdim=True)

        def log_scale(x):
            return torch.log(row_norms(x))
        """,
        ("norm", None),
        id="norm-helper",
    ),
    pytest.param(
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.act = nn.LogSigmoid()

            def score(self, x):
                return self.act(x)

            def forward(self, x):
                return torch.exp(self.score(x))
        """,
        ("logsigmoid", None),
        id="logsigmoid-the-good-form",
    ),
]


SILENT = [
    pytest.param(
        """
        import torch
        import torch.nn as nn

        class Head(nn.Module):
            def __init__(self, dim, classes):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, classes), nn.Softmax(dim=1))

            def forward(self, x, y):
                return -torch.log(self.net(x)[torch.arange(len(y)), y]).mean()
        """,
        id="indexed-call-is-no-call",  # what indexing keeps is the rules' question, not call_kind's
    ),
    pytest.param(
        """
        import torch
        import torch.nn.functional as F

        def scores(logits, normalise):
            if normalise:
                return F.softmax(logits, -1)
            return logits

        def loss(logits):
            return torch.log(scores(logits, True)).mean()
        """,
        id="returns-of-different-kinds",
    ),
    pytest.param(
        """
        import torch

        def maybe_probs(logits, normalise):
            if normalise:
                return torch.softmax(logits, -1)

        def loss(logits):
            return torch.log(maybe_probs(logits, True)).mean()
        """,
        id="may-return-none",
    ),
    pytest.param(
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.act = nn.Sigmoid()

            def export(self):
                self.act = nn.Identity()

            def forward(self, x):
                return torch.log(self.act(x))
        """,
        id="attribute-reassigned-in-another-method",
    ),
    pytest.param(
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self, probabilities):
                super().__init__()
                if probabilities:
                    self.act = nn.Softmax(dim=-1)
                else:
                    self.act = nn.Identity()

            def forward(self, x):
                return torch.log(self.act(x))
        """,
        id="conditional-activation",
    ),
    pytest.param(
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self, probabilities):
                super().__init__()
                self.act = nn.Softmax(dim=-1) if probabilities else nn.Identity()

            def forward(self, x):
                return torch.log(self.act(x))
        """,
        id="conditional-expression-activation",
    ),
    pytest.param(
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(8, 8), nn.Softmax(-1), nn.Linear(8, 2))

            def forward(self, x):
                return torch.log(self.net(x))
        """,
        id="sequential-not-ending-in-the-activation",
    ),
    pytest.param(
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self, layers):
                super().__init__()
                self.net = nn.Sequential(*layers, nn.Sigmoid())
                self.net.append(nn.Linear(8, 2))

            def forward(self, x):
                return torch.log(self.net(x))
        """,
        id="sequential-unpacked-and-appended",
    ),
    pytest.param(
        """
        import torch
        from scipy.special import softmax

        def smooth(x):
            return torch.log(softmax(x))
        """,
        id="same-named-function-of-another-package",
    ),
    pytest.param(
        """
        import torch
        import torch.nn.functional as F

        def probs(logits):
            return F.softmax(logits, -1)

        def step(probs, x):
            return torch.log(probs(x))
        """,
        id="parameter-shadows-the-helper",
    ),
    pytest.param(
        """
        import torch
        import torch.nn as nn

        class Base(nn.Module):
            def probs(self, x):
                return torch.sigmoid(x)

            def forward(self, x):
                return torch.log(self.probs(x))

        class Calibrated(Base):
            def probs(self, x):
                return x.clamp(1e-6, 1.0)
        """,
        id="method-redefined-by-a-subclass",
    ),
    pytest.param(
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self, act_layer):
                super().__init__()
                self.act = act_layer()

            def forward(self, x):
                return torch.log(self.act(x))
        """,
        id="activation-passed-in",
    ),
    pytest.param(
        """
        import torch
        from mylib import cached

        @cached
        def probs(x):
            return torch.softmax(x, -1)

        def loss(x):
            return torch.log(probs(x))
        """,
        id="unknown-decorator",
    ),
    pytest.param(
        """
        import torch

        def probs(x):
            return torch.softmax(x, -1)

        if torch.cuda.is_available():
            def probs(x):
                return x

        def loss(x):
            return torch.log(probs(x))
        """,
        id="helper-defined-twice",
    ),
    pytest.param(
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self, names):
                super().__init__()
                self.act = nn.Sigmoid()
                for name in names:
                    setattr(self, name, nn.Identity())

            def forward(self, x):
                return torch.log(self.act(x))
        """,
        id="attributes-set-dynamically",
    ),
    pytest.param(
        """
        import torch

        def build(cfg):
            return cfg.model

        def loss(cfg, x):
            model = build(cfg)
            return torch.log(model(x))
        """,
        id="model-from-a-builder",
    ),
    pytest.param(
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            softmax = nn.Softmax(dim=-1)

            def __init__(self):
                super().__init__()
                self.softmax = nn.Identity()

            def forward(self, x):
                return torch.log(self.softmax(x))
        """,
        id="class-and-instance-attribute",
    ),
    pytest.param(
        """
        import torch
        import torch.nn.functional as F

        def probs(x):
            yield F.softmax(x, -1)

        def loss(x):
            return torch.log(next(probs(x)))
        """,
        id="generator",
    ),
    pytest.param(
        """
        import torch
        import torch.nn.functional as F

        def loss(x):
            def probs(z):
                return F.softmax(z, -1)
            probs = torch.jit.script(probs)
            return torch.log(probs(x))
        """,
        id="local-function-rebound",
    ),
    pytest.param(
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.act = nn.Tanh()

            def forward(self, x):
                return torch.log(self.act(x))
        """,
        id="another-activation",
    ),
]


SILENT.append(
    pytest.param(
        """
        import torch
        import torch.nn.functional as F

        def probs(z):
            return F.softmax(z, -1)

        def scores(x):
            def probs(z):
                return z * 2.0
            return probs(x)

        def loss(x):
            return torch.log(scores(x))
        """,
        id="nested-def-shadows-the-helper",
    )
)


@pytest.mark.parametrize("source, expected", PRODUCING)
def test_producing_forms(source, expected):
    assert _one(source) == expected


@pytest.mark.parametrize("source", SILENT)
def test_look_alikes_produce_nothing_known(source):
    assert _one(source) is None


def test_a_helper_defined_once_in_a_branch_is_not_followed_past_the_module():
    """The summary knows only module-level definitions: a def under `if` gives nothing."""
    source = """
        import torch

        if True:
            def probs(x):
                return torch.softmax(x, -1)

        def loss(x):
            return torch.log(probs(x))
        """
    assert _one(source) is None


# ---------------------------------------------------------------------------------------------
# Across the project


HEADS = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


def probs(logits):
    return F.softmax(logits, dim=-1)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 1)
        self.out = nn.Sigmoid()

    def forward(self, x):
        return self.out(self.fc(x))
"""


def _project(tmp_path, files):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    written = []
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        written.append((str(path), path.read_text()))
    return build_index(written)


def test_relative_import_of_a_helper(tmp_path):
    index = _project(tmp_path, {"pkg/__init__.py": "", "pkg/heads.py": HEADS})
    use = """
        import torch
        from .heads import probs

        def nll(logits, y):
            return -torch.log(probs(logits)).gather(1, y[:, None]).mean()
        """
    assert _one(use, path=str(tmp_path / "pkg" / "train.py"), index=index) == ("softmax", -1)


def test_absolute_import_of_a_class_and_a_module(tmp_path):
    index = _project(tmp_path, {"pkg/__init__.py": "", "pkg/heads.py": HEADS})
    use = """
        import torch
        from pkg.heads import Classifier
        from pkg import heads

        def train_step(x, y, device):
            model = Classifier().to(device)
            p = model(x)
            q = heads.probs(x)
            return torch.log(p).mean() + torch.log(q).mean()
        """
    found = _answers(use, path=str(tmp_path / "train.py"), index=index)
    assert found == [("sigmoid", None), ("softmax", -1)]


def test_a_class_attribute_holding_an_imported_class(tmp_path):
    index = _project(tmp_path, {"pkg/__init__.py": "", "pkg/heads.py": HEADS})
    use = """
        import torch
        import torch.nn as nn
        from .heads import Classifier

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = Classifier()

            def forward(self, x, y):
                p = self.head(x)
                return -(y * torch.log(p)).mean()
        """
    assert _one(use, path=str(tmp_path / "pkg" / "model.py"), index=index) == ("sigmoid", None)


def test_without_the_index_an_imported_helper_is_unknown(tmp_path):
    _project(tmp_path, {"pkg/__init__.py": "", "pkg/heads.py": HEADS})
    use = """
        import torch
        from .heads import probs

        def nll(logits):
            return torch.log(probs(logits))
        """
    assert _one(use, path=str(tmp_path / "pkg" / "train.py")) is None


def test_a_module_path_that_names_two_files_is_ambiguous(tmp_path):
    other = "import torch\n\ndef probs(x):\n    return x.clamp(1e-6, 1.0)\n"
    index = _project(tmp_path, {"a/heads.py": HEADS, "b/heads.py": other})
    use = """
        import torch
        from heads import probs

        def nll(logits):
            return torch.log(probs(logits))
        """
    assert _one(use, path=str(tmp_path / "train.py"), index=index) is None


def test_an_import_from_outside_the_project_is_unknown(tmp_path):
    index = _project(tmp_path, {"pkg/__init__.py": "", "pkg/heads.py": HEADS})
    use = """
        import torch
        from otherlib.heads import probs

        def nll(logits):
            return torch.log(probs(logits))
        """
    assert _one(use, path=str(tmp_path / "train.py"), index=index) is None


def test_the_file_being_linted_is_read_as_it_is_now(tmp_path):
    """The index may hold a file as it was before a fix: its own facts come from its text."""
    old = "import torch\n\ndef probs(x):\n    return x\n"
    index = _project(tmp_path, {"model.py": old})
    now = """
        import torch

        def probs(x):
            return torch.softmax(x, -1)

        def loss(x):
            return torch.log(probs(x))
        """
    assert _one(now, path=str(tmp_path / "model.py"), index=index) == ("softmax", -1)


def test_the_index_summarises_helper_files_and_stays_plain_data(tmp_path):
    helper = "import torch\n\ndef gate(x):\n    return torch.sigmoid(x)\n"
    index = _project(tmp_path, {"util.py": helper, "pkg/heads.py": HEADS})
    assert set(index.summaries.files) == {str(tmp_path / "util.py"), str(tmp_path / "pkg" / "heads.py")}
    assert pickle.loads(pickle.dumps(index)) == index
    replaced = index.with_file(str(tmp_path / "util.py"), "import torch\n\ndef gate(x):\n    return x\n")
    use = "import torch\nfrom util import gate\n\ndef f(x):\n    return torch.log(gate(x))\n"
    path = str(tmp_path / "train.py")
    assert _one(use, path=path, index=index) == ("sigmoid", None)
    assert _one(use, path=path, index=replaced) is None


# ---------------------------------------------------------------------------------------------
# Through a run: what a rule that reads the index sees (made_by.softmax_call asks call_kind last)


def _log_of_softmax(reads_index: bool):
    """TNL103 as its family ships it (it reads the index: a helper of another module is seen
    even where the caller names no softmax), or, unregistered (a subclass without a `code` of
    its own), the same rule without the index: then only same-file facts are known."""
    rule = registry()["TNL103"]
    if reads_index:
        return rule
    return type("UnindexedLogOfSoftmax", (rule,), {"needs_index": False, "produced": frozenset()})


TRAIN = """\
import torch
from .heads import probs


def nll(logits, target):
    p = probs(logits)
    return -torch.log(p).gather(1, target[:, None]).mean()
"""


@pytest.mark.parametrize("reads_index, lines", [(True, [7]), (False, [])])
def test_a_helper_of_another_module_is_seen_through_the_index(tmp_path, reads_index, lines):
    _project(tmp_path, {"pkg/__init__.py": "", "pkg/heads.py": HEADS, "pkg/train.py": TRAIN})
    train = str(tmp_path / "pkg" / "train.py")
    result = run([train], Config(root=tmp_path), [_log_of_softmax(reads_index)], Options())
    assert [(f.code, f.line) for f in result.findings] == [("TNL103", line) for line in lines]


def test_a_helper_of_the_same_module_is_seen_without_the_index(tmp_path):
    source = HEADS + "\n\ndef nll(logits, target):\n    return -torch.log(probs(logits)).gather(1, target[:, None]).mean()\n"
    _project(tmp_path, {"model.py": source})
    result = run([str(tmp_path / "model.py")], Config(root=tmp_path), [_log_of_softmax(False)], Options())
    assert [(f.code, f.line, f.fix) for f in result.findings] == [("TNL103", 21, None)]


# ---------------------------------------------------------------------------------------------
# What a log-domain rule reports through a producer (no fix: nothing to rebuild the call from)

from tests.rules import harness  # noqa: E402
from tests.rules.harness import Flagged, Silent  # noqa: E402

LOG_OF_SOFTMAX = harness.params(
    "TNL103",
    flagged=[
        Flagged(
            """\
            import torch
            import torch.nn as nn

            class Head(nn.Module):
                def __init__(self, dim):
                    super().__init__()
                    self.fc = nn.Linear(dim, 10)
                    self.softmax = nn.Softmax(dim=-1)

                def forward(self, x, y):
                    return -torch.log(self.softmax(self.fc(x))).gather(1, y[:, None]).mean()
            """,
            (11,),
        ),
        Flagged(
            """\
            import torch
            import torch.nn.functional as F

            def class_probs(logits):
                p = F.softmax(logits, dim=-1)
                return p

            def nll(logits, target):
                probs = class_probs(logits)
                return -torch.log(probs).gather(1, target[:, None]).mean()
            """,
            (10,),
        ),
    ],
    silent=[
        Silent(
            """\
            import torch
            import torch.nn as nn

            class Head(nn.Module):
                def __init__(self, dim, probabilities):
                    super().__init__()
                    self.fc = nn.Linear(dim, 10)
                    self.act = nn.Softmax(dim=-1) if probabilities else nn.Identity()

                def forward(self, x, y):
                    return -torch.log(self.act(self.fc(x))).gather(1, y[:, None]).mean()
            """
        ),
        Silent(
            """\
            import torch

            def nll(probs, logits, target):
                return -torch.log(probs(logits)).gather(1, target[:, None]).mean()
            """
        ),
    ],
)

LOG_OF_SIGMOID = harness.params(
    "TNL104",
    flagged=[
        Flagged(
            """\
            import torch
            import torch.nn as nn

            class Discriminator(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.net = nn.Sequential(nn.Linear(784, 256), nn.LeakyReLU(0.2), nn.Linear(256, 1))

                def forward(self, img):
                    return torch.sigmoid(self.net(img))

            def d_loss(disc, real, fake):
                d = Discriminator()
                return -(torch.log(d(real)) + torch.log(1 - d(fake))).mean()
            """,
            (14, 14),
        ),
    ],
    silent=[
        Silent(
            """\
            import torch
            import torch.nn as nn

            class Discriminator(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.net = nn.Sequential(nn.Linear(784, 256), nn.LeakyReLU(0.2), nn.Linear(256, 1), nn.LogSigmoid())

                def forward(self, img):
                    return self.net(img)

            def d_loss(real):
                d = Discriminator()
                return -torch.log(d(real).exp()).mean()
            """
        ),
    ],
)


@pytest.mark.parametrize("code, case", LOG_OF_SOFTMAX + LOG_OF_SIGMOID)
def test_log_domain_rules_through_producers(code, case):
    harness.check(code, case)


# Stronger summaries (issue 16 item 3): a helper whose return is a shape-only or cast step of a
# softmax still returns a softmax; `model.forward(x)` is `model(x)`.
@pytest.mark.parametrize(
    "code, case",
    harness.params(
        "TNL103",
        [
            harness.Flagged(
                """\
                import torch
                import torch.nn.functional as F

                def probs(z):
                    return F.softmax(z, dim=-1).unsqueeze(1).float()

                def nll(z, y):
                    return -torch.log(probs(z)).mean()
                """,
                (8,),
            ),
            harness.Flagged(
                """\
                import torch
                from torch import nn

                class Head(nn.Module):
                    def forward(self, h):
                        return torch.softmax(h, dim=-1)

                def loss(h, y):
                    head = Head()
                    return torch.nn.functional.nll_loss(torch.log(head.forward(h)), y)
                """,
                (10,),
            ),
        ],
        [
            harness.Silent("""\
            import torch
            import torch.nn.functional as F

            def scores(z):
                return F.softmax(z, dim=-1).sum(-1)

            def nll(z):
                return -torch.log(scores(z)).mean()
            """)
        ],
    ),
)
def test_returns_through_shape_steps_and_explicit_forward(code, case):
    harness.check(code, case)
