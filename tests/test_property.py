"""Property tests: any valid program lints without an internal error, and every fix keeps it valid.

Programs come from hypothesmith (random programs from CPython's grammar), with rule examples
spliced in so that rules fire and fixes are applied among arbitrary code. A "clear answer" is a
list of findings or a ParseError (LibCST refuses a few programs CPython accepts); anything else
raised is a bug.
"""

import pytest

hypothesis = pytest.importorskip("hypothesis")
hypothesmith = pytest.importorskip("hypothesmith")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from torchnumlint import prepass  # noqa: E402
from torchnumlint.engine import ParseError, lint_text  # noqa: E402
from torchnumlint.fixes import fix_text  # noqa: E402
from torchnumlint.rules.registry import registry  # noqa: E402

RULES = list(registry().values())
EXAMPLES = [example.bad for rule in RULES for example in rule.examples]
PROFILE = settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), database=None)


def _valid(text):
    try:
        prepass.parse(text, "p.py")
    except (SyntaxError, ValueError, prepass.TooDeep):
        return False
    return True


@PROFILE
@given(hypothesmith.from_grammar())
def test_any_valid_program_lints_without_an_internal_error(program):
    text = "import torch\n" + program
    if not _valid(text):  # hypothesmith's grammar is a little wider than CPython's checks
        return
    try:
        lint_text("p.py", text, RULES)
    except ParseError:
        pass


@PROFILE
@given(st.lists(st.one_of(st.sampled_from(EXAMPLES), hypothesmith.from_grammar()), min_size=1, max_size=4))
def test_every_fix_keeps_the_program_valid_and_reaches_a_fixpoint(parts):
    text = "\n\n".join(part if part.endswith("\n") else part + "\n" for part in parts)
    if not _valid(text):
        return
    try:
        result = fix_text("p.py", text, RULES, unsafe=True)
    except ParseError:
        return
    assert _valid(result.text), result.text
    if result.text != text:
        again = fix_text("p.py", result.text, RULES, unsafe=True)
        assert again.text == result.text
