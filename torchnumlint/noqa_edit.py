"""`--add-noqa`: silence every current finding with a `# noqa: CODE` comment, to adopt the linter
on legacy code and hold new code to it.

Each finding gets its code on a line whose noqa suppresses it (`Finding.noqa_lines`: its own line,
else the first or last line of its statement) and where a comment can go: a line that ends in a
string that goes on (a triple-quoted string) or in a backslash continuation cannot take one, so
the next candidate does. An existing directive on that line is merged with (`# noqa: TNL101` ->
`# noqa: TNL101, TNL103`); a bare `# noqa` already covers everything; another comment
(`# type: ignore`) is kept and the directive follows it. Files are written through `source.py`
(encoding, BOM, line endings, notebooks' JSON), and only files that change.
"""

from __future__ import annotations

import io
import re
import tokenize
from typing import Dict, Iterable, List, Set, Tuple

from torchnumlint.findings import Finding
from torchnumlint.notebook import NotebookSource
from torchnumlint.source import SourceError, SourceFile, read_source, write_source
from torchnumlint.directives import directives

_LINE_END = re.compile(r"[ \t]*(\r\n|\r|\n)?\Z")


def add_noqa(findings: Iterable[Finding], skip: Iterable[str] = ()) -> Tuple[int, List[str]]:
    """Write the directives that silence `findings` (codes in `skip` excepted) into their files.
    Returns (how many lines got a code, one error line per file that could not be written)."""
    by_path: Dict[str, List[Finding]] = {}
    skipped = set(skip)
    for finding in findings:
        if finding.code not in skipped:
            by_path.setdefault(finding.path, []).append(finding)
    added, errors = 0, []
    for path, found in by_path.items():
        try:
            source = read_source(path)
            text, count = with_noqa(source.text, _wanted(source, found))
            if count:
                write_source(source, text)
        except SourceError as exc:
            errors.append(f"{path}: {exc}")
            continue
        added += count
    return added, errors


def _wanted(source: SourceFile, findings: List[Finding]) -> Dict[Tuple[int, ...], Set[str]]:
    """Candidate lines (in the order the directive is best placed) -> the codes to put there, in
    the rows of `source.text` (a notebook finding's rows are its cell's)."""
    wanted: Dict[Tuple[int, ...], Set[str]] = {}
    for finding in findings:
        shift = 0
        if finding.cell is not None and isinstance(source, NotebookSource):
            shift = source.cell(finding.cell).first_line - 1
        lines = tuple(row + shift for row in (finding.noqa_lines or (finding.line,)))
        wanted.setdefault(lines, set()).add(finding.code)
    return wanted


def with_noqa(text: str, wanted: Dict[Tuple[int, ...], Set[str]]) -> Tuple[str, int]:
    """`text` with each set of codes added to the first of its candidate lines that can hold a
    comment; returns the text and how many lines changed."""
    open_lines = _commentable(text)
    codes: Dict[int, Set[str]] = {}
    for candidates, found in wanted.items():
        line = next((row for row in candidates if row in open_lines), None)
        if line is not None:
            codes.setdefault(line, set()).update(found)
    existing = {noqa.line: noqa for noqa in directives(text) if not noqa.file_wide}
    lines = io.StringIO(text).readlines()
    starts = [0]
    for text_line in lines:
        starts.append(starts[-1] + len(text_line))
    edits: List[Tuple[int, str]] = []  # (offset, text to insert)
    for row, found in codes.items():
        noqa = existing.get(row)
        if noqa is not None:
            missing = sorted(found - noqa.covered) if noqa.codes else []
            if missing:
                edits.append((noqa.codes[-1].end, "".join(f", {code}" for code in missing)))
            continue
        body = lines[row - 1]
        ending = _LINE_END.search(body)
        assert ending is not None  # the pattern ends at `$`: it matches every line
        end = starts[row - 1] + ending.start()
        edits.append((end, f"  # noqa: {', '.join(sorted(found))}"))
    for offset, insert in sorted(edits, reverse=True):
        text = text[:offset] + insert + text[offset:]
    return text, len(edits)


def _commentable(text: str) -> Set[int]:
    """The lines that end where a comment may follow: not inside a string, not continued by a
    backslash (exactly the lines on which tokenize sees a comment or a line end)."""
    rows: Set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT):
                rows.add(token.start[0])
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass  # the lines read so far are known; a file that linted tokenizes whole
    return rows
