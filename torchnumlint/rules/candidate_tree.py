"""The code of a group of top-level statements as a rule's candidate test sees it
(`Rule.tree_test`, asked by `candidates._can_fire`): CPython's tree of each statement, with its
nodes of one type found in one walk however many rules ask, and the words of its bare code.

Also the tree tests more than one rule shares, each named after the LibCST matcher whose forms it
keeps (`shapes.root_of`, `divisors.zero_kind`). A test answers False only where that matcher
cannot match: it reads the same code, and keeps any node it is unsure of. Only `ast` here: the
candidate tests run before libcst is imported.
"""

from __future__ import annotations

import ast
import math
import weakref
from typing import Dict, Iterator, List, MutableMapping, Sequence, Set, Tuple, Type, TypeVar

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


def numeric_literal(node: ast.AST) -> bool:
    """An int or float literal, signed or not (`2`, `-0.5`, `+1e-3`): `syntax.number_value`
    reads one, and `number_kinds.is_python_number` a sign on it (a bool is not one: LibCST
    sees `True` as a name)."""
    while isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


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


def may_divide_by_zero(tree: CandidateTree, div_words: Sequence[str]) -> bool:
    """Whether the code can hold a division whose denominator a division rule reads: a call named
    by one of `div_words`, or a true division (`x / d`, `x /= d`) whose denominator is not a
    numeric literal (`divisors.zero_kind` takes a Python number for a constant, never 0; a
    normalisation, a cosine or a softmax by hand divides by a norm or a sum)."""
    if tree.has_word(*div_words):
        return True
    if any(isinstance(node.op, ast.Div) and not numeric_literal(node.right) for node in tree.nodes(ast.BinOp)):
        return True
    return any(isinstance(node.op, ast.Div) and not numeric_literal(node.value) for node in tree.nodes(ast.AugAssign))


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
    return any(
        node.id in wanted and isinstance(node.ctx, ast.Load) and id(node) not in bases for node in tree.nodes(ast.Name)
    )


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
