"""Rule documentation, generated from the rule classes (so docs never drift from behaviour)."""

from __future__ import annotations

import re
import textwrap
from typing import Type

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
    own = [(i, ex.fix_safety(rule)) for i, ex in enumerate(rule.examples, 1)
           if ex.fixed is not None and ex.fix_safety(rule) is not rule.safety]
    for i, safety in own:
        text += f" Example {i}'s fix is {safety.value}: {_MEANING[safety]}."
    return text


def _block(code: str) -> str:
    return textwrap.indent(code.rstrip("\n"), "    ")


def explain(rule: Type[Rule]) -> str:
    out = [
        f"{rule.code} ({rule.name})",
        "",
        f"Fix: {_SAFETY[rule.safety]}.  Default: {'on' if rule.default else 'off (select it by its code)'}.",
        "",
        "Message:",
        textwrap.fill(rule.message.replace("{", "<").replace("}", ">"), 88, initial_indent="    ",
                      subsequent_indent="    "),
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
            out += ["", "  becomes, with --fix" + (" --unsafe-fixes" if unsafe else "") + ":",
                    _block(example.fixed)]
    for i, good in enumerate(rule.good, 1):
        out += ["", f"Not flagged ({i}):", _block(good)]
    out += ["", f"Suppress one line with `# noqa: {rule.code}`."]
    return "\n".join(out)


def rules_table(rules) -> str:
    rows = [f"{'code':<7} {'name':<34} {'fix':<7} {'default':<7} message"]
    for rule in rules:
        message = re.sub(r"(?:\.\.\.)+", "...", re.sub(r"\{\w+\}", "...", rule.message.split(":")[0]))
        rows.append(
            f"{rule.code:<7} {rule.name:<34} {rule.safety.value:<7} {'on' if rule.default else 'off':<7} {message}"
        )
    return "\n".join(rows)
