"""`# noqa` comments: per line (bare or with codes) and per file (`# torchnumlint: noqa`, and
flake8's `# flake8: noqa`, read as ruff reads it: bare, the whole file; with codes, those codes).

A code in a directive covers the codes it begins (`# noqa: TNL1` covers TNL101), as flake8 reads
it, so a comment means the same under `torchnumlint`, standard input, the server and flake8
(whose own noqa handling matches by prefix and cannot be changed by a plugin). The model as a
whole, for every front end, is `suppression.py`.

Each comment is read once into `Noqa` directives that know where they sit in the text (so a rule
about the comments themselves, TNL900 unused-noqa, can point at one and rewrite it). Suppressing
also records which (directive, code) pairs silenced a finding: a rule class with a `judge_noqa`
classmethod, enabled in the run, is then asked for findings about the comments (it sees every
finding the other enabled rules made, suppressed or not), and those findings are themselves
subject to noqa (`# noqa: TNL900`).
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, FrozenSet, Iterator, List, Sequence, Set, Tuple, Type

from torchnumlint.findings import Finding

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.rules.base import Rule

_CODE = r"[A-Za-z]+[0-9]+"
_CODES = rf"{_CODE}(?:[\s,]+{_CODE})*"
_LINE = re.compile(rf"#\s*noqa(?::\s*(?P<codes>{_CODES}))?", re.IGNORECASE)
_FILE = re.compile(rf"#\s*(?:torchnumlint|flake8):\s*noqa(?::\s*(?P<codes>{_CODES}))?", re.IGNORECASE)

_ANY = re.compile("noqa", re.IGNORECASE)

ALL: FrozenSet[str] = frozenset({"*"})


@dataclass(frozen=True)
class Code:
    """One code as written in a directive (`spelled`), upper-cased (`code`), and its offsets in the text."""

    code: str
    spelled: str
    start: int
    end: int


@dataclass(frozen=True)
class Noqa:
    """One noqa directive. Offsets index the whole text: `directive` is the `# noqa: ...` part,
    `comment` the comment token holding it (which may say more: `# type: ignore  # noqa: X1`),
    `code_end` the end of the code before the comment (the line's start when the comment is
    `alone`), `line_span` the whole line with its newline."""

    line: int
    file_wide: bool
    alone: bool
    codes: Tuple[Code, ...]  # empty: a bare noqa, which covers every code
    directive: Tuple[int, int]
    comment: Tuple[int, int]
    code_end: int
    line_span: Tuple[int, int]

    @property
    def covered(self) -> FrozenSet[str]:
        return frozenset(c.code for c in self.codes) if self.codes else ALL

    def covers(self, code: str) -> bool:
        """Whether the directive silences `code`: bare, or one of its codes begins it (flake8's reading)."""
        return not self.codes or any(code.startswith(c.code) for c in self.codes)


def _lines(text: str) -> List[str]:
    """The lines as `tokenize` reads them (so token columns index into them)."""
    return io.StringIO(text).readlines()


def _comments(text: str) -> Iterator[Tuple[int, int, str]]:
    """(line, column, comment) triples; real comments only, so `"# noqa"` inside a string does not count."""
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                yield tok.start[0], tok.start[1], tok.string
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return


def directives(text: str) -> List[Noqa]:
    """Every noqa directive of `text`, in order."""
    lines = _lines(text)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    found = []
    for row, col, comment in _comments(text):
        match = _FILE.search(comment)
        file_wide = match is not None
        if match is None:
            match = _LINE.search(comment)
            if match is None:
                continue
        line_start = starts[row - 1]
        before = lines[row - 1][:col]
        at = line_start + col
        codes: Tuple[Code, ...] = ()
        if match.group("codes"):
            base = at + match.start("codes")
            codes = tuple(
                Code(m.group().upper(), m.group(), base + m.start(), base + m.end()) for m in re.finditer(_CODE, match.group("codes"))
            )
        alone = not before.strip()
        found.append(
            Noqa(
                line=row,
                # as in ruff: a file-wide exemption stands on a line of its own; after code it
                # exempts that line only
                file_wide=file_wide and alone,
                alone=alone,
                codes=codes,
                directive=(at + match.start(), at + match.end()),
                comment=(at, at + len(comment)),
                code_end=line_start + len(before.rstrip()),
                line_span=(line_start, starts[row]),
            )
        )
    return found


def suppress(findings: Sequence[Finding], found: Sequence[Noqa]) -> Tuple[List[Finding], Set[Tuple[Noqa, str]]]:
    """The findings no directive covers, and every (directive, code) that covers one (a finding
    covered by a file-wide directive and by its line's marks both as used)."""
    whole = [noqa for noqa in found if noqa.file_wide]
    by_line: Dict[int, List[Noqa]] = {}
    for noqa in found:
        if not noqa.file_wide:
            by_line.setdefault(noqa.line, []).append(noqa)
    kept: List[Finding] = []
    used: Set[Tuple[Noqa, str]] = set()
    for finding in findings:
        covering = [n for n in whole if n.covers(finding.code)]
        covering += [n for line in finding.noqa_lines for n in by_line.get(line, ()) if n.covers(finding.code)]
        if covering:
            used.update((noqa, finding.code) for noqa in covering)
        else:
            kept.append(finding)
    return kept, used


def filter_findings(findings: List[Finding], text: str, rules: Sequence[Type["Rule"]] = (), path: str = "") -> List[Finding]:
    """`findings` less the suppressed ones, plus the findings at `path` of the enabled `rules`
    that judge the noqa comments themselves (`judge_noqa`), less the suppressed ones."""
    if not _ANY.search(text):
        return findings
    found = directives(text)
    kept, used = suppress(findings, found)
    enabled = frozenset(rule.code for rule in rules)
    for rule in rules:
        judge = getattr(rule, "judge_noqa", None)
        if judge is not None:
            kept += suppress(judge(path, text, found, used, enabled), found)[0]
    return kept
