"""Whether a value is a boolean mask (`is_mask`), by how it is made or by its name (`says_mask`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchnumlint.rules import vocabulary
from torchnumlint.rules.syntax import last_identifier, strip_parens, unwrap_casts, words
from torchnumlint.rules.ways import every_way, ways

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext


_BOOL_FUNCS = {
    "torch.logical_and",
    "torch.logical_or",
    "torch.logical_not",
    "torch.logical_xor",
    "torch.isfinite",
    "torch.isnan",
    "torch.isinf",
    "torch.eq",
    "torch.ne",
    "torch.gt",
    "torch.lt",
    "torch.ge",
    "torch.le",
    "torch.isin",
}


_BOOL_METHODS = {"eq", "ne", "gt", "lt", "ge", "le", "logical_and", "logical_or", "logical_not", "isfinite", "isnan", "isinf", "bool"}


_MASK_WORDS = frozenset({"mask", "masks", "valid", "keep"})


# Methods that change a mask's shape, not what it selects.
_RESHAPES = vocabulary.SHAPE_ONLY | vocabulary.REPEATS | vocabulary.DEVICE_MOVES | {"to", "type", "type_as"}


# words that make a mask-like name a number: `keep_prob`, `mask_ratio`
_NOT_MASK_WORDS = frozenset({"prob", "probs", "rate", "ratio", "p"})


def is_mask(ctx: "FileContext", expr: cst.BaseExpression, by_name: bool = True) -> bool:
    """A boolean mask: a comparison, `~m`, `logical_*`, `isfinite`, or (`by_name`) a name that
    says mask/valid/keep, through casts, reshapes and indexing (`mask.float().unsqueeze(-1)`,
    `masks[0]`). Its sum is a count, which is 0 when nothing is selected; only a mask built as a
    boolean is sure to sum to an integer (a mask by name can be soft). A name no word marks is a
    mask when every assignment that reaches it makes one."""
    if by_name and says_mask(last_identifier(strip_parens(expr))):
        return True
    return every_way(ctx, expr, f"mask {by_name}", lambda value: _mask(ctx, value, by_name))


def _mask(ctx: "FileContext", expr: cst.CSTNode, by_name: bool) -> bool:
    for _ in range(8):
        if by_name and says_mask(last_identifier(expr)):
            return True
        if not isinstance(expr, cst.BaseExpression):
            return False
        if ways(ctx, expr) is not None:  # `m.float()` of a name: every way it comes
            return is_mask(ctx, expr, by_name)
        expr = unwrap_casts(ctx, expr, names=False)
        if ways(ctx, expr) is not None:
            return is_mask(ctx, expr, by_name)
        if isinstance(expr, cst.Comparison):
            return True
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.BitInvert):
            return True
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.BitAnd, cst.BitOr)):
            return is_mask(ctx, expr.left, by_name) or is_mask(ctx, expr.right, by_name)
        if isinstance(expr, cst.Subscript):
            expr = expr.value
            continue
        if isinstance(expr, cst.Call):
            if ctx.qualname(expr.func) in _BOOL_FUNCS:
                return True
            func = expr.func
            if isinstance(func, cst.Attribute) and not ctx.imports.is_module_ref(func.value):
                if func.attr.value in _BOOL_METHODS:
                    return True
                if func.attr.value in _RESHAPES:
                    expr = func.value
                    continue
            return False
        return by_name and says_mask(last_identifier(expr))
    return False


def says_mask(ident: Optional[str]) -> bool:
    """`attn_mask`, `cmasks`, `padmask`, `valid`, `keep`; `invalid_x` is no `valid`, `keep_prob`
    no mask."""
    if ident is None:
        return False
    said_words = words(ident)
    said = any(word in _MASK_WORDS or word.endswith(("mask", "masks")) for word in said_words)
    return said and not said_words & _NOT_MASK_WORDS
