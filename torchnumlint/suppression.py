"""`# noqa` comments: per line (bare or with codes) and per file (`# torchnumlint: noqa`)."""

from __future__ import annotations

import io
import re
import tokenize
from typing import Dict, FrozenSet, Iterator, List, Optional, Tuple

from torchnumlint.findings import Finding

_CODES = r"[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*"
_LINE = re.compile(rf"#\s*noqa(?::\s*(?P<codes>{_CODES}))?", re.IGNORECASE)
_FILE = re.compile(rf"#\s*torchnumlint:\s*noqa(?::\s*(?P<codes>{_CODES}))?", re.IGNORECASE)

_ANY = re.compile("noqa", re.IGNORECASE)

ALL: FrozenSet[str] = frozenset({"*"})


def _codes(text: Optional[str]) -> FrozenSet[str]:
    if not text:
        return ALL
    return frozenset(code.upper() for code in re.split(r"[\s,]+", text.strip()) if code)


def _comments(text: str) -> Iterator[Tuple[int, str, bool]]:
    """(line, comment, alone on its line) triples; real comments only, so `"# noqa"` inside a
    string does not count."""
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                yield tok.start[0], tok.string, not tok.line[: tok.start[1]].strip()
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return


def parse_noqa(text: str) -> Tuple[Dict[int, FrozenSet[str]], FrozenSet[str]]:
    """Line -> suppressed codes (ALL for a bare noqa), and the codes suppressed for the whole file."""
    lines: Dict[int, FrozenSet[str]] = {}
    whole: FrozenSet[str] = frozenset()
    for line, comment, alone in _comments(text):
        file_match = _FILE.search(comment)
        if file_match:
            codes = _codes(file_match.group("codes"))
            if alone:  # as in ruff: a file-wide exemption stands on a line of its own
                whole = whole | codes
            else:  # after code it exempts that line only
                lines[line] = lines.get(line, frozenset()) | codes
            continue
        match = _LINE.search(comment)
        if match:
            lines[line] = lines.get(line, frozenset()) | _codes(match.group("codes"))
    return lines, whole


def _covers(codes: FrozenSet[str], code: str) -> bool:
    return codes is ALL or "*" in codes or code in codes


def filter_findings(findings: List[Finding], text: str) -> List[Finding]:
    if not _ANY.search(text):
        return findings
    lines, whole = parse_noqa(text)
    kept = []
    for finding in findings:
        if whole and _covers(whole, finding.code):
            continue
        if any(_covers(lines[n], finding.code) for n in finding.noqa_lines if n in lines):
            continue
        kept.append(finding)
    return kept
