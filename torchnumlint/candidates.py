"""Which top-level statements of a file LibCST must see: the rest is masked (`prepass.mask`).

A file reaches LibCST when a rule can fire somewhere in it (`Rule.could_fire` on the whole text);
most torch files do, since `exp`, `log` or `/` appear in nearly all of them. But a finding sits in
one top-level statement, and what a rule reads around it is reached by name: an import alias
(`from torch.nn.functional import softmax as sm`), a module-level helper or class it calls or
inherits, the call sites of the function it is in. So a top-level function or class is kept when
a rule can fire (`could_fire`, the same test as for the file) on the *bare code* of its group
(`bare_code.py`: no docstrings, no comments but those saying noqa; no rule reports from prose,
yet `/`, `exp` and `log` in it kept most of torch's files): the statements linked to it by name,
transitively (one uses a name another binds: a helper, a base class, a module-level value, a
caller), with the imports binding a name the group uses (`sm(x)` under the alias above). A rule's
test may need parts from several statements (`criterion = nn.BCELoss()` ...
`criterion(predict(x), y)` where `predict` returns a sigmoid), and what a rule reads beyond the
statement holding its finding it reaches by those names.

Every other top-level statement (imports, assignments, `if`/`try` blocks) is always kept: they
bind what names resolve to, and one beyond LibCST's reach (a 10,000-term sum) must still be named
in a warning (`tests/test_unbreakable.py`). A file in which no statement is needed is not parsed
by LibCST at all. `tests/test_prefilter_on_real_code.py` keeps
proving, on real trees, that the findings are those of a full parse.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, List, Optional, Sequence, Set, Tuple, Type

from torchnumlint import literal_tables
from torchnumlint.bare_code import bare_code
from torchnumlint.prepass import Lines
from torchnumlint.rules.base import Rule
from torchnumlint.rules.candidate_tree import CandidateTree

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.index import ProjectIndex

_MASKABLE = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_WORD = re.compile(r"[^\W\d]\w*")
_IMPORT = re.compile(r"\bimport\b")


class _Statement:
    __slots__ = ("node", "span", "text", "code", "maskable", "is_import", "words", "binds", "links", "_kinds")

    def __init__(self, node: ast.stmt, span: Tuple[int, int], text: str, code: str, maskable: bool) -> None:
        self.node = node
        self.span = span
        self.text = text
        self.code = code  # `text` less comments, docstrings, unpacking `**` (`bare_code`): what the tests read
        self.maskable = maskable
        self.is_import = isinstance(node, (ast.Import, ast.ImportFrom))
        self.words: Set[str] = set(_WORD.findall(code))
        self.binds = _bound_names(node, text)
        self.links = True  # set by `_groups`
        self._kinds: Optional[Set[str]] = None

    def kinds(self) -> Set[str]:
        """The `ast` node types in the statement (walked once, when a rule's test asks)."""
        if self._kinds is None:
            self._kinds = {type(node).__name__ for node in ast.walk(self.node)}
        return self._kinds


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
    text: str, tree: ast.Module, lines: Lines, rules: Sequence[Type[Rule]], index: Optional[ProjectIndex] = None
) -> Optional[List[Tuple[int, int]]]:
    """The spans of the top-level statements LibCST need not see (to be masked), and of the large
    constant dicts it is given as `{}` (`literal_tables.py`, a `prepass.Display` each), or None
    where no statement can hold a finding of `rules` (LibCST need not parse the file at all)."""
    statements = _statements(text, tree, lines)
    groups = _groups(statements)
    context = [s for s in statements if not s.links]
    masked: List[Tuple[int, int]] = []
    any_needed = False
    for group in groups:
        words = set().union(*(s.words for s in group))
        read = group + [c for c in context if c.binds & words and c not in group]
        seen = "\n".join(s.code for s in read)
        if any(_can_fire(rule, seen, read, index) for rule in rules):
            any_needed = True
        else:
            masked.extend(s.span for s in group if s.maskable)
    if not any_needed:
        return None
    gone = set(masked)
    return masked + literal_tables.tables([s.node for s in statements if s.span not in gone], lines)


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


def _statements(text: str, tree: ast.Module, lines: Lines) -> List[_Statement]:
    """The top-level statements with their spans; one that shares a line with another is never
    masked (masking replaces whole lines' worth of it)."""
    spans = [lines.span(node) for node in tree.body]
    out = []
    for i, node in enumerate(tree.body):
        start, end = spans[i]
        alone = (i == 0 or (tree.body[i - 1].end_lineno or tree.body[i - 1].lineno) < _first_line(node)) and (
            i + 1 == len(tree.body) or tree.body[i + 1].lineno > (node.end_lineno or node.lineno)
        )
        code = bare_code(node, start, end, lines)
        out.append(_Statement(node, (start, end), text[start:end], code, alone and isinstance(node, _MASKABLE)))
    return out


def _first_line(node: ast.stmt) -> int:
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])
