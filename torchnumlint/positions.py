"""Where nodes stand in the text, from one light codegen pass.

LibCST's PositionProvider (plus ParentNodeProvider for indentation) cost more than linting a
file with findings; here the same syntactic spans are kept as character offsets (no line
splitting per token, no objects per node), and lines/columns are computed only for the few
nodes that are reported. Offsets index the decoded text directly, since LibCST's codegen
reproduces it exactly.
"""

from __future__ import annotations

import bisect
import re
from contextlib import contextmanager
from typing import Dict, Iterator, List, Optional, Tuple

import libcst as cst
from libcst._nodes.internal import CodegenState  # private, but the only hook into codegen
from libcst.metadata import CodePosition, CodeRange

_NEWLINE = re.compile(r"\r\n|\r|\n")
_STATEMENTS = (cst.SimpleStatementLine, cst.BaseCompoundStatement)


class _OffsetState(CodegenState):
    """A codegen state that records each node's span as (start, end) character offsets, with
    LibCST's syntactic (whitespace-excluding) positions."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.offset = 0
        self.spans: Dict[int, Tuple[int, int]] = {}
        self.statements: List[Tuple[int, int]] = []
        self._open: List[int] = []

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        for token in self.indent_tokens:
            self.offset += len(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.offset += len(value)

    def pop_trailing_newline(self) -> None:
        count = len(self.tokens)
        last = self.tokens[-1] if self.tokens else ""
        super().pop_trailing_newline()
        if len(self.tokens) < count:  # a file without a final newline
            self.offset -= len(last)

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._open.append(self.offset)

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self._open.pop()
        span = self.spans.setdefault(id(node), (start, self.offset))
        if isinstance(node, _STATEMENTS):
            decorators = getattr(node, "decorators", None)
            if decorators:  # a decorated def or class starts at its first decorator
                span = (self.spans[id(decorators[0])][0], span[1])
            self.statements.append(span)

    @contextmanager
    def record_syntactic_position(
        self, node: cst.CSTNode, *, start_node: Optional[cst.CSTNode] = None, end_node: Optional[cst.CSTNode] = None
    ) -> Iterator[None]:
        start = self.offset
        try:
            yield
        finally:
            end = self.offset
            if start_node is not None:
                start = self.spans[id(start_node)][0]
            if end_node is not None:
                end = self.spans[id(end_node)][1]
            self.spans[id(node)] = (start, end)


class Spans:
    """Node -> span for one module, and the questions fixes ask about the text around a node."""

    def __init__(self, module: cst.Module, text: str) -> None:
        state = _OffsetState(module)
        module._codegen(state)
        self._spans = state.spans
        # Statements nest, so sorted by start (outer first where two start together) each one's
        # enclosing statement is found with a stack: `statement_indent` then climbs from the last
        # statement starting at or before a node instead of scanning every statement (a scan per
        # fix was quadratic: 156 s of a 1 MB file's lint).
        self._statements = sorted(state.statements, key=lambda span: (span[0], -span[1]))
        self._starts = [span[0] for span in self._statements]
        self._enclosing = _enclosing(self._statements)
        self.text = text
        # LibCST reprints every file exactly, except a few (a form feed before a statement is
        # dropped): then offsets after it are off, and no edit may be made from them.
        self.exact = state.offset == len(text)
        self.line_starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]

    def offsets(self, node: cst.CSTNode) -> Tuple[int, int]:
        return self._spans[id(node)]

    def outer(self, node: cst.CSTNode) -> Tuple[int, int]:
        """The span with the node's own parentheses, which LibCST's positions leave out."""
        lpar, rpar = getattr(node, "lpar", None), getattr(node, "rpar", None)
        start = self._spans[id(lpar[0])][0] if lpar else self.offsets(node)[0]
        end = self._spans[id(rpar[-1])][1] if rpar else self.offsets(node)[1]
        return start, end

    def position(self, offset: int) -> CodePosition:
        """1-based line, 0-based column of a character offset."""
        line = bisect.bisect_right(self.line_starts, offset)
        return CodePosition(line, offset - self.line_starts[line - 1])

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        start, end = self.offsets(node)
        return CodeRange(self.position(start), self.position(end))

    def get(self, node: cst.CSTNode) -> Optional[CodeRange]:
        return self[node] if id(node) in self._spans else None

    def line_start(self, offset: int) -> int:
        return self.line_starts[bisect.bisect_right(self.line_starts, offset) - 1]

    def next_line(self, offset: int) -> int:
        """Where the line after the one holding `offset` begins (the end of the text after the last)."""
        index = bisect.bisect_right(self.line_starts, offset)
        return self.line_starts[index] if index < len(self.line_starts) else len(self.text)

    def indent_at(self, offset: int) -> str:
        start = self.line_start(offset)
        line = self.text[start : start + 200]
        return line[: len(line) - len(line.lstrip(" \t"))]

    def statement_indent(self, node: cst.CSTNode) -> str:
        """The indentation of the block holding `node`: that of the innermost statement around it."""
        start, end = self.offsets(node)
        at = bisect.bisect_right(self._starts, start) - 1  # the innermost of those starting by `start`
        while at >= 0 and self._statements[at][1] < end:  # it ends before the node: look outside it
            at = self._enclosing[at]
        return self.indent_at(self._statements[at][0] if at >= 0 else start)


def _enclosing(statements: List[Tuple[int, int]]) -> List[int]:
    """For each span of `statements` (nested spans, sorted by start, outer first on a tie), the
    index of the innermost span holding it, or -1."""
    parents: List[int] = []
    open_: List[int] = []
    for i, (start, end) in enumerate(statements):
        while open_ and statements[open_[-1]][1] < end:
            open_.pop()
        parents.append(open_[-1] if open_ else -1)
        open_.append(i)
    return parents
