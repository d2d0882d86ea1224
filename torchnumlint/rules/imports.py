"""Import resolution: what a module's imports bind (`ImportMap`), the qualified name of an
expression under any import form, whether a text imports torch at all.

LibCST's QualifiedNameProvider/ScopeProvider cost ~8x a bare parse on real code, so we resolve
with a small resolver of our own: a module's imports are few, and only the names a rule asks
about are followed, lazily.
"""

from __future__ import annotations

import re
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple

import libcst as cst


# `import torch`, `import torch.nn as nn`, `import os, torch`, `from torch import nn`, at any
# indentation (an import inside a function or a try block counts).
_TORCH_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+torch\b|import[ \t]+(?:[\w.]+(?:[ \t]+as[ \t]+\w+)?[ \t]*,[ \t]*)*torch\b)",
    re.MULTILINE,
)


def imports_torch(text: str) -> bool:
    """Whether the source imports torch at all. A file that never does is not torch code: its
    `.sum()`, `.std()` and `log` belong to numpy, Python or another framework, and no rule
    reports there (a cheap text test, run before any parse)."""
    return _TORCH_IMPORT.search(text) is not None


class ImportMap:
    """local name -> fully qualified name, from every import statement in a module."""

    def __init__(self, module: cst.Module) -> None:
        self.aliases: Dict[str, str] = {}
        self.top_level: Dict[str, str] = {}
        # Names imported from different places (`try: from torch.cuda.amp import autocast`
        # `except ImportError: from torch.amp import autocast`): which one a run sees depends
        # on the branch, so they resolve to nothing and no fix rewrites them as either.
        self.ambiguous: Set[str] = set()
        self.last_top_import: Optional[cst.SimpleStatementLine] = None
        self.header_end: Optional[cst.SimpleStatementLine] = None  # docstring / __future__
        for index, stmt in enumerate(module.body):
            if isinstance(stmt, cst.SimpleStatementLine):
                small = stmt.body
                if any(isinstance(s, (cst.Import, cst.ImportFrom)) for s in small):
                    self.last_top_import = stmt
                    if self._is_future(small):
                        self.header_end = stmt
                elif index == 0 and _is_docstring(stmt):
                    self.header_end = stmt
        self._collect(module.body, top=True)

    @staticmethod
    def _is_future(small: Sequence[cst.BaseSmallStatement]) -> bool:
        return any(isinstance(s, cst.ImportFrom) and isinstance(s.module, cst.Name) and s.module.value == "__future__" for s in small)

    def _collect(self, body: Sequence[cst.CSTNode], top: bool) -> None:
        for stmt in body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, (cst.Import, cst.ImportFrom)):
                        self._add(small, top)
            elif isinstance(stmt, cst.BaseCompoundStatement):
                # Imports under `if`/`try` at module level still bind module-level names;
                # imports inside functions bind locals, good enough for resolution.
                # Imports under `if TYPE_CHECKING:` are not there at run time: fixes never use them.
                is_block = isinstance(stmt, (cst.If, cst.Try, cst.With)) and not _is_type_checking(stmt)
                for child in _bodies(stmt):
                    self._collect(child, top and is_block)

    def _add(self, node, top: bool) -> None:
        found: Dict[str, str] = {}
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = dotted(alias.name)
                if alias.asname is not None:
                    found[cst.ensure_type(alias.asname.name, cst.Name).value] = full
                else:
                    head = full.split(".")[0]
                    found[head] = head
        else:
            if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
                return
            base = dotted(node.module)
            for alias in node.names:
                name = dotted(alias.name)
                local = alias.asname.name.value if alias.asname is not None else name
                found[local] = f"{base}.{name}"
        for local, target in found.items():
            if self.aliases.get(local, target) != target:
                self.ambiguous.add(local)
        self.aliases.update(found)
        if top:
            self.top_level.update(found)

    def qualname(self, expr: cst.BaseExpression) -> Optional[str]:
        """`F.softmax` -> 'torch.nn.functional.softmax' when F is that module; else None."""
        parts: List[str] = []
        while isinstance(expr, cst.Attribute):
            parts.append(expr.attr.value)
            expr = expr.value
        if not isinstance(expr, cst.Name) or expr.value in self.ambiguous:
            return None
        head = self.aliases.get(expr.value)
        if head is None:
            if expr.value != "torch":  # `torch` used without an import we saw: still torch
                return None
            head = "torch"
        parts.append(head)
        return ".".join(reversed(parts))

    def is_module_ref(self, expr: cst.BaseExpression) -> bool:
        """Whether `expr` names an imported module or object (so `expr.log()` is no method call)."""
        while isinstance(expr, cst.Attribute):
            expr = expr.value
        return isinstance(expr, cst.Name) and (expr.value in self.aliases or expr.value == "torch")

    def reference(self, qualified: str, text: str = "") -> Tuple[str, Optional[str]]:
        """Source text that names `qualified` in this module, and the import line it needs, if any.

        Reuses the file's own alias (`F.log_softmax` under `import torch.nn.functional as F`); a new
        `F` alias is introduced only when the module's `text` uses no name `F` at all.
        """
        for local, target in self.top_level.items():
            if target == qualified and local not in self.ambiguous:
                return local, None
        parts = qualified.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            prefix = ".".join(parts[:cut])
            for local, target in self.top_level.items():
                if target == prefix and local not in self.ambiguous:
                    return ".".join([local] + parts[cut:]), None
        if qualified.startswith("torch.nn.functional.") and not re.search(r"\bF\b", text):
            return "F." + parts[-1], "import torch.nn.functional as F"
        return qualified, "import torch"


def dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{dotted(node.value)}.{node.attr.value}"
    raise TypeError(type(node).__name__)


def _is_type_checking(stmt: cst.BaseCompoundStatement) -> bool:
    test = getattr(stmt, "test", None)
    name = test.value if isinstance(test, cst.Name) else test.attr.value if isinstance(test, cst.Attribute) else None
    return name == "TYPE_CHECKING"


def _is_docstring(stmt: cst.SimpleStatementLine) -> bool:
    return (
        len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _bodies(stmt: cst.BaseCompoundStatement) -> Iterator[Sequence[cst.CSTNode]]:
    """The statement lists directly under a compound statement (else/except/finally too)."""
    stack: List[cst.CSTNode] = [stmt]
    while stack:
        node = stack.pop()
        body = getattr(node, "body", None)
        if isinstance(body, cst.IndentedBlock):
            yield body.body
        elif isinstance(body, cst.SimpleStatementSuite):
            yield body.body
        elif isinstance(body, (list, tuple)):
            yield body
        for attr in ("orelse", "finalbody"):
            extra = getattr(node, attr, None)
            if extra is not None:
                stack.append(extra)
        for handler in getattr(node, "handlers", ()) or ():
            stack.append(handler)
