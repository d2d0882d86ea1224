"""A lean walk over LibCST trees, with CSTVisitor's protocol.

LibCST's `node.visit(visitor)` rebuilds every node on the way back up and descends into every
whitespace, comma and parenthesis node. Rules never look at those, and the rebuild is most of the
cost of a lint: this walk reads only the fields that can hold code, in source order, and builds
nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Iterator, Tuple, Type

import libcst as cst

_SKIP = frozenset(
    {
        "lpar",
        "rpar",
        "comma",
        "dot",
        "equal",
        "colon",
        "semicolon",
        "operator",
        "leading_lines",
        "lines_after_decorators",
        "header",
        "footer",
        "newline",
        "trailing_whitespace",
        "first_line",
        "empty_lines",
        "indent",
        "last_line",
        "asynchronous",
        "star_tok",
        "open_bracket",
        "close_bracket",
        "lbrace",
        "rbrace",
        "lbracket",
        "rbracket",
    }
)
# Fields whose source order differs from their declaration order.
_FIRST = {
    "FunctionDef": ("decorators", "name", "params", "returns"),
    "ClassDef": ("decorators", "name", "bases", "keywords"),
    "IfExp": ("body", "test"),
}
_FIELDS: Dict[Type[cst.CSTNode], Tuple[str, ...]] = {}


def _fields(cls: Type[cst.CSTNode]) -> Tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        kept = [f.name for f in dataclasses.fields(cls) if f.name not in _SKIP and "whitespace" not in f.name]
        first = [n for n in _FIRST.get(cls.__name__, ()) if n in kept]
        names = _FIELDS[cls] = tuple(first + [n for n in kept if n not in first])
    return names


def children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The code-bearing children of `node`, in source order."""
    for name in _fields(type(node)):
        value = getattr(node, name)
        if _is_node(type(value)):
            yield value
        elif isinstance(value, (list, tuple)):
            for item in value:
                if _is_node(type(item)):
                    yield item


_NODE_TYPES: Dict[type, bool] = {}


def _is_node(kind: type) -> bool:
    """`isinstance(value, cst.CSTNode)` by `type(value)`, remembered: `CSTNode` is an ABC, whose
    isinstance test runs Python code for every field of every node walked."""
    known = _NODE_TYPES.get(kind)
    if known is None:
        known = _NODE_TYPES[kind] = issubclass(kind, cst.CSTNode)
    return known


class Visitor:
    """`on_visit` (True: descend) and `on_leave`, by default dispatching to `visit_<Node>` (which
    may return False to skip the children) and `leave_<Node>`, as in libcst.CSTVisitor."""

    def on_visit(self, node: cst.CSTNode) -> bool:
        method = getattr(self, "visit_" + type(node).__name__, None)
        return method is None or method(node) is not False

    def on_leave(self, node: cst.CSTNode) -> None:
        method = getattr(self, "leave_" + type(node).__name__, None)
        if method is not None:
            method(node)

    def walk(self, node: cst.CSTNode) -> None:
        if self.on_visit(node):
            for child in children(node):
                self.walk(child)
        self.on_leave(node)


def contains(tree: cst.CSTNode, target: cst.CSTNode) -> bool:
    """Whether `target` (by identity) is `tree` or inside it."""
    if tree is target:
        return True
    return any(contains(child, target) for child in children(tree))
