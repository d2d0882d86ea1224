"""The code as written, no name followed: parentheses (`strip_parens`), number literals
(`number_value`), casts around a value (`unwrap_casts`), code compared as text (`same_code`), the
words of an identifier.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional, Set

import libcst as cst

from torchnumlint.rules.value_steps import selection_of

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext


_CASTS = {"float", "double", "half", "bfloat16", "long", "int", "bool", "to", "type_as", "type"}


def strip_parens(expr: cst.BaseExpression) -> cst.BaseExpression:
    """LibCST keeps parentheses on the node itself; this is the same node without them (an empty
    tuple keeps its own: `()` is nothing without them)."""
    if getattr(expr, "lpar", None) and not (isinstance(expr, cst.Tuple) and not expr.elements):
        return expr.with_changes(lpar=[], rpar=[])
    return expr  # `()` cannot lose its parentheses: LibCST refuses a bare empty tuple


def number_value(expr: Optional[cst.BaseExpression]) -> Optional[float]:
    """The value of a numeric literal (with an optional unary minus), else None."""
    sign = 1.0
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        sign = -1.0 if isinstance(expr.operator, cst.Minus) else 1.0
        expr = expr.expression
    if isinstance(expr, (cst.Integer, cst.Float)):
        try:
            return sign * float(expr.evaluated_value)
        except (ValueError, OverflowError):  # pragma: no cover - literal forms always evaluate
            return None
    return None


def last_identifier(expr: cst.CSTNode) -> Optional[str]:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    if isinstance(expr, cst.Param):  # a parameter, where a name's way ends
        return expr.name.value
    return None


def unwrap_casts(ctx: "FileContext", expr: cst.BaseExpression, detach: bool = False, names: bool = True) -> cst.BaseExpression:
    """Through names (their one sure assignment; `names=False`: not at all), `.float()`,
    `.to(...)`, `.type_as(...)` (and `.detach()` when asked), indexing, selections and reshapes
    (`value_steps.selection_of`): these keep zeros and signs, so the question is about the value
    under them. `expr` itself (the same node) where there is nothing to look through."""
    methods = _CASTS | {"detach"} if detach else _CASTS
    start = expr
    for _ in range(8):
        if names:
            expr = ctx.resolve(expr)
        bare = strip_parens(expr)
        inner = selection_of(ctx.imports, bare)
        if inner is not bare:  # `n.unsqueeze(-1)`, `n[:, None]`: the same values
            expr = inner
            continue
        if (
            isinstance(bare, cst.Call)
            and isinstance(bare.func, cst.Attribute)
            and bare.func.attr.value in methods
            and not ctx.imports.is_module_ref(bare.func.value)
        ):
            expr = bare.func.value
            continue
        break
    return expr if expr is start and not names else strip_parens(expr)


def words(ident: Optional[str]) -> Set[str]:
    """The lower-case words of an identifier (`keyPaddingMask`, `key_padding_mask`)."""
    if not ident:
        return set()
    return set(re.findall(r"[a-z]+", re.sub(r"(?<=[a-z])(?=[A-Z])", "_", ident).lower()))


def code_key(ctx: "FileContext", expr: cst.BaseExpression) -> str:
    """`expr`'s code without parentheses and white space: equal keys, the same code."""
    return "".join(ctx.module.code_for_node(strip_parens(expr)).split())


def same_code(ctx: "FileContext", a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    """Whether two expressions are written the same (parentheses and white space aside)."""
    return code_key(ctx, a) == code_key(ctx, b)
