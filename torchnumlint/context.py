"""The rule API: what a rule may ask while it visits one file (`FileContext`) and how it builds a
fix (`FixBuilder`). Rules import this module (for types) and the shared matchers in
`torchnumlint/rules/`; the engine creates the context and collects its reports.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Dict, FrozenSet, Iterator, List, Optional, Sequence, Tuple, Type, TypeVar, cast, overload

import libcst as cst

from torchnumlint.findings import Safety
from torchnumlint.notebook import is_notebook
from torchnumlint.positions import Spans
from torchnumlint.rules.bindings import Binding, is_no_grad_function, is_no_grad_item, is_plain, ScopeTable
from torchnumlint.rules.imports import ImportMap
from torchnumlint.rules.value_steps import selection_of, selection_of_element
from torchnumlint.walk import contains

if TYPE_CHECKING:
    from torchnumlint.index import ProjectIndex

_SCOPES = (cst.FunctionDef, cst.Module)
_LOOPS = (cst.For, cst.While)
_MAX_ORIGINS = 16
T = TypeVar("T")
N = TypeVar("N", bound=cst.CSTNode)


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
        if (
            isinstance(old, cst.BaseExpression)
            and old.lpar
            and isinstance(new, cst.BaseExpression)
            and not new.lpar
            and not contains(new, old)
        ):
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
class Report:
    """One finding as a rule reported it, before positions: the engine turns it into a Finding."""

    code: str
    name: str
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
        index: "ProjectIndex",
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
        self.reports: List[Report] = []
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

    def sibling(self, path: str, text: str, module: cst.Module) -> "FileContext":
        """A context of another file of the project (a caller's: `rules/callers.py`), with this
        one's index, strictness and rules, for questions asked there; it reports nothing."""
        return FileContext(path, text, module, self.index, self.strict, self._enabled)

    def enabled(self, code: str) -> bool:
        """Whether rule `code` runs on this file (for ownership between rules: `ownership.py`)."""
        return code in self._enabled

    # -- tree questions ------------------------------------------------------------------------
    def qualname(self, expr: cst.BaseExpression) -> Optional[str]:
        return self.imports.qualname(expr)

    @property
    def parent(self) -> Optional[cst.CSTNode]:
        return self.stack[-2] if len(self.stack) > 1 else None

    @overload
    def enclosing(self, kind: Type[N], /) -> Optional[N]: ...
    @overload
    def enclosing(self, *types: Type[cst.CSTNode]) -> Optional[cst.CSTNode]: ...
    def enclosing(self, *types: Type[cst.CSTNode]) -> Optional[cst.CSTNode]:
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
            scope = self._scope_of_current()
            table = self._table(scope)
            if scope is not self.module and name.value not in table.bindings:
                found = self._table(self.module).bindings.get(name.value, [])
                return found[0] if len(found) == 1 else None
            return table.lookup(name.value, name)
        if isinstance(name, cst.Attribute) and isinstance(name.value, cst.Name) and name.value.value == "self":
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

    def reaching(self, name: cst.BaseExpression) -> Optional[List[Binding]]:
        """Every assignment that may give the local `name` its value here (all the definitions
        that reach it: one per branch of an `if`, the one before a loop and the one later in its
        body), for questions all of them must agree on; None where `name` is no local bound on
        the way here. A fix may use one only when it is the only one (`binding`)."""
        if not isinstance(name, cst.Name) or name.value in self.imports.aliases:
            return None
        return self._table(self._scope_of_current()).reaching(name.value, name)

    def origins(self, expr: cst.BaseExpression, depth: int = 8) -> List[cst.BaseExpression]:
        """The values `expr` may come from: through names (every reaching definition; `self.x`
        and module names when bound once), indexing, selections, reshapes and float casts
        (`value_steps.selection_of`), and the values part of an unpacked ranking (`vals, idx =
        p.topk(5)`: `vals` comes from `p`, `idx` from nothing known). A way that ends at
        something unknown (a parameter, an index, an in-place change) ends at the name itself,
        so that "is every origin a softmax?" is then no."""
        found: List[cst.BaseExpression] = []
        todo = [(expr, depth)]
        while todo:
            if len(found) + len(todo) > _MAX_ORIGINS:
                return [expr]  # too many ways to say anything of all of them
            current, left = todo.pop()
            current = selection_of(self.imports, current)
            definitions = self._definitions(current) if left else None
            if not definitions:
                found.append(current)
                continue
            for binding in definitions:
                value = binding.value
                if value is None and binding.unpacked is not None:
                    value = selection_of_element(self.imports, *binding.unpacked)
                if value is None:
                    found.append(current)
                else:
                    todo.append((value, left - 1))
        return found

    def _definitions(self, expr: cst.BaseExpression) -> Optional[List[Binding]]:
        binding = self.binding(expr)
        return [binding] if binding is not None else self.reaching(expr)

    def bindings_before(self, name: cst.Name) -> List[Binding]:
        """Every binding of the local `name` that comes before the node being visited in its
        scope (in any branch): for questions all of them must agree on."""
        scope = self._scope_of_current()
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
        value = found[-1].value if found else None
        return value if value is not None else expr

    def only_read_here(self, name: cst.BaseExpression) -> bool:
        """Whether the local `name` is read nowhere but at the node being visited, so that its
        assignment may be rewritten: a function's local (a module global can be imported
        elsewhere), or a notebook's top-level name (no module imports a notebook: its cells
        are the whole program), read once in its scope and by no nested function, lambda or class."""
        scope = self._scope_of_current()
        if not isinstance(name, cst.Name):
            return False
        if not (isinstance(scope, cst.FunctionDef) or (scope is self.module and is_notebook(self.path))):
            return False
        table = self._table(scope)
        return table.loads.get(name.value, 0) == 1 and not table.read_in_nested(name.value)

    def rebound_between(self, expr: cst.CSTNode, use: Optional[cst.CSTNode] = None) -> bool:
        """Whether a name that `expr` reads is bound again between `expr` and `use` (to the end of
        the scope when `use` is None), so the two places may see different values."""
        return self._table(self._scope_of_current()).rebound_between(expr, use)

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
        return all(is_plain(p) for p in parts) and self.same_iteration(chain) and not any(self.rebound_between(p) for p in parts)

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
        # the slot's key names what `build` computes, so the stored value has its type
        return cast(T, self._per_scope[slot])

    def per_scope(self, key: str, build: Callable[[cst.CSTNode], T]) -> T:
        """`build(scope)` for the function (or module) around the node being visited, computed
        once per file: for questions that read a whole function."""
        scope = self.enclosing(cst.FunctionDef) or self.module
        slot = (key, id(scope))
        if slot not in self._per_scope:
            self._per_scope[slot] = build(scope)
        return cast(T, self._per_scope[slot])

    @property
    def positions(self) -> Spans:
        """Node -> CodeRange (and character spans), computed once per file, only when asked."""
        if self._spans is None:
            self._spans = Spans(self.module, self.text)
        return self._spans

    def _scope_of_current(self) -> cst.CSTNode:
        for node in reversed(self.stack):
            if isinstance(node, _SCOPES):
                return node
        return self.module

    def _table(self, scope: cst.CSTNode) -> ScopeTable:
        table = self._scopes.get(id(scope))
        if table is None:
            table = self._scopes[id(scope)] = ScopeTable(self.imports, scope)
        return table

    # -- reporting -----------------------------------------------------------------------------
    def new_fix(self, safety: Safety) -> FixBuilder:
        return FixBuilder(self, safety)

    def add_report(self, code: str, name: str, node: cst.CSTNode, message: str, fix: Optional[FixBuilder]) -> None:
        statement = None
        for ancestor in reversed(self.stack):
            if isinstance(ancestor, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                statement = ancestor
                break
        self.reports.append(Report(code, name, node, message, fix, statement))
