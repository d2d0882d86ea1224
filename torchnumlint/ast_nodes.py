"""`ast.iter_child_nodes` and `ast.walk`, in the same order, at less cost.

The facts pass and the pre-pass walk CPython's tree of every file several times (each function's
scan in `summaries.py`, the depth test in `prepass.py`, the strings of `bare_code.py`);
`ast.iter_child_nodes` is a generator over another generator (`ast.iter_fields`), and its cost
per node is most of those walks'. These read each node type's fields once and build a list.
"""

from __future__ import annotations

import ast
from collections import deque
from typing import Dict, Iterator, List, Tuple

_AST = ast.AST
_FIELDS: Dict[type, Tuple[str, ...]] = {}


def child_nodes(node: ast.AST) -> List[ast.AST]:
    """`list(ast.iter_child_nodes(node))`: the direct children, fields in declaration order."""
    kind = type(node)
    fields = _FIELDS.get(kind)
    if fields is None:
        fields = _FIELDS[kind] = kind._fields
    found: List[ast.AST] = []
    for name in fields:
        value = getattr(node, name, None)  # `iter_fields` skips a field the node lacks
        if isinstance(value, _AST):
            found.append(value)
        elif isinstance(value, list):
            found.extend([item for item in value if isinstance(item, _AST)])
    return found


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """`ast.walk(node)`: `node` and every node under it, breadth first."""
    todo = deque([node])
    while todo:
        node = todo.popleft()
        todo.extend(child_nodes(node))
        yield node
