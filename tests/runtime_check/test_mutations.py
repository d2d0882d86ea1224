"""verify itself is tested by breaking fixes on purpose: every wrong fix here must FAIL.

Each mutation is a plausible mistake in a rule's fix (a scale, a detach, a guard too wide, a wrong
constant). The mutated text is handed to verify as the linter's fix of the rule's first example, so
the FIX row fails (the text is not the pinned one) AND, the point of these tests, the runs on the
mutated text fail on the values: the checks would catch the mistake even if the pin agreed with it.
One test breaks the real fixer instead, the way a rule's bug would.
"""

from typing import Callable, NamedTuple, Optional, Sequence

import pytest

from torchnumlint import catalogue
from torchnumlint.runtime_check import linted, runner
from torchnumlint.runtime_check.oracles import CONFIRMED, FIX_FAILED

RULES = catalogue.load()


class Mutation(NamedTuple):
    name: str
    code: str
    old: str
    new: str
    dtypes: Optional[Sequence[str]] = None  # the dtypes that must fail (None: every one the rule runs in)
    reason: str = ""  # a phrase of the failure's reason


MUTATIONS = [
    Mutation("scale x1.005 (float32)", "TNL103", "return F.log_softmax(", "return 1.005 * F.log_softmax(",
             ("float32",), "other values than the mathematics"),
    Mutation("scale x1.005 (low precision)", "TNL103", "return F.log_softmax(", "return 1.005 * F.log_softmax(",
             ("float16", "bfloat16")),
    Mutation("log of softmax + 1", "TNL103", "F.log_softmax(logits, dim=-1)",
             "torch.log(F.softmax(logits, dim=-1) + 1)"),
    Mutation("detached KL target", "TNL101", "F.log_softmax(s2, dim=-1)", "F.log_softmax(s2, dim=-1).detach()",
             None, "drops the gradient of s2"),
    Mutation("twice the log-probabilities", "TNL102", "F.log_softmax(a, dim=-1)", "2 * F.log_softmax(a, dim=-1)"),
    Mutation("a clamp that bites ordinary values", "TNL201", "clamp_min(1e-12)", "clamp_min(10.0)"),
    Mutation("normalize with eps 1.0", "TNL202", "normalize(h, dim=-1)", "normalize(h, dim=-1, eps=1.0)"),
    Mutation("an eps inside the root too large", "TNL206", "clamp_min(1e-12)", "clamp_min(1e-2)"),
    Mutation("log-sigmoid of the wrong sign", "TNL104", "F.logsigmoid(-z)", "F.logsigmoid(z)"),
    Mutation("log-sigmoid detached", "TNL104", "F.logsigmoid(-z)", "F.logsigmoid(-z).detach()",
             None, "drops the gradient of z"),
    Mutation("norm without centring", "TNL204", "torch.linalg.vector_norm(h, dim=-1)",
             "torch.linalg.vector_norm(x, dim=-1)"),
]


def _mutated_fixer(mutation: Mutation) -> Callable:
    def fixer(info: catalogue.RuleInfo):
        real = linted.real_fixes(info)
        first = real[0]
        assert first.text is not None and mutation.old in first.text, (mutation.name, first.text)
        return (linted.Fixed(0, first.text.replace(mutation.old, mutation.new, 1), first.pinned),) + real[1:]

    return fixer


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_a_wrong_fix_fails(mutation):
    results = runner.verify(select=[mutation.code], device="cpu", dtypes=mutation.dtypes,
                            fixer=_mutated_fixer(mutation))
    fix_row = results[0]
    assert fix_row.oracle == "FIX" and fix_row.verdict == FIX_FAILED
    runs = [r for r in results if r.example == 1 and r.oracle != "FIX"]
    assert runs, "the mutation's dtypes are not run"
    assert all(r.verdict == FIX_FAILED for r in runs), [(r.dtype, r.verdict, r.reason) for r in runs]
    assert all(mutation.reason in r.reason for r in runs), [r.reason for r in runs]
    assert runner.exit_code(results) == 1


def test_the_original_as_its_own_fix_fails():
    """A fixer that changes nothing leaves the hazard: the 'fix' is not finite."""
    def fixer(info):
        real = linted.real_fixes(info)
        return (linted.Fixed(0, info.examples[0].bad, real[0].pinned),) + real[1:]

    results = runner.verify(select=["TNL101"], device="cpu", dtypes=["float32"], fixer=fixer)
    run = [r for r in results if r.oracle == "NF"]
    assert run[0].verdict == FIX_FAILED and "not finite" in run[0].reason


def test_a_broken_fixer_is_caught_in_the_text_and_in_the_values(monkeypatch):
    """The rule's fixer itself emits `log(softmax + 1)`: verify runs the fixer's text, so both the
    FIX row and the runs fail, while the pinned text is untouched."""
    import torchnumlint.fixes as fixes

    real = fixes.fix_text

    def broken(path, text, rules, *args, **kwargs):
        result = real(path, text, rules, *args, **kwargs)
        result.text = result.text.replace("F.log_softmax(logits, dim=-1)", "torch.log(F.softmax(logits, dim=-1) + 1)")
        return result

    monkeypatch.setattr(fixes, "fix_text", broken)
    results = runner.verify(select=["TNL103"], device="cpu", dtypes=["float32"])
    assert results[0].oracle == "FIX" and results[0].verdict == FIX_FAILED
    assert "differs from the pinned fix" in results[0].evidence[0]
    first = [r for r in results if r.example == 1 and r.oracle == "NF"]
    assert [r.verdict for r in first] == [FIX_FAILED]


def test_a_stale_pin_fails_the_fix_row_but_the_runs_use_the_linter(monkeypatch):
    """A pinned text that no longer matches the fixer fails the FIX row; the runs judge what the
    linter really writes (here correct), so they still confirm."""
    import dataclasses

    info = RULES["TNL103"]
    stale = dataclasses.replace(info.examples[0], fixed=info.examples[0].fixed.replace("dim=-1", "-1"))
    rules = {"TNL103": dataclasses.replace(info, examples=(stale,) + info.examples[1:])}
    results = runner.verify(select=["TNL103"], device="cpu", dtypes=["float32"], rules=rules)
    assert results[0].verdict == FIX_FAILED
    assert all(r.verdict == CONFIRMED for r in results[1:]), [(r.example, r.reason) for r in results[1:]]
