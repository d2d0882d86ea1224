"""The pre-pass loses no finding on real code: files of the installed torch sources, each with a
rule example split around it (`tests/real_code.py`), linted with LibCST given only the statements
`candidates.py` keeps and given the whole file, must give the same findings, fixes included.

The pre-pass tests a group on its code without docstrings and comments, masks the methods of a
kept class no rule fires in and nothing kept reads, and the module-level statements nothing kept
reads: so the files where that cuts most (prose full of rule words, classes whose methods link
to each other, the most methods, the most module-level assignments) are compared too.

The rules' own examples (`tests/rules/test_examples.py`) are small; real files are where a
statement's finding depends on another statement (aliases, helpers, call sites, base classes).
"""

import os
import re

import pytest

from torchnumlint.engine import ParseError, lint_text
from torchnumlint.rules.registry import registry

from tests.real_code import class_count, docstring_share, heaviest, real_texts

RULES = list(registry().values())  # every rule, default or not
SAMPLE = 120
_METHOD = re.compile(r"^[ \t]+(?:async[ \t]+)?def ", re.MULTILINE)
_MODULE_VALUE = re.compile(r"^[^\W\d][\w.]*(?:\[[^\n]*\])?[ \t]*(?::[^\n=]*)?=[^=]", re.MULTILINE)


def method_count(text):
    """Indented `def`s: methods (and nested functions), what the pre-pass masks inside a class."""
    return len(_METHOD.findall(text))


def module_values(text):
    """Module-level assignments (`NAME = ...` at column 0), what the pre-pass masks at module level."""
    return len(_MODULE_VALUE.findall(text))


def _findings(path, text, partial):
    try:
        return [(f.line, f.col, f.code, f.message, f.fix) for f in lint_text(path, text, RULES, partial=partial)]
    except ParseError as exc:
        return str(exc)


def test_partial_parsing_gives_the_findings_of_a_full_parse_on_real_files():
    compared = findings = 0
    for path, text in real_texts(SAMPLE):
        whole = _findings(path, text, partial=False)
        assert _findings(path, text, partial=True) == whole, path
        compared += 1
        findings += len(whole) if isinstance(whole, list) else 0
    assert compared >= SAMPLE * 0.9 and findings >= SAMPLE // 2  # not a vacuous comparison


@pytest.mark.parametrize(
    "score, first, count",
    [(docstring_share, 0, 30), (class_count, 45, 30), (method_count, 90, 20), (module_values, 135, 20)],
    ids=["docstring-heavy", "class-heavy", "method-heavy", "module-value-heavy"],
)
def test_partial_parsing_gives_the_findings_of_a_full_parse_where_the_pre_pass_cuts_most(score, first, count):
    texts = real_texts(count, _spread(heaviest(count * 10, score), count), first)
    findings = 0
    for path, text in texts:
        whole = _findings(path, text, partial=False)
        assert _findings(path, text, partial=True) == whole, path
        findings += len(whole) if isinstance(whole, list) else 0
    assert len(texts) == count and findings >= count // 2


def _spread(paths, count, per_folder=3):
    """The first `count` of `paths` with at most `per_folder` from one folder (torch's generated
    pattern files are one folder of near-copies)."""
    taken, out = {}, []
    for path in paths:
        folder = os.path.dirname(path)
        if taken.get(folder, 0) < per_folder and len(out) < count:
            taken[folder] = taken.get(folder, 0) + 1
            out.append(path)
    return out
