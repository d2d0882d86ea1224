"""The statement-level pre-pass: what it masks, what it must keep, and that the findings are
those of a full parse in the cases where a finding depends on another top-level statement."""

import ast
import textwrap

import pytest

from torchnumlint import candidates, prepass
from torchnumlint.engine import lint_text
from torchnumlint.rules.registry import registry

RULES = [rule for rule in registry().values() if rule.default]


def _kept(code):
    """The names of the top-level functions and classes LibCST is given (None: no parse at all)."""
    text = textwrap.dedent(code)
    tree = ast.parse(text)
    spans = candidates.unneeded(text, tree, prepass.Lines(text), RULES)
    if spans is None:
        return None
    lines = prepass.Lines(text)
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and lines.span(n) not in spans]


def test_functions_no_rule_can_fire_in_are_masked():
    code = """
        import torch

        def load(path):
            return open(path).read()

        def loss(x):
            return torch.log(torch.softmax(x, -1))
    """
    assert _kept(code) == ["loss"]


def test_a_file_where_no_statement_can_hold_a_finding_is_not_parsed():
    assert _kept("import torch\n\ndef f(path):\n    return open(path)\n") is None


CROSS_STATEMENT = [
    # an alias imported in another function: ImportMap resolves it module-wide
    """
    import torch.nn.functional as F

    def helper():
        from torch.nn.functional import softmax as sm
        return 1

    def other(x, y):
        return F.cross_entropy(sm(x, dim=1), y)
    """,
    # the rule's test needs a module-level value and the function's text together
    """
    import torch
    import torch.nn as nn

    criterion = nn.BCELoss()

    def step(x, y):
        return criterion(torch.sigmoid(x), y)
    """,
    # a module-level alias of a module-level loss, read through both
    """
    import torch
    import torch.nn as nn

    criterion = nn.BCELoss()
    loss_fn = criterion
    WIDTH = 3

    def step(x, y):
        return loss_fn(torch.sigmoid(x), y)
    """,
    # a division by a name imported under another name: the import's `div` keeps the function
    """
    import torch
    from torch import div as quotient

    def masked_mean(h, valid_mask):
        n = valid_mask.sum(dim=1, keepdim=True)
        return quotient((h * valid_mask).sum(dim=1, keepdim=True), n)
    """,
    # a helper of the same file produces the sigmoid
    """
    import torch
    import torch.nn.functional as F

    def predict(model, x):
        return torch.sigmoid(model(x))

    def step(model, x, y):
        return F.binary_cross_entropy(predict(model, x), y)
    """,
]


@pytest.mark.parametrize("code", CROSS_STATEMENT)
def test_findings_that_read_another_statement_are_those_of_a_full_parse(code):
    text = textwrap.dedent(code)
    whole = [(f.line, f.code, f.fix) for f in lint_text("m.py", text, RULES, partial=False)]
    assert whole, "the case must hold a finding"
    assert [(f.line, f.code, f.fix) for f in lint_text("m.py", text, RULES, partial=True)] == whole


def _kept_lines(code, rules=RULES):
    """The first lines of the top-level statements LibCST is given (None: no parse at all)."""
    text = textwrap.dedent(code).lstrip("\n")
    tree = ast.parse(text)
    lines = prepass.Lines(text)
    spans = candidates.unneeded(text, tree, lines, rules)
    if spans is None:
        return None
    return [text[slice(*lines.span(n))].split("\n")[0] for n in tree.body if lines.span(n) not in spans]


def test_words_in_docstrings_and_comments_keep_nothing():
    code = '''
        import torch

        def describe(x):
            """Takes exp(x) / x.sum(), the log of a softmax, a sqrt of the norm."""
            # the hazard would be x / x.sum() here
            return x.view(-1)

        def loss(x):
            return torch.log(torch.softmax(x, -1))
    '''
    assert _kept_lines(code) == ["import torch", "def loss(x):"]


def test_a_noqa_comment_keeps_its_function_for_tnl900():
    code = """
        import torch

        def shape(x):
            y = x.view(-1)  # noqa: TNL201
            return y

        def loss(x):
            return torch.log(torch.softmax(x, -1))
    """
    every = list(registry().values())
    assert "def shape(x):" in _kept_lines(code, every)
    assert "def shape(x):" not in _kept_lines(code)  # TNL900 is off by default: nothing reads it


def test_module_level_statements_are_kept():
    """They bind what names resolve to, and one beyond LibCST's reach must still be named in a
    warning (`tests/test_unbreakable.py`)."""
    code = """
        import torch

        __version__ = "1.0"
        torch.backends.cudnn.benchmark = True

        def shape(x):
            return x.view(-1)

        def loss(x):
            return torch.log(torch.softmax(x, -1))
    """
    assert _kept_lines(code) == ["import torch", '__version__ = "1.0"', "torch.backends.cudnn.benchmark = True", "def loss(x):"]


def test_division_rules_need_a_true_division_or_a_div_call_in_the_tree():
    code = """
        import torch

        def paths(root, x):
            return root + "/cache/" + str(x.sum() // 2)

        def halves(x):
            return x / x.sum()

        def divided(x):
            return torch.div(x, x.sum())
    """
    assert _kept_lines(code) == ["import torch", "def halves(x):", "def divided(x):"]


def test_root_rules_need_a_power_or_a_root_call_in_the_tree():
    code = """
        import torch

        def build(x, *args, **kwargs):
            return x[:, None].sum(-1, **kwargs)

        def dist(a, b):
            return ((a[:, None] - b[None]) ** 2).sum(-1).sqrt()
    """
    assert _kept_lines(code) == ["import torch", "def dist(a, b):"]
