"""Rule documentation, generated from the rule classes (so docs never drift from behaviour)."""

from __future__ import annotations

import re
import textwrap
from typing import Optional, Tuple, Type

from torchnumlint.findings import Safety
from torchnumlint.rules.base import Rule

_SAFETY = {
    Safety.SAFE: "safe (applied by --fix)",
    Safety.UNSAFE: "unsafe (applied by --fix --unsafe-fixes)",
    Safety.GUIDE: "none (the message says what to do)",
}
_MEANING = {
    Safety.SAFE: "the fixed code gives the same values (float tolerance) wherever the original was finite",
    Safety.UNSAFE: "the fixed code can give other values than the original where it was finite",
}


def _fix_safety(rule: Type[Rule]) -> str:
    """The "Fix safety" paragraph: the rule's default, and every example whose fix differs."""
    if rule.safety is Safety.GUIDE:
        return "This rule offers no automatic fix: the message says what to do."
    text = f"Fixes are {rule.safety.value} by default: {_MEANING[rule.safety]}."
    own = [
        (i, ex.fix_safety(rule)) for i, ex in enumerate(rule.examples, 1) if ex.fixed is not None and ex.fix_safety(rule) is not rule.safety
    ]
    for i, safety in own:
        text += f" Example {i}'s fix is {safety.value}: {_MEANING[safety]}."
    return text


def _block(code: str) -> str:
    return textwrap.indent(code.rstrip("\n"), "    ")


def reported_message(rule: Type[Rule]) -> Tuple[str, Optional[int]]:
    """The message as a user reads it: the rule's finding on its first example that gives one
    (its placeholders filled as on real code), with that example's number; the template without
    its placeholders (and None) when no example gives one."""
    from torchnumlint.engine import lint_text

    for strict in (False, True):
        for number, example in enumerate(rule.examples, 1):
            found = [f for f in lint_text("example.py", example.bad, [rule], strict=strict) if f.code == rule.code]
            if found:
                return found[0].message, number
    return re.sub(r"\{\w+\}", "", rule.message), None


def explain(rule: Type[Rule]) -> str:
    message, number = reported_message(rule)
    out = [
        f"{rule.code} ({rule.name})",
        "",
        f"Fix: {_SAFETY[rule.safety]}.  Default: {'on' if rule.default else 'off (select it by its code)'}.",
        "",
        f"Message (as reported on example {number}):" if number else "Message:",
        textwrap.fill(message, 88, initial_indent="    ", subsequent_indent="    "),
        "",
        "Why:",
        textwrap.fill(rule.rationale, 88, initial_indent="    ", subsequent_indent="    "),
        "",
        "Fix safety:",
        textwrap.fill(_fix_safety(rule), 88, initial_indent="    ", subsequent_indent="    "),
    ]
    for i, example in enumerate(rule.examples, 1):
        where = ", ".join(str(n) for n in example.lines)
        out += ["", f"Example {i} (flagged at line {where}):", _block(example.bad)]
        if example.fixed is not None:
            unsafe = example.fix_safety(rule) is Safety.UNSAFE
            out += ["", "  becomes, with --fix" + (" --unsafe-fixes" if unsafe else "") + ":", _block(example.fixed)]
    for i, good in enumerate(rule.good, 1):
        out += ["", f"Not flagged ({i}):", _block(good)]
    out += ["", f"Suppress one line with `# noqa: {rule.code}`."]
    return "\n".join(out)


def rules_table(rules) -> str:
    """Every rule's code, name, fix and default, with the message it reports on its first
    example on the lines below (whole: a cut message would be a fragment)."""
    rows = [f"{'code':<7} {'name':<34} {'fix':<7} default", "        message (as reported on the rule's first example)"]
    for rule in rules:
        rows.append(f"{rule.code:<7} {rule.name:<34} {rule.safety.value:<7} {'on' if rule.default else 'off'}")
        rows.append(textwrap.fill(reported_message(rule)[0], 100, initial_indent=" " * 8, subsequent_indent=" " * 8))
    return "\n".join(rows)
