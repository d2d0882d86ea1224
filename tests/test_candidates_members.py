"""The pre-filter inside kept classes and at module level: which methods and module-level
statements LibCST is not given, each reason one is kept anyway, and that the findings are those
of a full parse where a finding reads another method or a module-level statement."""

import ast
import textwrap

import pytest

from torchnumlint import candidates, prepass
from torchnumlint.engine import lint_text
from torchnumlint.rules.registry import registry

RULES = [rule for rule in registry().values() if rule.default]
EVERY = list(registry().values())

# a class a rule fires in (TNL103: log of a softmax), around the methods under test
HEAD = """
import torch
import torch.nn as nn


class Net(nn.Module):
    def scores(self, x):
        return torch.log(torch.softmax(x, -1))
"""


def _kept(code, rules=RULES):
    """The first lines of the statements LibCST is given: module-level ones, and (indented) the
    methods of classes; None where LibCST parses nothing."""
    text = textwrap.dedent(code).lstrip("\n")
    tree = ast.parse(text)
    lines = prepass.Lines(text)
    spans = candidates.unneeded(text, tree, lines, rules)
    if spans is None:
        return None
    out = []
    for node in tree.body:
        if lines.span(node) in spans:
            continue
        out.append(text[slice(*lines.span(node))].split("\n")[0])
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and lines.span(member) not in spans:
                    out.append("  " + member.name)
    return out


def _methods(code, rules=RULES):
    return [line.strip() for line in _kept(HEAD + textwrap.indent(textwrap.dedent(code), "    "), rules) if line.startswith("  ")]


def test_a_method_no_rule_fires_in_and_nothing_reads_is_masked():
    assert _methods("""
        def describe(self):
            # a net: exp(x) / sum(exp(x)), in its comments only
            return "net"
    """) == ["scores"]


def test_a_method_a_kept_method_calls_is_kept():
    assert _methods("""
        def logits(self, x):
            return self.helper(x) * 2

        def helper(self, x):
            return x.view(-1)

        def unused(self, x):
            return x.view(-1)

        def run(self, x):
            return torch.log(torch.softmax(self.logits(x), -1))
    """) == ["scores", "logits", "helper", "run"]


def test_a_method_that_calls_a_kept_method_is_kept_a_call_site():
    assert _methods("""
        def twice(self, x):
            return self.scores(x) + self.scores(x)

        def shape(self, x):
            return x.view(-1)
    """) == ["scores", "twice"]


def test_a_method_setting_an_attribute_a_kept_method_reads_is_kept():
    assert _methods("""
        def set_temperature(self, t):
            self.temperature = t

        def set_other(self, t):
            self.other = t

        def scaled(self, x):
            return torch.log(torch.softmax(x / self.temperature, -1))
    """) == ["scores", "set_temperature", "scaled"]


def test_a_method_registering_a_buffer_a_kept_method_reads_is_kept():
    assert _methods("""
        def setup(self):
            self.register_buffer("offset", torch.zeros(3))

        def shifted(self, x):
            return torch.log(torch.softmax(x + self.offset, -1))
    """) == ["scores", "setup", "shifted"]


@pytest.mark.parametrize("name", ["__init__", "forward", "backward", "__call__"])
def test_methods_the_rules_read_by_name_are_kept(name):
    assert _methods(f"""
        def {name}(self, x):
            return x
    """) == ["scores", name]


def test_other_dunders_are_masked_when_nothing_reads_them():
    assert _methods("""
        def __repr__(self):
            return "a network"

        def __post_init__(self):
            pass
    """) == ["scores"]


def test_a_method_with_the_name_of_a_kept_function_is_kept():
    """`gradients.py` tells functions by their names: a second `scores` is part of its facts."""
    code = (
        HEAD
        + """

class Other:
    def scores(self, x):
        return x.view(-1)

    def shape(self, x):
        return x.view(-1)

    def run(self, x):
        return torch.log(torch.softmax(x, -1))
"""
    )
    assert _kept(code)[-3:] == ["class Other:", "  scores", "  run"]


def test_a_method_importing_a_name_kept_code_uses_is_kept():
    assert _methods("""
        def lazy(self):
            import numpy as np
            return 1

        def scaled(self, x):
            return torch.log(torch.softmax(x * np.pi, -1))
    """) == ["scores", "lazy", "scaled"]


def test_a_method_calling_a_function_kept_in_an_attribute_is_kept():
    """`self.loss = kl` in a kept method: `self.loss(p, q)` elsewhere calls `kl`
    (`CallSites.kept`)."""
    code = """
        import torch


        def kl(p, q):
            return (p * torch.log(p / q)).sum()


        class Trainer:
            def __init__(self):
                self.loss = kl

            def step(self, p, q):
                return self.loss(p, q)

            def shape(self, x):
                return x.view(-1)
    """
    assert _kept(code) == ["import torch", "def kl(p, q):", "class Trainer:", "  __init__", "  step"]


def test_module_level_statements_nothing_reads_are_masked():
    code = """
        import torch

        __version__ = "1.0"
        __all__ = ["loss"]
        TABLE = {"a": 1, "b": 2}
        EPS = 1e-8

        def loss(x):
            return torch.log(torch.softmax(x, -1) + EPS)
    """
    assert _kept(code) == ["import torch", "EPS = 1e-8", "def loss(x):"]


def test_module_level_statements_that_call_a_kept_function_are_kept():
    code = """
        import torch

        def loss(x):
            return torch.log(torch.softmax(x, -1))

        def shape(x):
            return x.view(-1)

        if __name__ == "__main__":
            loss(torch.ones(3))

        shape(torch.ones(3))
    """
    assert _kept(code) == ["import torch", "def loss(x):", 'if __name__ == "__main__":']


@pytest.mark.parametrize(
    "statement",
    [
        "try:\n    import numpy\nexcept ImportError:\n    numpy = None",  # imports: ImportMap reads them all
        '"""The module\'s docstring."""',  # fixes place new imports after it
        "A = 1; B = 2",  # shares a line
        "def f():\n    global G\n    G = 1",  # binds a module-level name from inside a function
    ],
)
def test_module_level_statements_that_are_always_kept(statement):
    code = statement + "\n\nimport torch\n\ndef loss(x):\n    return torch.log(torch.softmax(x, -1))\n"
    kept = _kept(code)
    assert all(part in kept for part in statement.split("\n")[0].split("; ")) or statement.startswith("def")


def test_a_module_level_statement_too_deep_for_libcst_is_kept_and_named_in_a_warning():
    text = "import torch\n\ny = " + " + ".join(f"x{i}" for i in range(2000)) + "\n\ndef f(x):\n    return torch.log(torch.softmax(x, -1))\n"
    warnings = []
    found = lint_text("m.py", text, RULES, warnings=warnings)
    assert [f.code for f in found] == ["TNL103"]
    assert len(warnings) == 1 and warnings[0].startswith("line 3: statement nested too deeply to analyse (depth ")


def test_an_implicit_concatenation_beyond_libcst_is_kept_for_libcst_to_refuse():
    pieces = " ".join(f"'s{i}'" for i in range(prepass.MAX_DEPTH + 1))
    code = f"import torch\n\nNAMES = ({pieces})\nSHORT = ('a' 'b')\n\ndef f(x):\n    return torch.log(torch.softmax(x, -1))\n"
    kept = _kept(code)
    assert kept[1].startswith("NAMES = (") and "SHORT = ('a' 'b')" not in kept


CROSS_MEMBER = [
    # an attribute set in another method holds the sigmoid a kept method hands to BCE
    """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Head(nn.Module):
        def configure(self, x):
            self.probs = torch.sigmoid(x)

        def loss(self, y):
            return F.binary_cross_entropy(self.probs, y)

        def describe(self):
            return "head"
    """,
    # a helper method produces the softmax a kept method takes the log of
    """
    import torch
    import torch.nn as nn

    class Head(nn.Module):
        def probs(self, x):
            return torch.softmax(x, -1)

        def score(self, x):
            return torch.log(self.probs(x))

        def size(self, x):
            return x.shape[0]
    """,
    # the criterion is a module-level value, the method reaches it by name
    """
    import torch
    import torch.nn as nn

    criterion = nn.BCELoss()
    UNUSED = {"k": 1}

    class Trainer:
        def step(self, x, y):
            return criterion(torch.sigmoid(x), y)

        def name(self):
            return "trainer"
    """,
    # an import inside another method binds the alias a kept method uses
    """
    import torch

    class Head:
        def setup(self):
            from torch.nn.functional import softmax as sm
            return sm

        def score(self, x):
            return torch.log(sm(x, dim=-1))

        def name(self):
            return "head"
    """,
]


@pytest.mark.parametrize("code", CROSS_MEMBER)
def test_findings_that_read_another_method_are_those_of_a_full_parse(code):
    text = textwrap.dedent(code)
    whole = [(f.line, f.code, f.message, f.fix) for f in lint_text("m.py", text, EVERY, partial=False)]
    assert whole, "the case must hold a finding"
    assert [(f.line, f.code, f.message, f.fix) for f in lint_text("m.py", text, EVERY, partial=True)] == whole
    tree = ast.parse(text)
    assert candidates.unneeded(text, tree, prepass.Lines(text), EVERY), "the case must mask something"
