import sys
import textwrap

import pytest

from torchnumlint.engine import lint_text
from torchnumlint.fixes import fix_text
from torchnumlint.rules.registry import registry


@pytest.fixture(autouse=True)
def _seeded_torch():
    """Every test starts from the same torch random state, so a test that draws from the global
    generator sees the same values whatever ran before it (a draw that depends on test order once
    overflowed float16 in CI). torch is seeded only where a test has already imported it: the
    linter's own tests never pay for the import."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(0)


def _rules(select):
    rules = registry()
    return [rules[c] for c in select] if select else [r for r in rules.values() if r.default]


def lint(code, *select, path="example.py", strict=False):
    """Findings of `select` (default: the default rules) on dedented `code`, as (code, line);
    `strict` also reports findings without evidence that the hazard is reached."""
    return [(f.code, f.line) for f in lint_text(path, textwrap.dedent(code), _rules(select), strict=strict)]


def fixed(code, *select, unsafe=True, path="example.py", strict=False):
    return fix_text(path, textwrap.dedent(code), _rules(select), unsafe=unsafe, strict=strict).text


@pytest.fixture
def tnl():
    """`tnl.lint(code, "TNL101")`, `tnl.fixed(code, "TNL101")`."""

    class _Api:
        pass

    api = _Api()
    api.lint = lint
    api.fixed = fixed
    return api
