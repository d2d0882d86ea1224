"""What a statement the pre-filter may mask binds, for those who would read it (`candidates.py`).

A method of a kept class, or a module-level statement, can be masked only if nothing LibCST is
still given reads it. The rules read another part of their file by name, and only these ways
(studied in `torchnumlint/rules/`):

- a function or class by its name: its call sites (`callers.CallSites`, `self.f(...)` and
  `f(...)`), how often its name is written and how many functions have it (`gradients.py`), the
  methods a class defines (`magnitudes._submodule_call`): `defs`, every `def` and `class` at any
  depth (two nested `def inner` of the same name are one name there);
- an attribute by where it is set: `ctx.binding(self.x)` counts every `self.x = ...` of the
  class, `attributes.assignments`, `mask_origin._self_assignments` and `masking.fills._buffers`
  (`self.register_buffer("x", ...)`) read them all: `stores`, each attribute set (any target,
  any depth) or registered by name;
- an import by the name it binds (`ImportMap` is module-wide, and two imports of one name make
  it ambiguous): `imports`;
- a function by the names written in code (`used`: names, attribute names; not the words of a
  string, which no rule reads as a mention: `__all__ = ["loss"]` calls nothing);
- a function handed to an attribute (`self.loss = kl` or `partial(kl, ...)`) is called through
  it (`CallSites.kept`): `handed`, the attributes so set; their readers are its call sites.

`global` and `nonlocal` bind names of other scopes: a statement with them is `pinned` (kept).
`UnitNames` reads all of it but `used` off the statements and their targets; `Expressions`
walks a statement whole, for `used` and what else the pre-filter asks of a module-level one.
"""

from __future__ import annotations

import ast
import re
from typing import List, Set

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
LONG = 3000  # characters of a one-line string literal worth counting the pieces of
# calls that set an attribute named by a string: (callee name, index of the name argument)
_REGISTERS = {"register_buffer": 0, "register_parameter": 0, "register_module": 0, "add_module": 0, "setattr": 1}
_REGISTER_WORDS = re.compile(r"\b(?:" + "|".join(_REGISTERS) + r")\b")
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")  # where statements hold statements


class UnitNames:
    """The names one statement binds or hands on. Read off its statements and their targets
    alone (a walk of every expression costs more than CPython's parse); a call's string argument
    only where the text names a call that registers one."""

    __slots__ = ("defs", "imports", "stores", "handed", "pinned")

    def __init__(self, node: ast.stmt, text: str) -> None:
        self.defs: Set[str] = set()
        self.imports: Set[str] = set()
        self.stores: Set[str] = set()
        self.handed: Set[str] = set()
        self.pinned = False
        stack: List[ast.AST] = [node]
        while stack:  # iterative: a statement may be deep
            current = stack.pop()
            if isinstance(current, _DEFS):
                self.defs.add(current.name)
            elif isinstance(current, (ast.Import, ast.ImportFrom)):
                self.imports.update((alias.asname or alias.name).partition(".")[0] for alias in current.names)
            elif isinstance(current, ast.Assign):
                self._targets(current.targets)
                if _hands_on(current.value):
                    self.handed.update(t.attr for t in current.targets if isinstance(t, ast.Attribute))
            elif isinstance(current, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
                self._targets([current.target])
            elif isinstance(current, (ast.With, ast.AsyncWith)):
                self._targets([item.optional_vars for item in current.items if item.optional_vars is not None])
            elif isinstance(current, ast.Delete):
                self._targets(current.targets)
            elif isinstance(current, (ast.Global, ast.Nonlocal)):
                self.pinned = True
            for block in _BLOCKS:
                stack.extend(getattr(current, block, ()))
        if _REGISTER_WORDS.search(text):
            for call in ast.walk(node):
                if isinstance(call, ast.Call):
                    self._registered(call)

    @property
    def bound(self) -> Set[str]:
        """Every name through which another statement reaches this one."""
        return self.defs | self.imports | self.stores

    def _targets(self, targets: List[ast.expr]) -> None:
        stack = list(targets)
        while stack:
            target = stack.pop()
            if isinstance(target, ast.Attribute):
                self.stores.add(target.attr)
            elif isinstance(target, (ast.Tuple, ast.List)):
                stack.extend(target.elts)
            elif isinstance(target, ast.Starred):
                stack.append(target.value)

    def _registered(self, call: ast.Call) -> None:
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        at = _REGISTERS.get(name or "")
        if at is None or len(call.args) <= at:
            return
        arg = call.args[at]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):  # the rules read no computed name
            self.stores.add(arg.value)


class Expressions:
    """What a module-level statement's expressions hold, walked whole (the pre-filter asks it of
    the few statements it may mask there): the names written (`used`), the string literals that
    may be implicit concatenations too long for LibCST (`long_strings`: over several lines or
    `LONG` characters; `candidates.py` counts their pieces), and the node types."""

    __slots__ = ("used", "long_strings", "kinds")

    def __init__(self, node: ast.stmt) -> None:
        self.used: Set[str] = set()
        self.long_strings: List[ast.expr] = []
        self.kinds: Set[str] = set()
        for current in ast.walk(node):
            self.kinds.add(type(current).__name__)
            if isinstance(current, ast.Name):
                self.used.add(current.id)
            elif isinstance(current, ast.Attribute):
                self.used.add(current.attr)
            elif isinstance(current, ast.JoinedStr) or (isinstance(current, ast.Constant) and isinstance(current.value, (str, bytes))):
                if current.end_lineno != current.lineno or (current.end_col_offset or 0) - current.col_offset >= LONG:
                    self.long_strings.append(current)


def _hands_on(value: ast.expr) -> bool:
    """`f` or `partial(f, ...)`: what `callers._handed` reads as a function handed on."""
    if isinstance(value, ast.Name):
        return True
    if isinstance(value, ast.Call):
        func = value.func
        return (isinstance(func, ast.Name) and func.id == "partial") or (isinstance(func, ast.Attribute) and func.attr == "partial")
    return False
