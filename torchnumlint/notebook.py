"""Jupyter notebooks (`.ipynb`, nbformat 4) as one Python module, and back.

The rules see a notebook as the module a kernel runs: its code cells in order, joined into one
virtual text, so a softmax assigned in one cell and logged in a later one is found. Between two
cells sits a `BOUNDARY` comment line, which tells the cells apart again after `--fix` has changed
the text (a fix may add or remove lines in a cell; it never edits a comment line).

IPython syntax is not Python: line magics (`%timeit f(x)`), shell lines (`!pip install`,
`files = !ls`), help (`torch.softmax?`) and the header of a cell magic are masked line by line
with a neutral line of the same length (`...`, or a comment where a statement could break the
indentation), so every other line keeps its position and the rest of the cell is linted. A cell
magic whose body is not Python (`%%bash`, `%%writefile`) masks its whole cell. A line is a magic
only where a logical line starts (the tokenizer says so): a `%` line inside brackets is a modulo,
a `!` line inside a string is text.

Findings are located the way Jupyter users count: `cell` is the 1-based number of the cell among
all the notebook's cells (markdown included, as ruff does), `line`/`col` are within the cell.

Writing back changes only the `source` of the cells whose text changed: the rest of the file
(outputs, metadata, key order, indentation, escaping of non-ASCII, the trailing newline) is kept
byte for byte, because the new value is spliced into the original JSON text at the old value's
span, in the old value's own form (a list of lines laid out as it was, or one string).
"""

from __future__ import annotations

import bisect
import codecs
import difflib
import io
import json
import re
import tokenize
from dataclasses import dataclass
from json.decoder import scanstring  # type: ignore[attr-defined]  # there at run time (the C scanner's Python face); typeshed leaves it out
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from torchnumlint.findings import Edit, Finding, Fix
from torchnumlint.sourcefile import SourceError, SourceFile

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.results import FileOutcome

BOUNDARY = "# %% (torchnumlint cell boundary)"
SUFFIX = ".ipynb"


def is_notebook(path: str) -> bool:
    """Whether `path` names a notebook: its top-level names are the program's own (nothing
    imports them), so a fix may rewrite their one assignment as it would a function's local."""
    return path.endswith(SUFFIX)


# Cell magics whose body IPython runs as Python: only their first line is masked.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "python", "python3", "pypy"})

_LINE_MAGIC = re.compile(r"[ \t]*[%!?]")  # %magic, !shell, ?help
_ASSIGNED_MAGIC = re.compile(r"[ \t]*[\w.]+(?:[ \t]*,[ \t]*[\w.]+)*[ \t]*=[ \t]*[%!]")  # out = !ls
_HELP = re.compile(r"[ \t]*[\w.]+\?{1,2}[ \t]*$")  # torch.softmax?
_NEWLINE = re.compile(r"\r\n|\r|\n")  # the engine's line breaks (not str.splitlines's many)
_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class Cell:
    """One code cell: where it is in the notebook, in its JSON and in the virtual module."""

    number: int  # 1-based, among all the notebook's cells
    text: str  # the source as written (magics and all)
    masked: str  # the source as the rules see it
    first_line: int  # of the virtual module, 1-based
    offset: int  # of its first character in the virtual module
    span: Optional[Tuple[int, int]]  # the `source` value in the JSON text; None when absent


class NotebookSource(SourceFile):
    """A notebook read as a source file: `text` is the virtual module, `raw` the file's bytes."""

    __slots__ = ("document", "cells")
    _fields = SourceFile._fields + __slots__
    document: str  # the file's JSON text
    cells: Tuple[Cell, ...]

    def __init__(
        self, path: str, raw: bytes, text: str, encoding: str, bom: bool, document: str = "", cells: Tuple[Cell, ...] = ()
    ) -> None:
        super().__init__(path, raw, text, encoding, bom)
        self.document, self.cells = document, cells

    def cell(self, number: int) -> Cell:
        for cell in self.cells:
            if cell.number == number:
                return cell
        raise KeyError(number)


# -- reading ---------------------------------------------------------------------------------------


def decode(path: str, raw: bytes) -> NotebookSource:
    """The notebook at `path` (its bytes), or a SourceError whose message is one line."""
    bom = raw.startswith(codecs.BOM_UTF8)
    try:
        document = raw[len(codecs.BOM_UTF8) :].decode("utf-8") if bom else raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"not a notebook: not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None
    try:
        notebook = json.loads(document)
    except json.JSONDecodeError as exc:
        raise SourceError(f"not a notebook: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    version = notebook.get("nbformat") if isinstance(notebook, dict) else None
    if version != 4:
        found = f"nbformat {version}" if version is not None else "no nbformat field"
        raise SourceError(f"not a notebook in nbformat 4 ({found})")
    cells = notebook.get("cells")
    if not isinstance(cells, list) or not all(isinstance(cell, dict) for cell in cells):
        raise SourceError("not a notebook in nbformat 4 (`cells` is not a list of cells)")
    spans = _source_spans(document)
    code: List[Tuple[int, str, Optional[Tuple[int, int]]]] = []
    if _is_python(notebook):
        for index, cell in enumerate(cells):
            if cell.get("cell_type") == "code" and _cell_is_python(cell):
                code.append((index + 1, _text_of(cell.get("source", ""), index + 1), spans.get(index)))
    return _assemble(path, raw, bom, document, code)


def _is_python(notebook: dict) -> bool:
    """Whether the kernel runs Python (a notebook that does not say is taken to be Python)."""
    metadata: dict = notebook["metadata"] if isinstance(notebook.get("metadata"), dict) else {}
    for key, field in (("language_info", "name"), ("kernelspec", "language")):
        value = metadata.get(key, {}).get(field) if isinstance(metadata.get(key), dict) else None
        if isinstance(value, str):
            return value.lower() == "python"
    return True


# Where an editor records that one code cell is in another language than the kernel's: VS Code's
# `languageId` ("javascript", "sql", "markdown"), .NET Interactive / Polyglot Notebooks' kernel.
_CELL_LANGUAGE = (("vscode", "languageId"), ("dotnet_interactive", "language"), ("polyglot_notebook", "kernelName"))


def _cell_is_python(cell: dict) -> bool:
    """Whether a code cell holds Python: one whose metadata names another language is left out
    (it is not linted, and not parsed: a JavaScript cell would make the whole notebook a syntax
    error), the notebook's other cells are linted."""
    metadata = cell.get("metadata")
    if not isinstance(metadata, dict):
        return True
    for key, field in _CELL_LANGUAGE:
        value = metadata.get(key, {}).get(field) if isinstance(metadata.get(key), dict) else None
        if isinstance(value, str):
            return value.lower() in ("python", "python3", "ipython")
    return True


def _text_of(source: object, number: int) -> str:
    if isinstance(source, str):
        return source
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        return "".join(source)
    raise SourceError(f"not a notebook in nbformat 4 (cell {number}: `source` is neither a string nor a list of strings)")


def _assemble(
    path: str, raw: bytes, bom: bool, document: str, code: Sequence[Tuple[int, str, Optional[Tuple[int, int]]]]
) -> NotebookSource:
    """The virtual module: each code cell masked, ended by a newline, cells split by BOUNDARY."""
    parts: List[str] = []
    cells: List[Cell] = []
    line, offset = 1, 0
    for position, (number, text, span) in enumerate(code):
        if position:
            parts.append(BOUNDARY + "\n")
            line, offset = line + 1, offset + len(BOUNDARY) + 1
        masked = mask(text)
        segment = masked if masked == "" or masked.endswith(("\n", "\r")) else masked + "\n"
        cells.append(Cell(number, text, masked, line, offset, span))
        parts.append(segment)
        line, offset = line + len(_NEWLINE.findall(segment)), offset + len(segment)
    return NotebookSource(path, raw, "".join(parts), "utf-8", bom, document=document, cells=tuple(cells))


def _source_spans(document: str) -> Dict[int, Tuple[int, int]]:
    """Index of each cell (0-based) -> the span of its `source` value in `document` (valid JSON)."""
    spans: Dict[int, Tuple[int, int]] = {}
    start = _skip(document, 0)
    for key, value, _ in _members(document, start):
        if key == "cells" and document[value] == "[":
            for index, (cell, _) in enumerate(_items(document, value)):
                if document[cell] == "{":
                    for name, begin, end in _members(document, cell):
                        if name == "source":
                            spans[index] = (begin, end)
    return spans


def _skip(text: str, index: int) -> int:
    found = _WHITESPACE.match(text, index)
    assert found is not None  # the pattern matches the empty string, so everywhere
    return found.end()


def _members(text: str, index: int) -> List[Tuple[str, int, int]]:
    """(key, value start, value end) of the object at `index`, in order (duplicates kept)."""
    found = []
    index = _skip(text, index + 1)
    while text[index] == '"':
        key, index = scanstring(text, index + 1)
        index = _skip(text, _skip(text, index) + 1)  # past the colon
        end = _DECODER.raw_decode(text, index)[1]
        found.append((key, index, end))
        index = _skip(text, end)
        if text[index] == ",":
            index = _skip(text, index + 1)
    return found


def _items(text: str, index: int) -> List[Tuple[int, int]]:
    """(start, end) of each element of the array at `index`."""
    found = []
    index = _skip(text, index + 1)
    while text[index] != "]":
        end = _DECODER.raw_decode(text, index)[1]
        found.append((index, end))
        index = _skip(text, end)
        if text[index] == ",":
            index = _skip(text, index + 1)
    return found


# -- masking IPython syntax ------------------------------------------------------------------------


def mask(text: str) -> str:
    """`text` (one cell) with its IPython-only lines replaced by neutral lines of the same length."""
    lines = _lines(text)
    body = [line.rstrip("\r\n") for line in lines]
    first = next((i for i, line in enumerate(body) if line.strip()), None)
    if first is not None and body[first].startswith("%%"):
        name = body[first][2:].split(maxsplit=1)[0] if body[first][2:].strip() else ""
        masked = (
            [_comment(line) for line in body]
            if name not in PYTHON_CELL_MAGICS
            else (body[:first] + [_comment(body[first])] + body[first + 1 :])
        )
        if name not in PYTHON_CELL_MAGICS:
            return _rejoin(lines, masked)
        body = masked
    heads = {i for i, line in enumerate(body) if _is_magic(line)}
    while True:
        masked = _masked(body, heads)
        kept = heads - _continuation_lines("".join(masked[i] + "\n" for i in range(len(masked))))
        if kept == heads:
            return _rejoin(lines, masked)
        heads = kept


def _lines(text: str) -> List[str]:
    """`text`'s lines with their line breaks, split where the engine splits them."""
    return _LINES.findall(text)


def _is_magic(line: str) -> bool:
    return bool(_LINE_MAGIC.match(line) or _ASSIGNED_MAGIC.match(line) or _HELP.match(line))


def _masked(body: List[str], heads: Set[int]) -> List[str]:
    """Each head line as a statement (`...`, or `0` where that does not fit) at its indentation;
    the lines its trailing backslashes join to it as comments."""
    out = list(body)
    for i in sorted(heads):
        line = body[i]
        indent = len(line) - len(line.lstrip(" \t"))
        width = len(line) - indent
        out[i] = line[:indent] + ("..." if width >= 3 else "0").ljust(width)
        j = i
        while body[j].endswith("\\") and j + 1 < len(body):
            j += 1
            out[j] = _comment(body[j])
    return out


def _comment(line: str) -> str:
    return "#".ljust(len(line)) if line else line


def _rejoin(lines: List[str], masked: List[str]) -> str:
    """The masked lines with the original line breaks."""
    return "".join(new + old[len(old.rstrip("\r\n")) :] for old, new in zip(lines, masked))


def _continuation_lines(text: str) -> Set[int]:
    """0-based lines of `text` that do not start a logical line: inside brackets, a string, or
    after a backslash. Lines past a tokenize error are not named (the cell is broken there)."""
    inside: Set[int] = set()
    depth, at_start, last_row = 0, True, 0
    skip = (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT, tokenize.ENDMARKER)
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.NEWLINE or (token.type == tokenize.NL and depth == 0):
                at_start = True
            if token.type in skip:
                continue
            row, end_row = token.start[0], token.end[0]
            if row > last_row and not at_start:
                inside.add(row - 1)
            inside.update(range(row, end_row))  # rows 2.. of a multi-line string (0-based: row..)
            at_start, last_row = False, end_row
            if token.type == tokenize.OP and token.string in "([{":
                depth += 1
            elif token.type == tokenize.OP and token.string in ")]}":
                depth = max(0, depth - 1)
    except (tokenize.TokenError, SyntaxError):
        pass
    return inside


# -- locating findings in cells --------------------------------------------------------------------


def _cell_at(source: NotebookSource, line: int) -> Cell:
    """The cell holding virtual `line` (a boundary line belongs to the cell before it)."""
    starts = [cell.first_line for cell in source.cells]
    return source.cells[max(0, bisect.bisect_right(starts, line) - 1)]


def _edit_in(cell: Cell, edit: Edit) -> Edit:
    shift = cell.first_line - 1
    return edit._replace(
        start=edit.start - cell.offset,
        end=edit.end - cell.offset,
        location=(edit.location[0] - shift, edit.location[1]),
        end_location=(edit.end_location[0] - shift, edit.end_location[1]),
    )


def locate_findings(source: SourceFile, findings: Iterable[Finding]) -> List[Finding]:
    """Findings on the virtual module -> findings in their cells (rows, columns and the fix's
    offsets within the cell's text). Findings of any other source pass unchanged."""
    if not isinstance(source, NotebookSource) or not source.cells:
        return list(findings)
    located = []
    for finding in findings:
        cell = _cell_at(source, finding.line)
        shift = cell.first_line - 1
        fix = finding.fix
        if fix is not None:
            fix = Fix(tuple(_edit_in(cell, edit) for edit in fix.edits), fix.safety)
        located.append(
            finding.replace(
                cell=cell.number,
                line=finding.line - shift,
                end_line=finding.end_line - shift,
                fix=fix,
                noqa_lines=tuple(row - shift for row in finding.noqa_lines),
            )
        )
    return located


_POSITION = re.compile(r"^(?P<head>cannot parse: )?line (?P<line>\d+)")


def locate_error(source: SourceFile, error: str) -> str:
    """`path: [cannot parse: ]line N...` -> `path: [cannot parse: ]cell C, line n...`."""
    prefix = f"{source.path}: "
    if not isinstance(source, NotebookSource) or not source.cells or not error.startswith(prefix):
        return error
    message = error[len(prefix) :]
    match = _POSITION.match(message)
    if match is None:
        return error
    cell = _cell_at(source, int(match.group("line")))
    where = f"{match.group('head') or ''}cell {cell.number}, line {int(match.group('line')) - cell.first_line + 1}"
    return prefix + where + message[match.end() :]


def locate(source: SourceFile, outcome: FileOutcome) -> FileOutcome:
    """The outcome of linting `source`, its findings and errors located in cells."""
    if isinstance(source, NotebookSource):
        outcome.findings = locate_findings(source, outcome.findings)
        outcome.errors = [locate_error(source, error) for error in outcome.errors]
    return outcome


def cell_text(source: SourceFile, number: Optional[int]) -> str:
    """The text a finding's rows and columns refer to: its cell's source as written, or the file's."""
    if number is None or not isinstance(source, NotebookSource):
        return source.text
    return source.cell(number).text


# -- writing back ----------------------------------------------------------------------------------


def cell_sources(source: NotebookSource, text: str) -> List[str]:
    """The source of each code cell once the virtual module is `text` (magics restored)."""
    segments = re.split("^" + re.escape(BOUNDARY) + r"(?:\r\n|\r|\n)", text, flags=re.M)
    if len(segments) != max(1, len(source.cells)):
        raise SourceError("not written: the fixed text no longer tells the notebook's cells apart")
    if not source.cells:
        return []
    return [_restored(cell, segment) for cell, segment in zip(source.cells, segments)]


def _restored(cell: Cell, segment: str) -> str:
    """The cell's fixed source: its segment without the newline the module added, and the lines
    masked in it put back (they are the lines the fix left equal to the masked ones)."""
    added = cell.masked != "" and not cell.masked.endswith(("\n", "\r"))
    if added and segment.endswith("\n"):
        segment = segment[:-1]
    if segment == cell.masked:
        return cell.text
    old_masked, old, new = _lines(cell.masked), _lines(cell.text), _lines(segment)
    out: List[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old_masked, new, autojunk=False).get_opcodes():
        out += old[i1:i2] if tag == "equal" else new[j1:j2]
    return "".join(out)


def encode(source: NotebookSource, text: str) -> bytes:
    """The notebook's bytes once its virtual module is `text`: only changed cells' sources differ."""
    document = source.document
    ascii_only = all(ord(char) < 128 for char in document)  # how json.dumps was called on it
    changed = [
        (cell.span, new) for cell, new in zip(source.cells, cell_sources(source, text)) if new != cell.text and cell.span is not None
    ]
    for (start, end), new in sorted(changed, reverse=True):  # from the end: earlier spans stay put
        document = document[:start] + _render(document[start:end], new, ascii_only) + document[end:]
    data = document.encode("utf-8")
    return codecs.BOM_UTF8 + data if source.bom else data


def _render(old: str, text: str, ascii_only: bool) -> str:
    """`text` as a JSON `source` value in the form and layout of `old` (its JSON text)."""
    if not old.startswith("["):
        return json.dumps(text, ensure_ascii=ascii_only)
    items = _items(old, 0)
    tokens = {json.loads(old[start:end]): old[start:end] for start, end in items}  # unchanged lines as written
    lines = _lines(text)
    if not lines:
        return "[]"
    if items:
        opening, closing = old[1 : items[0][0]], old[items[-1][1] : -1]
        separator = old[items[0][1] : items[1][0]] if len(items) > 1 else "," + opening
    else:
        opening, closing, separator = "", "", ", "
    body = separator.join(tokens.get(line) or json.dumps(line, ensure_ascii=ascii_only) for line in lines)
    return "[" + opening + body + closing + "]"


def diff(source: NotebookSource, text: str) -> str:
    """What `--fix` would change, one unified diff per changed cell (`a/nb.ipynb:cell 4`)."""
    out = []
    for cell, new in zip(source.cells, cell_sources(source, text)):
        if new != cell.text:
            name = f"{source.path}:cell {cell.number}"
            lines = difflib.unified_diff(_lines(cell.text), _lines(new), fromfile=f"a/{name}", tofile=f"b/{name}")
            out.append("".join(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of cell\n" for line in lines))
    return "".join(out)
