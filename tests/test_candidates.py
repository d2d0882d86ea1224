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
