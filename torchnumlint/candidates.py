"""Which statements of a file LibCST must see: the rest is masked (`prepass.mask`).

A file reaches LibCST when a rule can fire somewhere in it (`Rule.could_fire` on the whole text);
most torch files do, since `exp`, `log` or `/` appear in nearly all of them. But a finding sits in
one statement, and what a rule reads around it is reached by name: an import alias
(`from torch.nn.functional import softmax as sm`), a module-level helper or class it calls or
inherits, the call sites of the function it is in, the methods of its class that set an attribute
it reads. So a top-level function or class is kept when a rule can fire (`could_fire`, the same
test as for the file) on the *bare code* of its group (`bare_code.py`: no docstrings, no comments
but those saying noqa; no rule reports from prose, yet `/`, `exp` and `log` in it kept most of
torch's files): the statements linked to it by name, transitively (one uses a name another
binds: a helper, a base class, a module-level value, a caller), with the imports binding a name
the group uses (`sm(x)` under the alias above). A rule's test may need parts from several
statements (`criterion = nn.BCELoss()` ... `criterion(predict(x), y)` where `predict` returns a
sigmoid), and what a rule reads beyond the statement holding its finding it reaches by those
names.

Two finer cuts follow, each a statement no rule can fire in and no kept code reads (`_Reach`
says how code reads another part of its file, as the rules do):

- the methods (and classes nested at class level) of a kept class: most torch files are one or
  two large classes, and one method a rule can fire in kept every other. A method is tested with
  what a rule reporting in it may read (`_member_reads`); `__init__`, `forward`, `backward` and
  `__call__` are kept with their class (the rules read them by name); the class's other
  statements are kept;
- module-level statements other than imports (tables, `__all__`, constants only masked code
  uses). One holding a statement too deep for LibCST, or a string it refuses, is kept, so that
  the engine names it in a warning (`tests/test_unbreakable.py`).

A file in which no statement is needed is not parsed by LibCST at all.
`tests/test_prefilter_on_real_code.py` keeps proving, on real trees, that the findings are those
of a full parse; `tests/test_candidates_members.py` pins each reason a statement is kept.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Set, Tuple, Type

from torchnumlint import bare_code
from torchnumlint import prepass
from torchnumlint.prepass import Lines
from torchnumlint.rules.base import Rule
from torchnumlint.rules.candidate_tree import CandidateTree
from torchnumlint.unit_names import Expressions, UnitNames

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.index import ProjectIndex

_MASKABLE = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_WORD = re.compile(r"[^\W\d]\w*")
_IMPORT = re.compile(r"\bimport\b")
_DEF_NAME = re.compile(r"\b(?:def|class)\s+([^\W\d]\w*)")


class _Statement:
    __slots__ = (
        "node",
        "span",
        "text",
        "code",
        "alone",
        "maskable",
        "is_import",
        "words",
        "binds",
        "links",
        "cuts",
        "_kinds",
        "_names",
        "_expressions",
    )

    def __init__(self, node: ast.stmt, span: Tuple[int, int], text: str, code: str, alone: bool) -> None:
        self.node = node
        self.span = span
        self.text = text
        self.code = code  # `text` less comments, docstrings, unpacking `**` (`bare_code`): what the tests read
        self.alone = alone  # on lines of its own: masking replaces whole lines' worth of it
        self.maskable = alone and isinstance(node, _MASKABLE)
        self.is_import = isinstance(node, (ast.Import, ast.ImportFrom))
        self.words: Set[str] = set(_WORD.findall(code))
        self.binds = _bound_names(node, text)
        self.links = True  # set by `_groups`
        self.cuts: Optional[List[Tuple[int, int]]] = None
        self._kinds: Optional[Set[str]] = None
        self._names: Optional[UnitNames] = None
        self._expressions: Optional[Expressions] = None

    def kinds(self) -> Set[str]:
        """The `ast` node types in the statement (walked once, when a rule's test asks)."""
        if self._kinds is None:
            self._kinds = self._expressions.kinds if self._expressions is not None else {type(n).__name__ for n in ast.walk(self.node)}
        return self._kinds

    def names(self) -> UnitNames:
        """What the statement binds for those who would read it (`unit_names.py`; once)."""
        if self._names is None:
            self._names = UnitNames(self.node, self.text)
        return self._names

    def expressions(self) -> Expressions:
        """The names its expressions use, its long strings, its node types (walked once)."""
        if self._expressions is None:
            self._expressions = Expressions(self.node)
            self._kinds = self._expressions.kinds
        return self._expressions


def _bound_names(node: ast.stmt, text: str) -> Set[str]:
    """The names a top-level statement binds at module level (a function or class: its name),
    and those it imports anywhere: `ImportMap` resolves a name imported in one function in all."""
    if isinstance(node, _MASKABLE):
        names = {node.name}
        if _IMPORT.search(text):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    names.update((alias.asname or alias.name).partition(".")[0] for alias in inner.names)
        return names
    names = set()
    stack: List[ast.AST] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).partition(".")[0] for alias in current.names)
        elif isinstance(current, ast.Name) and isinstance(current.ctx, ast.Store):
            names.add(current.id)
        elif isinstance(current, _MASKABLE):
            names.add(current.name)
            continue  # its body binds nothing at module level
        stack.extend(ast.iter_child_nodes(current))
    return names


def unneeded(
    text: str,
    tree: ast.Module,
    lines: Lines,
    rules: Sequence[Type[Rule]],
    index: Optional[ProjectIndex] = None,
    deep: Callable[[], Sequence[Tuple[int, int]]] = tuple,
) -> Optional[List[Tuple[int, int]]]:
    """The spans of the statements LibCST need not see (to be masked), or None where no
    statement can hold a finding of `rules` (LibCST need not parse the file at all). `deep`: gives
    the spans of the statements too deep for LibCST (`prepass.deep_statements`), asked only where
    a statement is needed; a module-level statement holding one is kept, so that the engine
    names it in a warning."""
    statements = _statements(text, tree.body, lines)
    groups = _groups(statements)
    context = [s for s in statements if not s.links]
    fired: Set[int] = set()
    for group in groups:
        read = _with_context(group, context)
        if any(_can_fire(rule, "\n".join(s.code for s in read), read, index) for rule in rules):
            fired.update(id(s) for s in group)
    if not fired:
        return None
    too_deep = deep()
    masked: List[Tuple[int, int]] = []
    reach = _Reach()
    classes = _Classes(lines)
    undecided: List[Tuple[_Statement, Optional[_Statement]]] = []  # (a statement, its class): masked unless kept code reads it
    for s in statements:
        if id(s) not in fired and s.maskable:
            masked.append(s.span)  # a function or class no rule can fire in, nor read (`_groups`)
        elif (
            not s.maskable
            and _may_mask_module_level(s, too_deep, lines)
            and not (id(s) in fired and _fires_in(s, statements, rules, index))
        ):
            undecided.append((s, None))
        elif isinstance(s.node, ast.ClassDef) and s.maskable:
            undecided.extend((m, s) for m in _class_members(s, statements, classes, rules, index, reach))
        else:
            reach.keep(s)
    while True:  # what kept code reads is kept, and what that reads, until nothing more is
        needed = [(s, owner) for s, owner in undecided if reach.needs(s, owner)]
        if not needed:
            break
        for s, owner in needed:
            reach.keep(s, owner)
        undecided = [u for u in undecided if u not in needed]
    masked.extend(s.span for s, _ in undecided)
    return masked


def _fires_in(s: _Statement, statements: List[_Statement], rules: Sequence[Type[Rule]], index: Optional[ProjectIndex]) -> bool:
    """Whether a rule can report in module-level statement `s` of a group that can fire: tested
    on `s` and the statements binding a name it uses (transitively through all but classes: a
    helper's helpers, not a class's methods, as `_member_reads`). Its group holds more (a
    function naming a value `s` binds), but what is in the group alone is no finding in `s`."""
    read = [s]
    words = set(s.expressions().used)  # not the words of its strings: `__all__ = ["loss"]` reads no `loss`
    found = True
    while found:
        found = False
        for t in statements:
            if t not in read and t.binds & words:
                read.append(t)
                found = True
                if not isinstance(t.node, ast.ClassDef):
                    words |= t.words
    return any(_can_fire(rule, "\n".join(t.code for t in read), read, index) for rule in rules)


def _with_context(group: List[_Statement], context: List[_Statement]) -> List[_Statement]:
    """`group` and the context statements (imports, module-level values) binding a name it uses:
    what a rule reporting in it may read beyond it."""
    words = set().union(*(s.words for s in group))
    return group + [c for c in context if c.binds & words and c not in group]


def _may_mask_module_level(s: _Statement, deep: Sequence[Tuple[int, int]], lines: Lines) -> bool:
    """Whether a module-level statement other than a function or class may be masked where no
    kept code reads it: not an import (nor holding one: `ImportMap` reads them all, and the fixes
    place new imports after the last one), not a bare string (the module docstring places them
    too), not sharing a line, not holding a statement too deep for LibCST nor a string it refuses
    (each must be named in a warning: `tests/test_unbreakable.py`)."""
    if not s.alone or s.is_import or _is_bare_string(s.node):
        return False
    start, end = s.span
    if any(start <= a and b <= end for a, b in deep):
        return False
    names = s.names()
    return not names.imports and not names.pinned and not any(_beyond_libcst(node, lines) for node in s.expressions().long_strings)


def _beyond_libcst(node: ast.expr, lines: Lines) -> bool:
    """Whether a string literal is an implicit concatenation of more than `prepass.MAX_DEPTH`
    pieces: LibCST nests those one level a piece and refuses thousands of them, a refusal the
    engine names in a warning (`engine._parse_masked`, `tests/test_unbreakable.py`), so a
    module-level statement holding one is kept for LibCST to refuse."""
    start, end = lines.offset(node.lineno, node.col_offset), lines.offset(node.end_lineno or node.lineno, node.end_col_offset or 0)
    if end - start < 2 * prepass.MAX_DEPTH:  # a piece is two characters at least
        return False
    pieces = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO("(" + lines.text[start:end] + ")").readline):
            pieces += token.type == tokenize.STRING or tokenize.tok_name[token.type] == "FSTRING_START"
    except (tokenize.TokenError, SyntaxError):
        return True
    return pieces > prepass.MAX_DEPTH


def _is_bare_string(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, (str, bytes))


class _Reach:
    """What the kept code names, and what it defines. Kept code reads an undecided statement
    (`unit_names.py`) in these ways, which are the rules' (`unit_names.py` says where):

    - it names an import the statement makes (`ImportMap` is the whole file's);
    - for a module-level statement, it names a name the statement binds (`ctx.binding`);
    - for a method, code kept in its class names the method (`self.f(...)`: the class's
      methods, `magnitudes._submodule_call`) or an attribute it sets (`ctx.binding(self.x)`);
    - it defines a function of the same name (`gradients.py` tells functions by their names);
    - the statement names a function kept code defines (a call site, or a mention `gradients.py`
      counts), or an attribute kept code of its class hands a function to (`self.loss(p, q)`
      after `self.loss = kl`: `CallSites.kept`).

    A name another class's code uses reaches no method by the method's name: the rules ask a
    call through an instance the project's summaries, built from the whole text."""

    def __init__(self) -> None:
        self.words: Set[str] = set()
        self.defs: Set[str] = set()
        self.in_class: Dict[int, Set[str]] = {}  # class -> words of its kept code
        self.handed: Dict[int, Set[str]] = {}  # class -> attributes it hands a function to

    def keep(self, s: _Statement, owner: Optional[_Statement] = None) -> None:
        """`s` is kept (a method or the shell of class `owner`, or a module-level statement)."""
        self.words |= s.words
        if owner is not None:
            self.in_class.setdefault(id(owner), set()).update(s.words)
        if s._names is not None:
            self.defs |= s._names.defs
            if owner is not None:
                self.handed.setdefault(id(owner), set()).update(s._names.handed)
        else:  # not walked: its `def`/`class` names, read off its code (strings can only add some)
            self.defs.update(_DEF_NAME.findall(s.code))
            if isinstance(s.node, _MASKABLE):
                self.defs.add(s.node.name)

    def needs(self, s: _Statement, owner: Optional[_Statement]) -> bool:
        names = s.names()
        used = s.expressions().used if owner is None else s.words  # a method's words: no second walk
        if names.pinned or names.imports & self.words or names.defs & self.defs or used & self.defs:
            return True
        if owner is None:
            return bool(s.binds & self.words)
        return bool((names.defs | names.stores) & self.in_class.get(id(owner), set()) or used & self.handed.get(id(owner), set()))


# Methods the rules read by name wherever their class is kept: `__init__`'s parameter defaults
# (`eps_below_fp16._param_default`), a module's `forward` and its Function's `backward`
# (TNL301's `visit_ClassDef` and its fix), a pipeline's `__call__` (`gradients._by_convention`;
# it is called through instances, `pipe(x)`, never by its name). No rule reads `__new__` or
# `__post_init__` by name: they are kept as any method is, for what they set or call.
_READ_BY_NAME = frozenset({"__init__", "forward", "backward", "__call__"})


class _Classes:
    """The methods of the file's top-level classes, split once (`_class_members`)."""

    def __init__(self, lines: Lines) -> None:
        self.lines = lines
        self._members: Dict[int, Tuple[List[_Statement], List[_Statement]]] = {}

    def split(self, cls: _Statement) -> Tuple[List[_Statement], List[_Statement]]:
        """(its methods and classes that may be masked, its other statements)."""
        found = self._members.get(id(cls))
        if found is None:
            assert isinstance(cls.node, ast.ClassDef)
            body = _statements(self.lines.text, cls.node.body, self.lines, cls.cuts)
            found = self._members[id(cls)] = ([m for m in body if m.maskable], [m for m in body if not m.maskable])
        return found


def _class_members(
    cls: _Statement,
    statements: List[_Statement],
    classes: _Classes,
    rules: Sequence[Type[Rule]],
    index: Optional[ProjectIndex],
    reach: _Reach,
) -> List[_Statement]:
    """A kept class's methods (and classes nested at class level) in which no rule can fire and
    that the rules do not read by name: those to mask unless kept code reads them (`_Reach`).
    The class's other statements (its header, assignments at class level) are kept, and so are
    the methods a rule can fire in, tested like top-level groups on what a rule reporting in
    them may read (`_member_reads`)."""
    members, others = classes.split(cls)
    shell = _shell(cls, others, classes.lines)
    reach.keep(shell, cls)
    undecided = []
    for group in _member_groups(members):
        if any(m.node.name in _READ_BY_NAME for m in group):  # type: ignore[attr-defined]  # members are defs
            fires = True
        else:
            read = _member_reads(group, members, shell, cls, statements, classes)
            fires = any(_can_fire(rule, "\n".join(s.code for s in read), read, index) for rule in rules)
        if fires:
            for m in group:
                reach.keep(m, cls)
        else:
            undecided.extend(group)
    return undecided


def _shell(cls: _Statement, others: List[_Statement], lines: Lines) -> _Statement:
    """The class less its methods: its decorators and header (comments kept), and its other
    statements' bare code."""
    node = cls.node
    assert isinstance(node, ast.ClassDef)
    start = cls.span[0]
    header = lines.text[start : lines.span(node.body[0])[0]]  # up to the first statement's decorators
    code = "\n".join([header] + [o.code for o in others])
    shell = _Statement(node, cls.span, header, code, False)
    parts: List[ast.AST] = [*node.decorator_list, *node.bases, *node.keywords, *(o.node for o in others)]
    shell._kinds = {"ClassDef"}.union(*(o.kinds() for o in others), *({type(n).__name__ for n in ast.walk(p)} for p in parts))
    return shell


def _member_groups(members: List[_Statement]) -> List[List[_Statement]]:
    """The methods linked by a name one defines or imports and the other uses (a helper and its
    callers), transitively: as `_groups` links top-level statements."""
    parent = list(range(len(members)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    binder: dict = {}
    for i, m in enumerate(members):
        for name in m.names().defs | m.names().imports:
            binder.setdefault(name, []).append(i)
    for i, m in enumerate(members):
        for word in m.words & binder.keys():
            for j in binder[word]:
                parent[root(i)] = root(j)
    groups: dict = {}
    for i, m in enumerate(members):
        groups.setdefault(root(i), []).append(m)
    return list(groups.values())


def _called_by_name(name: str) -> bool:
    """A method called as `obj.name(...)`: not a dunder (`__init__` runs as `Cls(...)`,
    `__getitem__` as `x[i]`)."""
    return not (name.startswith("__") and name.endswith("__"))


def _member_reads(
    group: List[_Statement],
    members: List[_Statement],
    shell: _Statement,
    cls: _Statement,
    statements: List[_Statement],
    classes: _Classes,
) -> List[_Statement]:
    """What a rule reporting in a group of methods may read: the group; the methods of its class
    setting an attribute it reads (`ctx.binding(self.x)`; transitively: `self.a = self.b`); the
    class's own statements; and, transitively, the top-level statements binding a name it uses
    (a helper, a module-level value, an import, a class it builds) or calling a method of it by
    name (`model.encode(p)`: a call site the project's summaries give), where another class
    counts by its methods of those names (a helper inherited from a base class in the file).
    A function or value so read brings what it names in turn; a class does not, nor do the
    class's header and own statements: the rules read a base class, a decorator, a class-level
    value through the project index (`ast`), not LibCST's tree."""
    read = list(group)
    words = set().union(*(m.words for m in group))
    found = True
    while found:
        found = False
        for m in members:
            if m not in read and m.names().stores & words:
                read.append(m)
                words |= m.words
                found = True
    called = {m.node.name for m in read if _called_by_name(m.node.name)}  # type: ignore[attr-defined]  # members are defs
    read.append(shell)
    linked = set(map(id, read))
    found = True
    while found:
        found = False
        for s in statements:
            if id(s) in linked or s is cls:
                continue
            is_class = isinstance(s.node, ast.ClassDef)
            if s.binds & words or (s.words & called and not is_class):
                read.append(s)
                linked.add(id(s))
                found = True
                if not is_class:  # a helper's own helpers and values
                    words |= s.words
            elif s.maskable and isinstance(s.node, ast.ClassDef) and s.words & (words | called):
                for m in classes.split(s)[0]:
                    if id(m) not in linked and ({n for n in m.names().defs if _called_by_name(n)} & words or m.words & called):
                        read.append(m)
                        linked.add(id(m))
    return read


def _can_fire(rule: Type[Rule], seen: str, read: List[_Statement], index: Optional[ProjectIndex]) -> bool:
    """Whether `rule` can report in the code of `read` (a group and the context statements it
    reads; `seen`, their bare code): its text test, then its tests on their `ast` nodes (the
    node types or words of `ast_kinds`/`ast_words`, then its `tree_test`)."""
    if not rule.could_fire(seen, index):
        return False
    if rule.ast_kinds and not any(s.words & rule.ast_words or s.kinds() & rule.ast_kinds for s in read):
        return False
    return rule.tree_test(CandidateTree([(s.node, s.words) for s in read]), index)


def _groups(statements: List[_Statement]) -> List[List[_Statement]]:
    """The statements linked by name (one uses a name the other binds), transitively: the parts
    of a file a rule may read together. Imports, and module-level statements that name no
    function or class of the file, link nothing (every function uses `torch`, many a module-level
    `logger`): each is a group of its own, and its text joins the test of any group that uses a
    name it binds (`unneeded`)."""
    parent = list(range(len(statements)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    defined = set().union(*(s.binds for s in statements if s.maskable))
    for statement in statements:  # a module-level value links its users only if it names a function or class
        statement.links = statement.maskable or (not statement.is_import and bool(statement.words & defined))
    binder: dict = {}
    for i, statement in enumerate(statements):
        if statement.links:
            for name in statement.binds:
                binder.setdefault(name, []).append(i)
    for i, statement in enumerate(statements):
        if not statement.links:
            continue
        for word in statement.words & binder.keys():
            for j in binder[word]:
                parent[root(i)] = root(j)
    groups: dict = {}
    for i, statement in enumerate(statements):
        groups.setdefault(root(i), []).append(statement)
    return list(groups.values())


def _statements(text: str, body: List[ast.stmt], lines: Lines, cuts: Optional[List[Tuple[int, int]]] = None) -> List[_Statement]:
    """The statements of a block (the module's, a class's) with their spans; one that shares a
    line with another is never masked (masking replaces whole lines' worth of it). `cuts`: what
    `bare_code` leaves out of the block's statement (a class's), else found per statement."""
    spans = [lines.span(node) for node in body]
    out = []
    for i, node in enumerate(body):
        start, end = spans[i]
        alone = (i == 0 or (body[i - 1].end_lineno or body[i - 1].lineno) < _first_line(node)) and (
            i + 1 == len(body) or body[i + 1].lineno > (node.end_lineno or node.lineno)
        )
        own = bare_code.cuts(node, start, end, lines) if cuts is None else cuts
        statement = _Statement(node, (start, end), text[start:end], bare_code.cut(text, start, end, own), alone)
        if isinstance(node, ast.ClassDef):
            statement.cuts = own  # its methods' bare code, cut from these (`_Classes`)
        out.append(statement)
    return out


def _first_line(node: ast.stmt) -> int:
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])
