"""Lint one source text: pre-filter, parse once, one traversal for all rules, findings.

Everything here works on text in memory; reading and writing files is `source.py`'s job, so a
file's processing is a pure function of (path, text, settings, index), ready to be run in
worker processes or cached. The rule API (`FileContext`, `FixBuilder`) is `context.py`; the fix
loop is `fixes.py`.
"""

from __future__ import annotations

import ast
import time
from typing import Dict, List, Optional, Sequence, Tuple, Type

import libcst as cst
from libcst._nodes.internal import CodegenState  # the one private import: see _code_in_block

from torchnumlint import candidates, directives, prepass
from torchnumlint.cache import collector_paused
from torchnumlint.context import FileContext
from torchnumlint.findings import Edit, Finding, Fix
from torchnumlint.index import ProjectIndex, build_index
from torchnumlint.positions import Spans
from torchnumlint.prepass import ParseError, check_syntax
from torchnumlint.rules.base import Rule
from torchnumlint.rules.imports import imports_torch
from torchnumlint.walk import Visitor, children

# Seconds one file's analysis (each pass of a fix) may take before the file is given up.
TIME_LIMIT = 120.0
# The walk looks at the clock once per this many nodes.
_CLOCK_EVERY = 4096


class _Dispatcher(Visitor):
    """One traversal; each node goes to the enabled rules that have a visitor for its type."""

    def __init__(self, ctx: FileContext, rules: Sequence[Rule], deadline: "_Deadline") -> None:
        super().__init__()
        self.ctx = ctx
        self.deadline = deadline
        self.count = 0
        self.visits: Dict[str, list] = {}
        self.leaves: Dict[str, list] = {}
        for rule in rules:
            for attr in dir(type(rule)):
                if attr.startswith("visit_"):
                    self.visits.setdefault(attr[6:], []).append(getattr(rule, attr))
                elif attr.startswith("leave_"):
                    self.leaves.setdefault(attr[6:], []).append(getattr(rule, attr))

    def walk(self, node: cst.CSTNode) -> None:
        """`Visitor.walk` with its `on_visit` and `on_leave` written in: two calls fewer for
        each of the million nodes of a cold lint of kornia."""
        self.count += 1
        if self.count % _CLOCK_EVERY == 0:
            self.deadline.check()
        self.ctx.stack.append(node)
        name = type(node).__name__
        for handler in self.visits.get(name, ()):
            handler(node)
        for child in children(node):
            self.walk(child)
        for handler in self.leaves.get(name, ()):
            handler(node)
        self.ctx.stack.pop()


def candidate_rules(text: str, rules: Sequence[Type[Rule]], index: Optional[ProjectIndex] = None) -> List[Type[Rule]]:
    """The rules that can fire on `text`: cheap substring tests that never lose a finding. None
    can in a file that never imports torch."""
    if not imports_torch(text):
        return []
    return [rule for rule in rules if rule.could_fire(text, index)]


def parse(text: str) -> cst.Module:
    try:
        return cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        check_syntax(text, "<source>")  # CPython's message and position are the clearer ones
        raise ParseError(f"line {exc.raw_line}, column {exc.raw_column + 1}: {_first_line(exc.message)}") from None
    except RecursionError:
        raise ParseError("expression nested too deeply") from None


def _first_line(message: str) -> str:
    return message.strip().splitlines()[0] if message.strip() else "syntax error"


class _Deadline:
    """The time a file's analysis may take, checked every few thousand nodes of the walk."""

    def __init__(self, seconds: Optional[float]) -> None:
        self.seconds = seconds
        self.at = None if seconds is None else time.monotonic() + seconds

    def check(self) -> None:
        if self.at is not None and time.monotonic() > self.at:
            raise ParseError(f"analysis stopped after {self.seconds:g} s; the file is not linted")


def lint_text(
    path: str,
    text: str,
    rules: Sequence[Type[Rule]],
    index: Optional[ProjectIndex] = None,
    strict: bool = False,
    *,
    warnings: Optional[List[str]] = None,
    time_limit: Optional[float] = TIME_LIMIT,
    partial: bool = True,
    masked: Sequence[Tuple[int, int]] = (),
) -> List[Finding]:
    """All findings of `rules` in `text`, noqa-suppressed ones removed, and those of enabled rules
    about the noqa comments themselves (TNL900: `directives.filter_findings`). Raises ParseError.

    With `partial`, LibCST parses only the top-level statements that can hold a finding
    (`candidates.py`); the findings are the same as without.

    Statements that cannot be analysed (nested too deeply, or beyond LibCST's parser) are skipped:
    each adds a line to `warnings` ("line N: ..."), and the rest of the file is linted. The
    analysis stops (ParseError) after `time_limit` seconds.

    `masked`: spans of top-level functions and classes (`prepass.Lines.span`) whose findings the
    caller does not want (the server's re-lint after an edit, `relint_scope.py`): LibCST never
    sees them, so they hold no finding; everything else reads the whole text (the noqa comments,
    the pre-filter, the index's own summary), so the other statements' findings are unchanged."""
    deadline = _Deadline(time_limit)
    with prepass.recursion_limit():
        tree = check_syntax(text, path)
        active = candidate_rules(text, rules, index)
        if not active:
            return directives.filter_findings([], text, rules, path)
        masked_text, skipped = _masked(text, tree, active if partial else (), index, masked)
        # CPython's tree is not kept under LibCST's: the peak of a large file is the larger of the
        # two, not their sum (15 MB beside 160 MB for torch's 460 KB `distributed_test.py`)
        del tree
        if masked_text is None:  # no statement can hold a finding
            return directives.filter_findings([], text, rules, path)
        # Python's collector paused while LibCST builds its tree (up to a million objects that
        # hold no cycle): a cold lint of kornia in one process spent 3.2 s of 27 in the collector
        # during lints, 1.7 s with this. Not during the rules' walk, whose garbage holds cycles:
        # paused there too, the lint of torch's largest files peaked 4 % higher.
        with collector_paused():
            module, more = _parse_masked(masked_text)
        if warnings is not None:
            warnings.extend(f"line {line}: {why}; skipped, the rest of the file is linted" for line, why in sorted(skipped + more))
        if index is None:  # linting one text alone: it is its own project
            index = build_index([(path, text)]) if any(r.needs_index for r in active) else ProjectIndex.empty()
        ctx = FileContext(path, text, module, index, strict, frozenset(rule.code for rule in active))
        try:
            _Dispatcher(ctx, [rule(ctx) for rule in active], deadline).walk(module)
        except RecursionError:
            raise ParseError("expression nested too deeply to analyse") from None
        if not ctx.reports:
            return directives.filter_findings([], text, rules, path)
        findings = _to_findings(ctx)
    return directives.filter_findings(findings, text, rules, path)


def _masked(
    text: str, tree: ast.Module, active: Sequence[Type[Rule]], index: Optional[ProjectIndex], unwanted: Sequence[Tuple[int, int]] = ()
) -> Tuple[Optional[str], List[Tuple[int, str]]]:
    """`text` with the statements LibCST need not see masked (`prepass.mask`): those too deep
    for it, with (line, why) for each, and, given `active` rules, the top-level ones no rule can
    fire in, and the `unwanted` ones. None where no statement can hold a finding."""
    lines = prepass.Lines(text)
    spans: List[Tuple[int, int]] = list(unwanted)
    if active:
        unneeded = candidates.unneeded(text, tree, lines, active, index)
        if unneeded is None:
            return None, []
        spans += unneeded
    warnings = []
    for stmt, depth in prepass.deep_statements(tree):
        start, end = lines.span(stmt)
        if not any(a <= start and end <= b for a, b in spans):  # not already masked: needs saying
            spans.append((start, end))
            warnings.append((stmt.lineno, f"statement nested too deeply to analyse (depth {depth} > {prepass.MAX_DEPTH})"))
    return prepass.mask(text, spans), warnings


def _parse_masked(masked: str) -> Tuple[cst.Module, List[Tuple[int, str]]]:
    """LibCST's tree of `masked`. CPython accepted the text, so where LibCST fails it is LibCST's
    limit (a 10,000-piece implicit string concatenation): the top-level statements it cannot
    parse alone are masked, each with a warning, and the rest is parsed. (CPython parses the
    masked text again then, rather than its tree of the whole text being kept meanwhile: the
    statements are at the same places, the masked ones `pass`.)"""
    try:
        return cst.parse_module(masked), []
    except (cst.ParserSyntaxError, RecursionError):
        pass
    lines = prepass.Lines(masked)
    spans, warnings = [], []
    for stmt in check_syntax(masked, "<masked>").body:
        start, end = lines.span(stmt)
        try:
            cst.parse_module(masked[start:end])
        except (cst.ParserSyntaxError, RecursionError) as exc:
            spans.append((start, end))
            reason = "nested too deeply" if isinstance(exc, RecursionError) else "beyond LibCST's parser"
            warnings.append((stmt.lineno, f"statement {reason}"))
    return parse(prepass.mask(masked, spans)), warnings


def _to_findings(ctx: FileContext) -> List[Finding]:
    """Positions are computed only for files that have findings: they cost a codegen pass."""
    spans = ctx.positions
    findings = []
    for report in ctx.reports:
        where = spans[report.node]
        noqa = {where.start.line, where.end.line}
        if isinstance(report.statement, cst.SimpleStatementLine):
            span = spans[report.statement]
            noqa.update((span.start.line, span.end.line))
        elif report.statement is not None:  # a block's header: its first line, not its body's last
            noqa.add(spans[report.statement].start.line)
        fix = None
        if report.fix is not None and report.fix.edits and spans.exact:
            edits = []
            for old, new in report.fix.replacements:
                start, end = spans.outer(old)
                edits.append(_edit(spans, start, end, _code_in_block(ctx, new, spans.statement_indent(old))))
            for node, text in report.fix.lines_after:
                start, end = spans.offsets(node)
                at = spans.next_line(end)
                edits.append(_edit(spans, at, at, _line(ctx, at, spans.indent_at(start) + text)))
            for statement in report.fix.lines_removed:
                start, end = spans.offsets(statement)
                edits.append(_edit(spans, spans.line_start(start), spans.next_line(end), ""))
            for line in report.fix.imports:
                at = _import_offset(ctx, spans)
                edits.append(_edit(spans, at, at, _line(ctx, at, line)))
            fix = Fix(tuple(sorted(edits, key=lambda e: (e.start, e.end))), report.fix.safety)
        findings.append(
            Finding(
                code=report.code,
                name=report.name,
                message=report.message,
                path=ctx.path,
                line=where.start.line,
                col=where.start.column + 1,
                end_line=where.end.line,
                end_col=where.end.column + 1,
                fix=fix,
                noqa_lines=tuple(sorted(noqa)),
            )
        )
    return findings


def _line(ctx: FileContext, at: int, text: str) -> str:
    """`text` as a whole line inserted at offset `at` (after a last line that has no newline)."""
    newline = ctx.module.default_newline
    if at == len(ctx.text) and ctx.text and not ctx.text.endswith(("\n", "\r")):
        return newline + text
    return text + newline


def _code_in_block(ctx: FileContext, node: cst.CSTNode, indent: str) -> str:
    """Code for `node` as it would print inside its block: continuation lines that LibCST marks
    as indented get the block's indentation (`Module.code_for_node` would print them at column 0)."""
    state = CodegenState(
        default_indent=ctx.module.default_indent,
        default_newline=ctx.module.default_newline,
        indent_tokens=[indent] if indent else [],
    )
    node._codegen(state)
    return "".join(state.tokens)


def _edit(spans: Spans, start: int, end: int, content: str) -> Edit:
    a, b = spans.position(start), spans.position(end)
    return Edit(start, end, content, (a.line, a.column + 1), (b.line, b.column + 1))


def _import_offset(ctx: FileContext, spans: Spans) -> int:
    """Just after the last top-level import, else after the docstring, else before the code."""
    anchor = ctx.imports.last_top_import or ctx.imports.header_end
    if anchor is not None:
        return spans.next_line(spans.offsets(anchor)[1])
    if ctx.module.body:
        return spans.line_start(spans.offsets(ctx.module.body[0])[0])
    return len(ctx.text)
