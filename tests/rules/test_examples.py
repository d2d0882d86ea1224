"""Every rule's own examples are its first tests, run through the shared harness
(`tests/rules/harness.py`): bad gives exactly its findings, the fix gives the pinned text, the
fixed text lints clean and is stable under a second --fix, unsafe fixes need the flag, the
pre-filter keeps it; good gives nothing."""

import pytest

from torchnumlint.engine import lint_text
from torchnumlint.findings import Safety
from torchnumlint.rules.registry import all_rules
from tests.rules import harness

RULES = all_rules()
BAD = [(r, i, ex) for r in RULES for i, ex in enumerate(r.examples)]
GOOD = [(r, i, code) for r in RULES for i, code in enumerate(r.good)]


def _id(case):
    return f"{case[0].code}-{case[1]}"


@pytest.mark.parametrize("case", BAD, ids=[_id(c) for c in BAD])
def test_bad_example(case):
    """Exact findings, the pinned fixed text (clean, stable), safety gating, the pre-filter."""
    rule, _, example = case
    safe = example.fix_safety(rule) is Safety.SAFE
    harness.check_flagged(rule.code, harness.Flagged(example.bad, example.lines, example.fixed, safe=safe))


@pytest.mark.parametrize("case", GOOD, ids=[_id(c) for c in GOOD])
def test_good_example_is_clean(case):
    rule, _, code = case
    harness.check_silent(rule.code, harness.Silent(code))


def test_every_rule_is_documented():
    for rule in RULES:
        assert rule.code.startswith("TNL") and len(rule.code) == 6
        assert rule.name and rule.message and len(rule.rationale) > 80
        assert rule.finds and rule.fix_summary, f"{rule.code}: the README table's cells"
        assert rule.examples and rule.good, rule.code
        assert rule.needles, rule.code
        if rule.safety is Safety.GUIDE:
            assert all(ex.fixed is None for ex in rule.examples), rule.code
        else:
            assert any(ex.fixed is not None for ex in rule.examples), rule.code


def test_prefilter_never_loses_a_finding(monkeypatch):
    """Every rule on every example text of every rule (and the bundled example): the same findings
    with the pre-filter as without it."""
    from pathlib import Path

    from torchnumlint.rules.base import Rule

    texts = [ex.bad for r in RULES for ex in r.examples] + [g for r in RULES for g in r.good]
    texts += [ex.fixed for r in RULES for ex in r.examples if ex.fixed]
    texts.append((Path(__file__).resolve().parents[2] / "examples" / "unsafe_training.py").read_text())

    def run_all():
        return [[(f.code, f.line, f.col) for f in lint_text("x.py", text, RULES)] for text in texts]

    filtered = run_all()
    monkeypatch.setattr(Rule, "could_fire", classmethod(lambda cls, text, index=None: True))
    for rule in RULES:
        if "could_fire" in rule.__dict__:
            monkeypatch.setattr(rule, "could_fire", classmethod(lambda cls, text, index=None: True))
    assert run_all() == filtered
    assert sum(map(len, filtered)) > 30
