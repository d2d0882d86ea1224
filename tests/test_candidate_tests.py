"""The rules' candidate tests on CPython's tree (`Rule.tree_test`) lose no finding and mask
what the text tests kept.

For each rule whose test is sharpened: on its own examples, and on torch files holding an example
(`tests/real_code.py`), LibCST given only the statements `candidates.py` keeps reports what it
reports given the whole file, in strict mode too (a test must keep every group the rule can report
in, with evidence or without). Each near-miss below is a group the rule's text and node-type tests
kept (`could_fire`, `ast_kinds`/`ast_words`) that its tree test masks, with why the rule cannot
report there; a full parse, strict, confirms it finds nothing.
"""

import ast
import textwrap

import pytest

from torchnumlint import candidates, prepass
from torchnumlint.engine import lint_text
from torchnumlint.rules.base import Rule
from torchnumlint.rules.registry import registry

from tests.real_code import real_texts

RULES = registry()
SHARPENED = sorted(code for code, rule in RULES.items() if rule.ast_calls or rule.tree_test.__func__ is not Rule.tree_test.__func__)

# (rule, code, why the rule cannot report in it)
NEAR_MISSES = [
    (
        "TNL201",
        """
        import torch

        def halve(x):
            total = x.sum(dim=-1)
            total /= 2
            return total / -4.0 + total.norm() / 1e3
        """,
        "a denominator written as a number is a constant to `zero_kind`: never 0",
    ),
    (
        "TNL201",
        """
        import math

        import torch

        def average(x, xs, d):
            total = x.sum(dim=-1)
            return total / len(xs) + total / x.size(0) + total / (x.shape[-1] * 2) + d / math.sqrt(x.shape[-1])
        """,
        "a Python number (`len`, `size`, `shape`, `math`) is a constant to `zero_kind`: never 0",
    ),
    (
        "TNL202",
        """
        import torch

        def shrink(x):
            return x / 2 + x.norm(dim=-1, keepdim=True)
        """,
        "a normalisation divides by a norm, not by a number",
    ),
    (
        "TNL203",
        """
        import torch

        def similarity(a, b):
            return (a * b).sum(-1) / 8 + a.norm(dim=-1) * b.norm(dim=-1)
        """,
        "a cosine by hand divides by a product of norms, not by a number",
    ),
    (
        "TNL110",
        """
        import torch

        def mean_exp(x):
            return torch.exp(x).sum(-1) / 10
        """,
        "a softmax by hand divides by a sum, not by a number",
    ),
    (
        "TNL204",
        """
        import torch

        def energy(x, y):
            return ((x - y) ** 2).sum(-1) + x.sum() ** -1
        """,
        "a whole power (`** 2`, `** -1`) is no root to `root_of`, and no root is named",
    ),
    (
        "TNL204",
        """
        import torch

        def spread(x):
            return torch.sqrt(x.abs().sum(-1))
        """,
        "a root of a sum of no square (`shapes.square_base`: `x ** 2`, `x * x`, `pow`, `square`)",
    ),
    (
        "TNL209",
        """
        import torch

        def safe_log(x):
            y = torch.log(x)
            return torch.where(x > 0, y, torch.zeros_like(x))
        """,
        "the log is outside the `where` call: `enclosing_selection` reads the op's own expression",
    ),
    (
        "TNL206",
        """
        import torch

        def energy(x):
            return x.sum(-1) ** 2.0 + x ** -1.0
        """,
        "`** 2.0` and `** -1.0` are whole powers: no root to `root_of`",
    ),
    (
        "TNL205",
        """
        import torch

        def scale(x, mask=None):
            if mask is None:
                return torch.sqrt(x.sum(-1))
            return torch.sqrt((x * mask).sum(-1))
        """,
        "no difference of two operands given new axes (`pairwise_rows`): `None` is only compared",
    ),
    (
        "TNL205",
        """
        import torch

        def spread(a, b):
            return ((a[:, None] - b[None]) ** 2).sum(-1).rsqrt()
        """,
        "a pairwise difference, but its root is `rsqrt` (not a square root, which `root` alone takes)",
    ),
    (
        "TNL301",
        """
        import torch

        def run(model, x):
            with torch.autocast("cuda"):
                return model.forward(x)

        class Wrapper:
            def __call__(self, x):
                return self.inner.forward(x)
        """,
        "`visit_ClassDef` reports only inside a class whose own body defines `forward`",
    ),
    (
        "TNL207",
        """
        import logging
        import math

        import torch

        log = logging.getLogger(__name__)

        def bits(self, n):
            log.info("log2 of %d", n)
            self.log("entropy", n)
            return math.log(n) / math.log(2) + math.log10(n)
        """,
        "a logger's methods, a module's own `self.log` and `math.log` are no call `match_call` takes for a log",
    ),
    (
        "TNL106",
        """
        import math

        import torch

        def decay(step, log):
            log.warning("step %d", step)
            return math.log(1 + step)
        """,
        "`math.log` of an imported module is no torch log, and `log.warning` reads a logger",
    ),
    (
        "TNL112",
        """
        import numpy as np

        import torch

        def odds(self, p):
            self.log("p", p)
            return np.log(p) - np.log(1 - p)
        """,
        "`np.log` is numpy's (`match_call` takes no attribute of an imported module), `self.log` a module's own",
    ),
    (
        "TNL109",
        """
        import math

        import torch

        def scale(x):
            return math.log(x.size(-1)) * torch.exp(x).sum(-1)
        """,
        "the log is `math.log` of a number: no log of a sum of exps to `log_input`",
    ),
]


# (rule, code where it reports in strict mode, through a form its tree test must keep)
KEPT = [
    ("TNL201", "import torch\n\n\ndef mean(x, mask):\n    n = mask.sum(-1)\n    return torch.div((x * mask).sum(-1), n)\n"),
    ("TNL206", "import torch\n\n\ndef f(x):\n    return x.var(dim=-1, keepdim=True) ** -0.5\n"),
    ("TNL204", "import torch\n\n\ndef f(x):\n    return (x ** 2).sum(-1) ** 0.5\n"),
    ("TNL205", "import torch\n\n\ndef d(a):\n    return ((a.unsqueeze(1) - a.unsqueeze(0)) ** 2).sum(-1) ** 0.5\n"),
    ("TNL205", "import torch\n\n\ndef d(a):\n    diff = a[:, None] - a[None]\n    return torch.sqrt((diff ** 2).sum(-1))\n"),
    ("TNL207", "import torch as th\n\n\ndef f(p):\n    return th.log(p)\n"),
    ("TNL207", "from torch import log as ln\n\n\ndef f(p):\n    return ln(p)\n"),
    ("TNL207", "import torch\n\n\ndef f(self, p):\n    return self.p.log()\n"),
    ("TNL207", "import torch\nfrom . import probs\n\n\ndef f():\n    return probs.log()\n"),
    ("TNL207", "import torch\nfrom torch import special\n\n\ndef f(p):\n    return special.log2(p)\n"),
]


@pytest.mark.parametrize("code, text", KEPT, ids=[f"{c}-{i}" for i, (c, _) in enumerate(KEPT)])
def test_a_form_the_tree_test_must_keep_is_kept(code, text):
    rule = RULES[code]
    whole = _findings(rule, "m.py", text, True, partial=False)
    assert whole, "the case must hold a finding"
    assert _kept(rule, text)
    assert _findings(rule, "m.py", text, True, partial=True) == whole


def _kept(rule, text):
    """Whether LibCST is given some function or class of `text` for `rule` alone."""
    tree = ast.parse(text)
    lines = prepass.Lines(text)
    masked = candidates.unneeded(text, tree, lines, [rule])
    return masked is not None and any(
        lines.span(node) not in masked for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))
    )


def _findings(rule, path, text, strict, partial):
    return [(f.line, f.col, f.code, f.message, f.fix) for f in lint_text(path, text, [rule], strict=strict, partial=partial)]


def test_the_sharpened_rules_are_those_named_here():
    assert {code for code, _, _ in NEAR_MISSES} == set(SHARPENED)


@pytest.mark.parametrize("code, source, why", NEAR_MISSES, ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(NEAR_MISSES)])
def test_a_near_miss_the_old_test_kept_is_masked_and_holds_no_finding(code, source, why, monkeypatch):
    rule = RULES[code]
    text = textwrap.dedent(source).lstrip("\n")
    assert not _kept(rule, text), why
    monkeypatch.setattr(rule, "tree_test", classmethod(lambda cls, tree, index=None: True))
    assert _kept(rule, text), "the text and node-type tests must keep it: else it is no near miss"
    monkeypatch.undo()
    for strict in (False, True):
        assert _findings(rule, "m.py", text, strict, partial=False) == [], why


@pytest.mark.parametrize("code", SHARPENED)
def test_a_sharpened_test_keeps_every_finding_of_its_rules_examples(code):
    rule = RULES[code]
    texts = [e.bad for e in rule.examples] + [e.fixed for e in rule.examples if e.fixed] + list(rule.good)
    found = 0
    for text in texts:
        for strict in (False, True):
            whole = _findings(rule, "m.py", text, strict, partial=False)
            assert _findings(rule, "m.py", text, strict, partial=True) == whole, text
            found += len(whole)
    assert found >= len(rule.examples)


def test_sharpened_tests_lose_no_finding_on_real_files_strict_or_not():
    rules = [RULES[code] for code in SHARPENED]
    found = 0
    for path, text in real_texts(60):
        for strict in (False, True):
            whole = [(f.line, f.code, f.fix) for f in lint_text(path, text, rules, strict=strict, partial=False)]
            assert [(f.line, f.code, f.fix) for f in lint_text(path, text, rules, strict=strict, partial=True)] == whole, path
            found += len(whole)
    assert found >= 10
