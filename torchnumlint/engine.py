"""Lint one source text: pre-filter, parse once, one traversal for all rules, fixes to a fixpoint.

Everything here works on text in memory; reading and writing files is `source.py`'s job, so a
file's processing is a pure function of (path, text, settings, index), ready to be run in
worker processes or cached.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from contextlib import contextmanager
from typing import Callable, Dict, FrozenSet, Iterable, Iterator, List, Optional, Sequence, Tuple, Type, TypeVar

import libcst as cst
from libcst._nodes.internal import CodegenState  # the one private import: see _code_in_block

from torchnumlint import suppression
from torchnumlint.findings import Edit, Finding, Fix, Safety
from torchnumlint.index import ProjectIndex, build_index
from torchnumlint.positions import Spans
from torchnumlint.rules.base import Rule
from torchnumlint.rules.guards import is_plain
from torchnumlint.rules.names import Binding, ImportMap, ScopeTable, imports_torch, is_no_grad_function, is_no_grad_item
from torchnumlint.walk import Visitor, contains

MAX_FIX_PASSES = 10

_SCOPES = (cst.FunctionDef, cst.Module)
_LOOPS = (cst.For, cst.While)
T = TypeVar("T")


class ParseError(Exception):
    """The text is not valid Python; the message says where and why."""


class FixBuilder:
    """Collects the node replacements, inserted lines and imports that make up one fix."""

    def __init__(self, ctx: "FileContext", safety: Safety) -> None:
        self.ctx = ctx
        self.safety = safety
        self.replacements: List[Tuple[cst.CSTNode, cst.CSTNode]] = []
        self.lines_after: List[Tuple[cst.CSTNode, str]] = []
        self.lines_removed: List[cst.SimpleStatementLine] = []
        self.imports: List[str] = []

    def replace(self, old: cst.CSTNode, new: cst.CSTNode) -> "FixBuilder":
        """Swap `old` for `new`, parentheses included; `new` keeps `old`'s parentheses unless it
        brings its own or holds `old` itself (`(a - b)` -> `(a - b).clamp_min(1)`), so
        `2 * (log(p))` stays parenthesised and no pair is doubled."""
        if getattr(old, "lpar", None) and hasattr(new, "lpar") and not new.lpar and not contains(new, old):
            new = new.with_changes(lpar=old.lpar, rpar=old.rpar)
        self.replacements.append((old, new))
        return self

    def insert_line_after(self, node: cst.CSTNode, text: str) -> "FixBuilder":
        """Add the line `text` below the line where `node` ends, indented like the line where it
        starts: a decorator under `@staticmethod`, a statement after another."""
        self.lines_after.append((node, text))
        return self

    def remove_line(self, line: cst.SimpleStatementLine) -> "FixBuilder":
        """Delete a whole statement line (an import nothing uses any more)."""
        self.lines_removed.append(line)
        return self

    @property
    def edits(self) -> bool:
        return bool(self.replacements or self.lines_after or self.lines_removed)

    def ref(self, qualified: str) -> cst.BaseExpression:
        """An expression naming `qualified`, in the file's own alias; adds an import if needed."""
        text, needed = self.ctx.imports.reference(qualified, self.ctx.text)
        if needed is not None and needed not in self.imports:
            self.imports.append(needed)
        return cst.parse_expression(text)


@dataclass
class _Report:
    rule: Rule
    node: cst.CSTNode
    message: str
    fix: Optional[FixBuilder]
    statement: Optional[cst.CSTNode]


class FileContext:
    """What a rule may ask while it visits one file."""

    def __init__(
        self,
        path: str,
        text: str,
        module: cst.Module,
        index: ProjectIndex,
        strict: bool = False,
        enabled: FrozenSet[str] = frozenset(),
    ) -> None:
        self.path = path
        self._enabled = enabled
        # Strict mode also reports what can be a hazard without evidence that it reaches one
        # (`evidence.py`); by default a finding needs that evidence.
        self.strict = strict
        self.text = text
        self.module = module
        self.index = index
        self.imports = ImportMap(module)
        self.stack: List[cst.CSTNode] = []  # ancestors of the node being visited, itself last
        self.reports: List[_Report] = []
        self._scopes: Dict[int, ScopeTable] = {}
        self._per_scope: Dict[Tuple[str, int], object] = {}
        self._spans: Optional[Spans] = None
        self._mentions: Dict[str, bool] = {}

    @contextmanager
    def visiting(self, path: Sequence[cst.CSTNode]) -> Iterator[None]:
        """Ask questions about another node of the file (a call site of the enclosing function):
        `stack` is `path`, that node's ancestors and itself, until the block ends."""
        saved, self.stack = self.stack, list(path)
        try:
            yield
        finally:
            self.stack = saved

    def enabled(self, code: str) -> bool:
        """Whether rule `code` runs on this file (for ownership between rules: `ownership.py`)."""
        return code in self._enabled

    # -- tree questions ------------------------------------------------------------------------
    def qualname(self, expr: cst.BaseExpression) -> Optional[str]:
        return self.imports.qualname(expr)

    @property
    def parent(self) -> Optional[cst.CSTNode]:
        return self.stack[-2] if len(self.stack) > 1 else None

    def enclosing(self, *types: type) -> Optional[cst.CSTNode]:
        for node in reversed(self.stack[:-1]):
            if isinstance(node, types):
                return node
        return None

    def in_no_grad(self) -> bool:
        """Inside `with torch.no_grad()` (or alike), or a function decorated with one."""
        for node in self.stack:
            if isinstance(node, cst.With) and any(is_no_grad_item(self.imports, i.item) for i in node.items):
                return True
            if isinstance(node, cst.FunctionDef) and is_no_grad_function(self.imports, node):
                return True
        return False

    # -- following names -----------------------------------------------------------------------
    def binding(self, name: cst.BaseExpression) -> Optional[Binding]:
        """The assignment that surely gives `name` (or `self.attr`) its value here, if there is one.
        A name a function never binds is the module's: followed when the module binds it once
        (`kl = nn.KLDivLoss(reduction="batchmean")` at the top of the file)."""
        if isinstance(name, cst.Name):
            if name.value in self.imports.aliases:
                return None
            scope, in_loop = self._scope_of_current()
            table = self._table(scope)
            if scope is not self.module and name.value not in table.bindings:
                found = self._table(self.module).bindings.get(name.value, [])
                return found[0] if len(found) == 1 else None
            return table.lookup(name.value, name, in_loop)
        if (
            isinstance(name, cst.Attribute)
            and isinstance(name.value, cst.Name)
            and name.value.value == "self"
        ):
            cls = self.enclosing(cst.ClassDef)
            if cls is None:
                return None
            found = [
                b
                for stmt in cls.body.body
                if isinstance(stmt, cst.FunctionDef)
                for b in self._table(stmt).bindings.get(f"self.{name.attr.value}", ())
            ]
            return found[0] if len(found) == 1 else None
        return None

    def bindings_before(self, name: cst.Name) -> List[Binding]:
        """Every binding of the local `name` that comes before the node being visited in its
        scope (in any branch): for questions all of them must agree on."""
        scope, _ = self._scope_of_current()
        table = self._table(scope)
        use = table.order.get(id(name))
        if use is None:
            return []
        return [b for b in table.bindings.get(name.value, ()) if b.order < use]

    def chain(self, expr: cst.BaseExpression, depth: int = 6, names_only: bool = False) -> List[Binding]:
        """The single assignments behind `expr`, nearest first (`q = p`, `p = F.softmax(x)`).
        `names_only` leaves `self.attr` alone: another method may change it where we cannot see."""
        found: List[Binding] = []
        while len(found) < depth and (isinstance(expr, cst.Name) or not names_only):
            binding = self.binding(expr)
            if binding is None or binding.value is None:
                break
            found.append(binding)
            expr = binding.value
        return found

    def resolve(self, expr: cst.BaseExpression, depth: int = 6, names_only: bool = False) -> cst.BaseExpression:
        """Follow names to the value they were assigned, as far as that is unambiguous."""
        found = self.chain(expr, depth, names_only)
        return found[-1].value if found else expr  # type: ignore[return-value]

    def only_read_here(self, name: cst.BaseExpression) -> bool:
        """Whether the local `name` is read nowhere but at the node being visited, so that its
        assignment may be rewritten: a function's local (a module global can be imported
        elsewhere), read once in its scope and by no nested function, lambda or class."""
        scope, _ = self._scope_of_current()
        if not isinstance(name, cst.Name) or not isinstance(scope, cst.FunctionDef):
            return False
        table = self._table(scope)
        return table.loads.get(name.value, 0) == 1 and not table.read_in_nested(name.value)

    def rebound_between(self, expr: cst.CSTNode, use: Optional[cst.CSTNode] = None) -> bool:
        """Whether a name that `expr` reads is bound again between `expr` and `use` (to the end of
        the scope when `use` is None), so the two places may see different values."""
        return self._table(self._scope_of_current()[0]).rebound_between(expr, use)

    def same_iteration(self, chain: Sequence[Binding]) -> bool:
        """Outside loops, True. Inside one, whether the one assignment in `chain` is a statement
        of a block (inside the innermost loop) that also holds the node being visited: it ran in
        the same iteration, unconditionally, before it. A conditional or outer assignment can
        hold a value from another iteration."""
        stack = self.stack
        loop_at = None
        for i in range(len(stack) - 1, -1, -1):
            if isinstance(stack[i], (cst.FunctionDef, cst.Module, cst.Lambda, cst.ClassDef)):
                break
            if isinstance(stack[i], _LOOPS):
                loop_at = i
                break
        if loop_at is None:
            return True
        if len(chain) != 1:
            return False
        assign = chain[0].node
        return any(
            isinstance(stmt, cst.SimpleStatementLine) and any(small is assign for small in stmt.body)
            for block in stack[loop_at + 1 :]
            if isinstance(block, (cst.IndentedBlock, cst.SimpleStatementSuite))
            for stmt in block.body
        )

    def unchanged_since(self, parts: Sequence[cst.BaseExpression], chain: Sequence[Binding]) -> bool:
        """Whether `parts` (of the value that `chain` leads to from the node being visited) can be
        recomputed here with the same value: plain, no name they read bound again later in the
        scope, and inside a loop assigned in the same iteration."""
        return (
            all(is_plain(p) for p in parts)
            and self.same_iteration(chain)
            and not any(self.rebound_between(p) for p in parts)
        )

    def mentions(self, word: str) -> bool:
        """Whether the source text contains `word` (cached: rules ask it per node)."""
        found = self._mentions.get(word)
        if found is None:
            found = self._mentions[word] = word in self.text
        return found

    def per_file(self, key: str, build: Callable[["FileContext"], T]) -> T:
        """`build(ctx)` computed once per file: for questions about the whole module."""
        slot = (key, 0)
        if slot not in self._per_scope:
            self._per_scope[slot] = build(self)
        return self._per_scope[slot]  # type: ignore[return-value]

    def per_scope(self, key: str, build: Callable[[cst.CSTNode], T]) -> T:
        """`build(scope)` for the function (or module) around the node being visited, computed
        once per file: for questions that read a whole function."""
        scope = self.enclosing(cst.FunctionDef) or self.module
        slot = (key, id(scope))
        if slot not in self._per_scope:
            self._per_scope[slot] = build(scope)
        return self._per_scope[slot]  # type: ignore[return-value]

    @property
    def positions(self) -> Spans:
        """Node -> CodeRange (and character spans), computed once per file, only when asked."""
        if self._spans is None:
            self._spans = Spans(self.module, self.text)
        return self._spans

    def _scope_of_current(self) -> Tuple[cst.CSTNode, bool]:
        in_loop = False
        for node in reversed(self.stack):
            if isinstance(node, _SCOPES):
                return node, in_loop
            if isinstance(node, _LOOPS):
                in_loop = True
        return self.module, in_loop

    def _table(self, scope: cst.CSTNode) -> ScopeTable:
        table = self._scopes.get(id(scope))
        if table is None:
            table = self._scopes[id(scope)] = ScopeTable(self.imports, scope)
        return table

    # -- reporting -----------------------------------------------------------------------------
    def new_fix(self, safety: Safety) -> FixBuilder:
        return FixBuilder(self, safety)

    def add_report(self, rule: Rule, node: cst.CSTNode, message: str, fix: Optional[FixBuilder]) -> None:
        statement = None
        for ancestor in reversed(self.stack):
            if isinstance(ancestor, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                statement = ancestor
                break
        self.reports.append(_Report(rule, node, message, fix, statement))


class _Dispatcher(Visitor):
    """One traversal; each node goes to the enabled rules that have a visitor for its type."""

    def __init__(self, ctx: FileContext, rules: Sequence[Rule]) -> None:
        super().__init__()
        self.ctx = ctx
        self.visits: Dict[str, list] = {}
        self.leaves: Dict[str, list] = {}
        for rule in rules:
            for attr in dir(type(rule)):
                if attr.startswith("visit_"):
                    self.visits.setdefault(attr[6:], []).append(getattr(rule, attr))
                elif attr.startswith("leave_"):
                    self.leaves.setdefault(attr[6:], []).append(getattr(rule, attr))

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.ctx.stack.append(node)
        for handler in self.visits.get(type(node).__name__, ()):
            handler(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        for handler in self.leaves.get(type(original_node).__name__, ()):
            handler(original_node)
        self.ctx.stack.pop()


def candidate_rules(
    text: str, rules: Sequence[Type[Rule]], index: Optional[ProjectIndex] = None
) -> List[Type[Rule]]:
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


def check_syntax(text: str, path: str) -> None:
    """The cheap syntax check for files no rule needs to parse."""
    try:
        ast.parse(text, filename=path)
    except SyntaxError as exc:
        raise ParseError(f"line {exc.lineno}, column {exc.offset}: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ParseError(str(exc)) from None


def lint_text(
    path: str, text: str, rules: Sequence[Type[Rule]], index: Optional[ProjectIndex] = None, strict: bool = False
) -> List[Finding]:
    """All findings of `rules` in `text`, noqa-suppressed ones removed. Raises ParseError."""
    active = candidate_rules(text, rules, index)
    if not active:
        check_syntax(text, path)
        return []
    module = parse(text)
    if index is None:  # linting one text alone: it is its own project
        index = build_index([(path, text)]) if any(r.needs_index for r in active) else ProjectIndex.empty()
    ctx = FileContext(path, text, module, index, strict, frozenset(rule.code for rule in active))
    try:
        _Dispatcher(ctx, [rule(ctx) for rule in active]).walk(module)
    except RecursionError:
        raise ParseError("expression nested too deeply to analyse") from None
    if not ctx.reports:
        return []
    findings = _to_findings(ctx)
    return suppression.filter_findings(findings, text)


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
                code=report.rule.code,
                name=report.rule.name,
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


# ---------------------------------------------------------------------------------------------
# Fixes


def fixable(finding: Finding, unsafe: bool) -> bool:
    if finding.fix is None:
        return False
    return finding.fix.safety is Safety.SAFE or (unsafe and finding.fix.safety is Safety.UNSAFE)


def apply_fixes(text: str, findings: Iterable[Finding]) -> Tuple[str, int]:
    """Apply every fix whose edits do not overlap an earlier one; the rest wait for the next pass.

    Returns the new text and how many fixes went in."""
    taken: List[Edit] = []
    count = 0
    for finding in sorted(findings, key=lambda f: f.fix.edits[0].start if f.fix else 0):
        if finding.fix is None:
            continue
        new = [e for e in finding.fix.edits if e not in taken]
        if any(_overlaps(a, b) for a in new for b in taken):
            continue
        taken.extend(new)
        count += 1
    for edit in sorted(taken, key=lambda e: (e.start, e.end), reverse=True):
        text = text[: edit.start] + edit.content + text[edit.end :]
    return text, count


def _overlaps(a: Edit, b: Edit) -> bool:
    if a.start == a.end:  # an insertion clashes only with a replacement around it
        return b.start < a.start < b.end
    if b.start == b.end:
        return a.start < b.start < a.end
    return a.start < b.end and b.start < a.end


@dataclass
class FixResult:
    text: str
    findings: List[Finding]
    applied: int = 0
    errors: List[str] = field(default_factory=list)


def fix_text(
    path: str,
    text: str,
    rules: Sequence[Type[Rule]],
    index: Optional[ProjectIndex] = None,
    unsafe: bool = False,
    strict: bool = False,
) -> FixResult:
    """Apply fixes until nothing changes (at most MAX_FIX_PASSES), re-parsing after each pass."""
    findings = lint_text(path, text, rules, index, strict)
    applied = 0
    for _ in range(MAX_FIX_PASSES):
        todo = [f for f in findings if fixable(f, unsafe)]
        if not todo:
            break
        new_text, count = apply_fixes(text, todo)
        if new_text == text:
            break
        if index is not None and any(rule.needs_index for rule in rules):
            index = index.with_file(path, new_text)
        try:
            new_findings = lint_text(path, new_text, rules, index, strict)
        except ParseError as exc:  # a bug in a rule's fix: keep the last good text
            return FixResult(text, findings, applied, [f"a fix produced invalid code ({exc}); not applied"])
        applied += count
        text, findings = new_text, new_findings
    return FixResult(text, findings, applied)
