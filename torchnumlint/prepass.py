"""The `ast` pre-pass: what of a file LibCST must see, found with CPython's own parser.

CPython parses a file about ten times faster than LibCST, and it survives inputs that LibCST
does not: a valid 10,000-term sum crashes LibCST's native parser (a segfault, not an exception),
and nesting a few thousand levels deep makes it slow (its cost grows with the square of the
depth). So every file is parsed here first, and LibCST is given a *masked* copy of the text:

- statements nested deeper than `MAX_DEPTH` are replaced by `pass` (each one skipped is named
  in a warning, file and line; the rest of the file is linted);
- top-level functions and classes in which no enabled rule can fire are replaced too (see
  `candidates.py`), so LibCST parses only what can match.

A masked statement keeps its length and its line breaks (`pass`, then spaces), so every offset,
line and column LibCST gives for the text around it is the original text's: findings and fixes
need no mapping back.
"""

from __future__ import annotations

import ast
import re
import sys
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, List, NamedTuple, Optional, Tuple

from torchnumlint.ast_nodes import child_nodes

# Deepest expression (in `ast` levels below its statement) handed to LibCST. LibCST's parse of a
# 1,500-deep sum takes ~0.4 s and its walk needs ~10,000 Python frames; the native parser
# crashes somewhere between 5,000 and 10,000 levels.
MAX_DEPTH = 1500
# The Python recursion limit while a file is parsed and analysed: enough for MAX_DEPTH levels of
# LibCST's recursive codegen and of our walk (3.11 keeps pure-Python frames off the C stack).
RECURSION_LIMIT = 30_000
_NEWLINE = re.compile(r"(\r\n|\r|\n)")  # the line breaks of Python's tokenizer (not str.splitlines')


class ParseError(Exception):
    """The text is not valid Python; the message says where and why."""


class TooDeep(Exception):
    """The file is nested beyond what even CPython's parser builds at RECURSION_LIMIT."""


@contextmanager
def recursion_limit(limit: int = RECURSION_LIMIT) -> Iterator[None]:
    """Raise (never lower) the recursion limit for the duration of the block."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def parse(text: str, path: str) -> ast.Module:
    """CPython's tree of `text`. Raises SyntaxError (with CPython's message), ValueError, or
    TooDeep where the tree cannot be built."""
    try:
        with recursion_limit(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # CPython's SyntaxWarnings (`"\d"`) are not ours to print
            return ast.parse(text, filename=path)
    except RecursionError:
        raise TooDeep("the file is nested too deeply to parse") from None
    except MemoryError:  # CPython's parser says so, with no message, when its own stack runs out
        raise TooDeep("the file is nested too deeply (or is too large) for CPython's parser (MemoryError)") from None


def check_syntax(text: str, path: str) -> ast.Module:
    """CPython's tree of `text`: the syntax check every file gets, and the pre-pass's input.
    Here, not in `engine`, so that a file no rule can report in is checked without libcst."""
    try:
        return parse(text, path)
    except SyntaxError as exc:
        raise ParseError(f"line {exc.lineno}, column {exc.offset}: {exc.msg}") from None
    except (ValueError, MemoryError, TooDeep) as exc:
        raise ParseError(str(exc)) from None


@dataclass
class Lines:
    """Character offsets of line starts, and the UTF-8 byte columns `ast` gives turned into
    character offsets."""

    text: str
    starts: List[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.starts = [0] + [m.end() for m in _NEWLINE.finditer(self.text)]

    def offset(self, line: int, byte_col: int) -> int:
        start = self.starts[line - 1]
        row = self.text[start : start + byte_col]
        if row.isascii():
            return start + byte_col
        return start + len(row.encode("utf-8")[:byte_col].decode("utf-8", "replace"))

    def span(self, node: ast.stmt) -> Tuple[int, int]:
        """The statement's characters, decorators included."""
        first = min([node] + list(getattr(node, "decorator_list", ())), key=lambda n: (n.lineno, n.col_offset))
        start = self.offset(first.lineno, first.col_offset)
        if first is not node:
            start = self.text.rindex("@", 0, start)
        assert node.end_lineno is not None and node.end_col_offset is not None
        return start, self.offset(node.end_lineno, node.end_col_offset)


def deep_statements(tree: ast.Module) -> List[Tuple[ast.stmt, int]]:
    """The outermost statements whose own expressions (not those of the statements in their
    blocks) nest deeper than MAX_DEPTH, with that depth as LibCST will nest them (at most).
    Iterative: the tree may be deep. (An implicit concatenation of strings is one `ast` node but
    as deep as its pieces in LibCST; its parser refuses 6,000 pieces and more, cleanly, and
    `engine` masks what it refuses.)"""
    depth_of: dict = {}
    owners: List[ast.stmt] = []
    stack: List[Tuple[ast.AST, int, Optional[ast.stmt]]] = [(tree, 0, None)]
    while stack:
        node, depth, owner = stack.pop()
        if isinstance(node, ast.stmt):
            owner, depth = node, 0
            owners.append(node)
        elif owner is not None and depth > depth_of.get(id(owner), 0):
            depth_of[id(owner)] = depth
        # LibCST nests `a and b and c` two deep where `ast` keeps one flat list of values
        step = len(node.values) if isinstance(node, ast.BoolOp) else 1
        stack.extend([(child, depth + step, owner) for child in child_nodes(node)])
    found: List[Tuple[ast.stmt, int]] = []
    inside: set = set()  # statements within one already masked
    for stmt in owners:  # parents come before their children
        if id(stmt) in inside:
            continue
        depth = depth_of.get(id(stmt), 0)
        if depth > MAX_DEPTH:
            found.append((stmt, depth))
            inside.update(id(n) for n in _nested_statements(stmt))
    return found


def _nested_statements(stmt: ast.stmt) -> Iterator[ast.stmt]:
    return (node for node in ast.walk(stmt) if isinstance(node, ast.stmt))  # iterative


class Display(NamedTuple):
    """The span of a dict display that `mask` empties (`literal_tables.py`), not a statement."""

    start: int
    end: int


def mask(text: str, spans: List[Tuple[int, int]]) -> str:
    """`text` with each span replaced by `pass`, its later lines by comments (`#` and spaces),
    line breaks kept: same length, same lines. Spans must not overlap, except that a span inside
    another is dropped (a table inside a statement masked whole); each must start where a
    statement may, except a `Display`, which becomes `{}` (its first and last characters kept,
    comments between).

    Later lines are comments, not blanks, because LibCST does not reprint whitespace-only lines
    at the end of a file exactly (it keeps one of `"   \n   \n"`): a masked last statement made
    every offset after it wrong, and the engine then drops every fix of the file (issue 21: an
    import that a fix left unused kept its finding and lost its fix)."""
    parts: List[str] = []
    at = 0
    for span in sorted(spans):
        start, end = span
        if start < at:  # inside the span before it: masked with it
            continue
        parts.append(text[at:start])
        if isinstance(span, Display):
            parts.append(_empty_display(text[start:end]))
        else:
            parts.append(_blank(text[start:end], ends_line=text[end : end + 1] in ("", "\n", "\r")))
        at = end
    parts.append(text[at:])
    return "".join(parts)


def _blank(segment: str, ends_line: bool) -> str:
    rows = _NEWLINE.split(segment)  # rows at even indices, the line breaks between them
    first = rows[0]
    # `pass` where it fits (a statement's first line can be as short as `x=(`)
    rows[0] = "pass".ljust(len(first)) if len(first) >= 4 else "0".ljust(len(first))
    last = len(rows) - 1
    for i in range(2, len(rows), 2):  # a whole line: a comment; the last one only if nothing follows it
        rows[i] = "#".ljust(len(rows[i])) if rows[i] and (i < last or ends_line) else " " * len(rows[i])
    return "".join(rows)


def _empty_display(segment: str) -> str:
    """A display (`{...}`) as its brackets, spaces on their rows and a comment on each whole line
    between: an empty display of the same length and lines."""
    rows = _NEWLINE.split(segment)
    last = len(rows) - 1
    for i in range(0, len(rows), 2):
        row = rows[i]
        if i == 0 and i == last:
            rows[i] = row[0] + " " * (len(row) - 2) + row[-1]
        elif i == 0:
            rows[i] = row[0].ljust(len(row))
        elif i == last:
            rows[i] = row[-1].rjust(len(row))
        else:
            rows[i] = "#".ljust(len(row)) if row else row
    return "".join(rows)
