"""The code of a group of top-level statements as a rule's candidate test sees it
(`Rule.tree_test`, asked by `candidates._can_fire`): CPython's tree of each statement, with its
nodes of one type found in one walk however many rules ask, and the words of its bare code.

Also the tree tests more than one rule shares, each named after the LibCST matcher whose forms it
keeps (`shapes.root_of`, `calls.match_call`); a test of one matcher's forms lives beside it
(`divisors.may_divide_by_zero`, `shapes.may_square`, `pairwise.may_pair_rows`). A test answers
False only where that matcher cannot match: it reads the same code, and keeps any node it is
unsure of. Only `ast` here: `candidates.py` imports this module.
"""

from __future__ import annotations

import ast
import math
import weakref
from typing import Dict, Iterator, List, MutableMapping, Optional, Sequence, Set, Tuple, Type, TypeVar

N = TypeVar("N", bound=ast.AST)

# A statement's nodes by type, kept while its tree lives: every rule asks of the same statements.
_BY_TYPE: "MutableMapping[ast.stmt, Dict[type, List[ast.AST]]]" = weakref.WeakKeyDictionary()


class CandidateTree:
    """The statements a group's test reads (the group and the context statements it names),
    each with the words of its bare code."""

    __slots__ = ("_statements",)

    def __init__(self, statements: Sequence[Tuple[ast.stmt, Set[str]]]) -> None:
        self._statements = statements

    def nodes(self, kind: Type[N]) -> Iterator[N]:
        """Every node of type `kind` (exactly that type) in the statements."""
        for statement, _ in self._statements:
            yield from _by_type(statement).get(kind, ())  # type: ignore[misc]  # the list under `kind` holds only `kind`s

    def statements(self) -> Iterator[ast.stmt]:
        """The top-level statements themselves."""
        return (statement for statement, _ in self._statements)

    def has_word(self, *words: str) -> bool:
        """Whether the bare code names one of `words` as a whole word."""
        return any(word in found for _, found in self._statements for word in words)


def _by_type(statement: ast.stmt) -> Dict[type, List[ast.AST]]:
    table = _BY_TYPE.get(statement)
    if table is None:
        table = {}
        for node in ast.walk(statement):
            table.setdefault(type(node), []).append(node)
        _BY_TYPE[statement] = table
    return table


def integral_literal(node: ast.AST) -> bool:
    """A literal exponent `shapes.root_of` never takes for a root: a number with one sign or none
    and no fraction (`2`, `-1`, `2.0`). A float too large to be finite is kept (not this)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    if not isinstance(node, ast.Constant):
        return False
    if type(node.value) is int:
        return True
    return type(node.value) is float and math.isfinite(node.value) and node.value.is_integer()


def half_power(exponent: ast.AST) -> bool:
    """A literal exponent of 0.5, signed `+` or not: `shapes.root_of` calls `v ** 0.5` a square root."""
    if isinstance(exponent, ast.UnaryOp) and isinstance(exponent.op, ast.UAdd):
        exponent = exponent.operand
    return isinstance(exponent, ast.Constant) and type(exponent.value) in (int, float) and exponent.value == 0.5


def may_be_square_root(tree: CandidateTree) -> bool:
    """Whether the code can hold a root `shapes.root_of` calls "sqrt": `sqrt(v)`, `pow(v, 0.5)`
    (by name), or `v ** 0.5`."""
    return tree.has_word("sqrt", "pow") or any(isinstance(node.op, ast.Pow) and half_power(node.right) for node in tree.nodes(ast.BinOp))


def may_be_root(tree: CandidateTree, root_words: Sequence[str]) -> bool:
    """Whether the code can hold a root `shapes.root_of` finds: a call named by one of
    `root_words` (sqrt, rsqrt, pow, pow_; an import of one under another name names it too), or
    a `**` whose exponent is not a whole literal number (`x ** 0.5`, `x ** p`: `p` may be a
    sigmoid; `x ** 2` is no root). `x **= 0.5` is no BinaryOperation to `root_of`."""
    if tree.has_word(*root_words):
        return True
    return any(isinstance(node.op, ast.Pow) and not integral_literal(node.right) for node in tree.nodes(ast.BinOp))


def import_targets(tree: CandidateTree) -> Optional[Dict[str, Set[str]]]:
    """Each name the code's imports bind (at any depth, as `ImportMap` collects them), with what
    they bind it to: a module or object, or "." for a relative import (`ImportMap` skips it, so
    it names no module). None where the code holds a `match` statement, whose cases `ImportMap`
    does not read."""
    if any(True for _ in tree.nodes(ast.Match)):
        return None
    targets: Dict[str, Set[str]] = {}
    for node in tree.nodes(ast.Import):
        for alias in node.names:
            local = alias.asname or alias.name.split(".")[0]
            targets.setdefault(local, set()).add(alias.name if alias.asname else local)
    for found in tree.nodes(ast.ImportFrom):
        for alias in found.names:
            if alias.name != "*":
                target = "." if found.level or found.module is None else f"{found.module}.{alias.name}"
                targets.setdefault(alias.asname or alias.name, set()).add(target)
    return targets


def may_call(tree: CandidateTree, names: Sequence[str]) -> bool:
    """Whether the code can call an op of `names` as `calls.match_call` matches one: by a name or
    alias (`log(x)`, `from torch import log as ln`), as `torch.log(x)`, or as a tensor's method
    (`x.log()`). An occurrence of the name that is none of those keeps nothing: a name read only
    for its attributes (`log.info(...)`, a logger) or bound (`log = getLogger()`), and an attribute
    of `self` (`self.log(...)`: a module's own) or of a module the code imports other than torch
    (`math.log(x)`, `np.log(x)`: `ImportMap.is_module_ref`, and not torch's op by its qualname)."""
    if not tree.has_word(*names):
        return False
    wanted = set(names)
    other_modules = _imported_bases(tree)
    if any(_named(alias, wanted) for alias in tree.nodes(ast.alias)):
        return True
    if not any((alias.asname or alias.name.split(".")[0]) == "self" for alias in tree.nodes(ast.alias)):
        other_modules.add("self")  # `match_call` takes no `self.log(...)` for a tensor's method
    bases = set()
    for node in tree.nodes(ast.Attribute):
        base = node.value
        if isinstance(base, ast.Name) and base.id in wanted:
            bases.add(id(base))
        if node.attr in wanted and not (isinstance(base, ast.Name) and base.id in other_modules):
            return True
    return any(node.id in wanted and isinstance(node.ctx, ast.Load) and id(node) not in bases for node in tree.nodes(ast.Name))


def _named(alias: ast.alias, wanted: Set[str]) -> bool:
    return bool(wanted.intersection(alias.name.split("."))) or alias.asname in wanted


def _imported_bases(tree: CandidateTree) -> Set[str]:
    """The names the code's module-level import statements bind to modules or objects other than
    torch's (`import math`, `import numpy as np`), as `ImportMap` reads them; not one a relative
    import or an import of torch's binds too. An import nested in a block or a function is left
    out (it keeps its names' groups: not known here to be one `ImportMap` collects)."""
    other: Set[str] = set()
    kept: Set[str] = set()
    for node in tree.statements():
        if isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                (kept if alias.name.split(".")[0] == "torch" else other).add(local)
        elif isinstance(node, ast.ImportFrom):
            relative = bool(node.level) or node.module is None
            for alias in node.names:
                local = alias.asname or alias.name
                (kept if relative or (node.module or "").split(".")[0] == "torch" else other).add(local)
    return other - kept
