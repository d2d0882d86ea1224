"""TNL900 unused-noqa: a `# noqa: TNL...` (or `# torchnumlint: noqa: TNL...`) code that
suppressed no finding in this run, or that names no rule.

A code is judged only when its rule is enabled in the run (a `--select TNL103` run says nothing
about a `# noqa: TNL201`, which may well be needed in the full run), or when no rule has it (a
typo: `TNL1003` for `TNL103`). Bare `# noqa`, other tools' codes (`E501`) and TNL900 itself are
never judged. The judgement comes after the walk, from the directives `directives.py` parsed and
the (directive, code) pairs that silenced a finding (`judge_noqa`, which `directives.filter_findings`
calls for an enabled rule that has one); the walk itself has nothing for this rule to visit.

The fix (SAFE: it removes only what silenced nothing) drops the unused codes and keeps the rest
(`# noqa: E501, TNL103` becomes `# noqa: E501`); a directive left with no code goes whole, with
the spaces before it, or its line when the comment stood alone; a comment that says more
(`# type: ignore  # noqa: TNL103`) keeps the rest. Findings that only `--strict` makes are judged
in the run's own mode: a code kept for a strict run is unused in a plain one.
"""

from __future__ import annotations

from typing import AbstractSet, List, Sequence, Set, Tuple

from torchnumlint.findings import Edit, Finding, Fix, Safety
from torchnumlint.rules.base import Example, Rule, registered
from torchnumlint.directives import Code, Noqa


def _plural(codes: Sequence[Code], one: str, many: str) -> str:
    return one if len(codes) == 1 else many


def _listed(codes: Sequence[Code]) -> str:
    return ", ".join(code.spelled for code in codes)


class UnusedNoqa(Rule):
    code = "TNL900"
    name = "unused-noqa"
    finds = "a `# noqa: TNL...` code of an enabled rule that suppressed nothing in this run, or a code no rule has"
    fix_summary = "safe: removes the unused codes (the comment when none is left)"
    message = "unused noqa {codes}: {why}"
    rationale = (
        "A `# noqa: TNL...` that suppresses nothing hides the next real finding on that line: "
        "when the code changes and the hazard appears there, the stale comment keeps it silent. "
        "After adopting torchnumlint on legacy code with `--add-noqa`, fixing a finding leaves its "
        "noqa behind; a typo (`TNL1003` for `TNL103`) suppresses nothing from the start. Only codes "
        "of rules enabled in the run are judged, and codes no rule has."
    )
    safety = Safety.SAFE
    default = False
    meta = True  # about suppression comments, not numerics: no runtime reproduction
    needles = ("noqa", "NOQA", "Noqa")
    examples = (
        Example(
            bad=("import torch\n\n\ndef log_probs(logits):\n    return torch.log_softmax(logits, dim=-1)  # noqa: TNL1003\n"),
            lines=(5,),
            fixed=("import torch\n\n\ndef log_probs(logits):\n    return torch.log_softmax(logits, dim=-1)\n"),
        ),
        Example(
            bad=("import torch\n\n\ndef log_probs(logits):\n    return torch.log_softmax(logits, dim=-1)  # noqa: E501, TNL0103\n"),
            lines=(5,),
            fixed=("import torch\n\n\ndef log_probs(logits):\n    return torch.log_softmax(logits, dim=-1)  # noqa: E501\n"),
        ),
    )
    good = (
        "import torch\n\n\ndef log_probs(logits):\n    return torch.log_softmax(logits, dim=-1)  # noqa: E501\n",
        "import torch\n\n\ndef log_probs(logits):\n    return torch.log(torch.softmax(logits, dim=-1))  # noqa: TNL103\n",
        "import torch\n\n\ndef log_probs(logits):\n    return torch.log_softmax(logits, dim=-1)  # noqa\n",
    )

    @classmethod
    def judge_noqa(
        cls, path: str, text: str, found: Sequence[Noqa], used: AbstractSet[Tuple[Noqa, str]], enabled: AbstractSet[str]
    ) -> List[Finding]:
        """A finding for each directive with a judged code that silenced nothing in this run."""
        known = registered()
        findings = []
        for noqa in found:
            # a prefix covers the codes it begins (`# noqa: TNL1`): unknown only when it begins none
            unknown = [c for c in noqa.codes if c.code.startswith("TNL") and not any(k.startswith(c.code) for k in known)]
            idle = [c for c in noqa.codes if c.code in enabled and c.code != cls.code and (noqa, c.code) not in used]
            if unknown or idle:
                findings.append(cls._finding(path, text, noqa, idle, unknown))
        return findings

    @classmethod
    def _finding(cls, path: str, text: str, noqa: Noqa, idle: List[Code], unknown: List[Code]) -> Finding:
        unused = sorted(idle + unknown, key=lambda c: c.start)
        why = []
        if idle:
            where = "in this file" if noqa.file_wide else "here"
            why.append(f"{_listed(idle)} found nothing {where} in this run")
        if unknown:
            why.append(f"{_listed(unknown)} {_plural(unknown, 'is not a rule', 'are not rules')}")
        message = cls.message.format(codes=f"{_plural(unused, 'code', 'codes')} {_listed(unused)}", why="; ".join(why))
        start, end = noqa.directive
        line_start = noqa.line_span[0]
        return Finding(
            code=cls.code,
            name=cls.name,
            message=message,
            path=path,
            line=noqa.line,
            col=start - line_start + 1,
            end_line=noqa.line,
            end_col=end - line_start + 1,
            fix=Fix((_removal(text, noqa, {c.start for c in unused}),), Safety.SAFE),
            noqa_lines=(noqa.line,),
        )


def _removal(text: str, noqa: Noqa, unused: Set[int]) -> Edit:
    """The edit that takes the `unused` codes (by offset) out of the directive."""
    kept = [c for c in noqa.codes if c.start not in unused]
    if kept:
        return _edit(text, noqa, noqa.codes[0].start, noqa.codes[-1].end, ", ".join(c.spelled for c in kept))
    comment_start, comment_end = noqa.comment
    start, end = noqa.directive
    before = text[comment_start:start].rstrip()
    after = text[end:comment_end]
    if before:  # a type-ignore comment before the directive: the comment's own text stays
        return _edit(text, noqa, comment_start + len(before), end, "")
    if after.strip():  # a reason written after the codes stays, as a comment
        return _edit(text, noqa, comment_start, comment_end, "# " + after.strip())
    if noqa.alone:
        return _edit(text, noqa, *noqa.line_span, "")
    return _edit(text, noqa, noqa.code_end, comment_end, "")


def _edit(text: str, noqa: Noqa, start: int, end: int, content: str) -> Edit:
    """An edit within the directive's line (or up to the start of the next)."""

    def position(offset: int) -> Tuple[int, int]:
        if text[noqa.line_span[0] : offset].endswith(("\n", "\r")):
            return noqa.line + 1, 1
        return noqa.line, offset - noqa.line_span[0] + 1

    return Edit(start, end, content, position(start), position(end))
