"""What the linter itself does to each example: the text `verify` runs is the fixer's, not a copy.

A reproduction that ran the pinned `fixed` text would prove the pin, not the fixer: a fixer broken to
emit a wrong rewrite would still be CONFIRMED. So `verify` lints every example of a rule with the
real engine, applies the real fixes (unsafe ones included: the example shows the rule's fix), and
runs what comes out; where that differs from the pinned text the rule's fix has drifted, which is a
failure in itself.

This is the one module of the runtime side that reaches the linter (libcst), and only when called:
importing it costs nothing, so a torch-only box can still import the runtime side.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

from torchnumlint.catalogue import RuleInfo

PATH = "example.py"


@dataclass(frozen=True)
class Fixed:
    """The linter's fix of one example: `text` (None when it offers none) against the pinned text."""

    example: int
    text: Optional[str]
    pinned: Optional[str]
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and self.text == self.pinned

    def describe(self) -> str:
        where = f"example {self.example + 1}"
        if self.error:
            return f"{where}: the fixer failed: {self.error}"
        if self.ok:
            return f"{where}: the fixer's text equals the pinned fix" if self.pinned else f"{where}: no fix offered, as pinned"
        if self.text is None:
            return f"{where}: the fixer offers no fix; the example pins one"
        if self.pinned is None:
            return f"{where}: the fixer rewrites an example that pins no fix"
        diff = [
            line
            for line in difflib.unified_diff(self.pinned.splitlines(), self.text.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and line[:3] not in ("---", "+++")
        ]
        return f"{where}: the fixer's text differs from the pinned fix: " + " | ".join(diff[:4])


Fixer = Callable[[RuleInfo], Tuple[Fixed, ...]]


def real_fixes(info: RuleInfo) -> Tuple[Fixed, ...]:
    """Each example of the rule, linted and fixed by the engine with this rule alone."""
    from torchnumlint.engine import ParseError
    from torchnumlint.fixes import fix_text
    from torchnumlint.rules.registry import registry

    rule = registry().get(info.code)
    results = []
    for i, example in enumerate(info.examples):
        if rule is None:
            results.append(Fixed(i, None, example.fixed, error=f"no rule {info.code} is registered"))
            continue
        try:
            outcome = fix_text(PATH, example.bad, [rule], unsafe=True)
        except ParseError as exc:
            results.append(Fixed(i, None, example.fixed, error=str(exc)))
            continue
        if outcome.errors:
            results.append(Fixed(i, None, example.fixed, error="; ".join(map(str, outcome.errors))))
            continue
        text = outcome.text if outcome.text != example.bad else None
        results.append(Fixed(i, text, example.fixed))
    return tuple(results)
