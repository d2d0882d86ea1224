"""What the rules' candidate tests read of a statement: its text less comments, docstrings and
unpacking `**`.

No rule reports in a comment or a docstring, yet their words are most of what keeps torch's
files in LibCST's way: `/` in every path and URL a docstring names, `exp`, `log` and `sum` in
its prose, `forward` in every note about a module. So `candidates.py` tests each group of
statements on its bare code. What is cut is exact, from CPython's own tree, never a guess:

- a docstring is any statement that is a bare string literal (`ast.Expr` of a str or bytes
  constant), at any depth: it computes nothing a rule could read;
- a comment is a `#` outside every string literal of the statement (`ast.Constant` strings and
  f-strings, whose spans cover all their tokens), up to the end of its line. A comment that
  says `noqa` stays: TNL900 judges those comments, and `candidates.py` must keep the code they
  sit on;
- an unpacking `**` (`f(**kwargs)`, `def f(**kwargs)`, `{**d}`), found from the node it unpacks:
  every rule that asks for `**` in its test means a power (`x ** 0.5`, `d ** 2`), and the
  `**kwargs` of most signatures kept their functions for TNL201, TNL204, TNL205 and TNL209.

Other strings stay whole: `float("-inf")`, `dtype="float16"`, `reduction="batchmean"` are code.
A `#` that `ast` cannot place (one between the pieces of an implicitly concatenated string, which
`ast` spans as one constant) is kept with what follows it: keeping text only keeps more code.
"""

from __future__ import annotations

import ast
import re
from typing import Iterator, List, Optional, Tuple, Union

from torchnumlint.ast_nodes import walk
from torchnumlint.prepass import Lines

_NOQA = re.compile("noqa", re.IGNORECASE)
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def bare_code(node: ast.stmt, start: int, end: int, lines: Lines) -> str:
    """The text of top-level statement `node` (`lines.text[start:end]`) less its docstrings, its
    comments (those saying noqa stay) and its unpacking `**`."""
    text = lines.text
    cuts = [(lines.offset(s.lineno, s.col_offset), _end(s, lines)) for s in _bare_strings(node)]
    hashes = _hashes(text, start, end)
    if hashes or text.find("**", start, end) != -1:
        strings, stars = _strings_and_stars(node, lines)
        cuts.extend(stars)
        for at in hashes:
            if any(a <= at < b for a, b in strings):  # docstrings included
                continue
            stop = _line_end(text, at, end)
            if _NOQA.search(text, at, stop) is None:
                cuts.append((at, stop))
    if not cuts:
        return text[start:end]
    parts: List[str] = []
    at = start
    for a, b in sorted(cuts):  # disjoint: no comment is inside a string, no `**` in either
        parts.append(text[at:a])
        at = b
    parts.append(text[at:end])
    return "".join(parts)


def _strings_and_stars(node: ast.stmt, lines: Lines) -> Tuple[List[Tuple[int, int]], List[Tuple[int, int]]]:
    """The spans of `node`'s string literals, and of the `**` that unpack (`f(**kw)`,
    `def f(**kw)`, `{**d}`): the rules' `**` is a power, and `**kwargs` is in most signatures."""
    text = lines.text
    strings, stars = [], []
    for n in walk(node):
        if isinstance(n, ast.JoinedStr) or (isinstance(n, ast.Constant) and isinstance(n.value, (str, bytes))):
            strings.append((lines.offset(n.lineno, n.col_offset), _end(n, lines)))
        elif isinstance(n, ast.keyword) and n.arg is None:
            at = lines.offset(n.lineno, n.col_offset)
            if text.startswith("**", at):
                stars.append((at, at + 2))
        else:
            unpacked: List[Union[ast.expr, ast.arg]] = [v for k, v in zip(n.keys, n.values) if k is None] if isinstance(n, ast.Dict) else []
            if isinstance(n, ast.arguments) and n.kwarg is not None:
                unpacked.append(n.kwarg)
            for value in unpacked:
                found = _stars_before(text, lines.offset(value.lineno, value.col_offset))
                if found is not None:
                    stars.append(found)
    return strings, stars


def _stars_before(text: str, at: int) -> Optional[Tuple[int, int]]:
    """The `**` just before `at` (spaces between), if there (a parenthesised `**(d)` is not
    found: its `**` is kept, which only keeps more)."""
    i = at
    while i > 0 and text[i - 1] in " \t":
        i -= 1
    return (i - 2, i) if text[i - 2 : i] == "**" else None


def _end(node: ast.AST, lines: Lines) -> int:
    end_line, end_col = getattr(node, "end_lineno", None), getattr(node, "end_col_offset", None)
    assert end_line is not None and end_col is not None
    return lines.offset(end_line, end_col)


def _hashes(text: str, start: int, end: int) -> List[int]:
    found = []
    at = text.find("#", start, end)
    while at != -1:
        found.append(at)
        at = text.find("#", at + 1, end)
    return found


def _line_end(text: str, at: int, end: int) -> int:
    stops = [i for i in (text.find("\n", at, end), text.find("\r", at, end)) if i != -1]
    return min(stops, default=end)


def _bare_strings(node: ast.stmt) -> Iterator[ast.Expr]:
    """The statements in `node` (itself included) that are a bare string literal."""
    stack: List[ast.AST] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, ast.Expr) and isinstance(current.value, ast.Constant) and isinstance(current.value.value, (str, bytes)):
            yield current
            continue
        for name in _BLOCKS:
            block = getattr(current, name, None)
            if isinstance(block, list):
                stack.extend(block)
