"""The pre-pass loses no finding on real code: files of the installed torch sources, each with a
rule example split around it (`tests/real_code.py`), linted with LibCST given only the statements
`candidates.py` keeps and given the whole file, must give the same findings, fixes included.

The pre-pass tests a group on its code without docstrings and comments, and masks module-level
statements no kept code reads: so the files where that cuts most (prose full of rule words,
classes whose methods link to each other) are compared too.

The rules' own examples (`tests/rules/test_examples.py`) are small; real files are where a
statement's finding depends on another statement (aliases, helpers, call sites, base classes).
"""

import pytest

from torchnumlint.engine import ParseError, lint_text
from torchnumlint.rules.registry import registry

from tests.real_code import class_count, docstring_share, heaviest, real_texts

RULES = list(registry().values())  # every rule, default or not
SAMPLE = 120


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


@pytest.mark.parametrize("score, first", [(docstring_share, 0), (class_count, 45)], ids=["docstring-heavy", "class-heavy"])
def test_partial_parsing_gives_the_findings_of_a_full_parse_where_the_pre_pass_cuts_most(score, first):
    count = 30
    texts = real_texts(count, heaviest(count, score), first)
    findings = 0
    for path, text in texts:
        whole = _findings(path, text, partial=False)
        assert _findings(path, text, partial=True) == whole, path
        findings += len(whole) if isinstance(whole, list) else 0
    assert len(texts) == count and findings >= count // 2
