"""The steps that keep a tensor's values (a selection, a reshape, a float cast, the values of a
ranking, the parts of a split): `selection_of` follows them back to the tensor they read.
"""

from __future__ import annotations

from typing import FrozenSet, Optional, Sequence, Tuple

import libcst as cst

from torchnumlint.rules import vocabulary
from torchnumlint.rules.imports import ImportMap


_SELECT = ("gather", "index_select", "narrow", "masked_select", "take_along_dim")


_RESHAPE = tuple(sorted(vocabulary.SHAPE_ONLY | vocabulary.COPIES))


_STEP_METHODS = frozenset(_SELECT + _RESHAPE) | vocabulary.FLOAT_CASTS - {"type_as"}


_STEP_FUNCTIONS = frozenset(_SELECT + _RESHAPE)


_STEP_ATTRS = vocabulary.SHAPE_ATTRIBUTES


# `.to(torch.long)` rounds probabilities to 0: no longer the same values
_INTEGER_DTYPES = frozenset(f"torch.{t}" for t in ("long", "int", "int64", "int32", "int16", "int8", "uint8", "bool", "short"))


# Element 0 of their result holds values of the input, element 1 indices; max/min/median only
# with a dim (without one they return a tensor; `torch.max(a, b)` is elementwise).
_RANKINGS = frozenset({"topk", "sort", "kthvalue", "mode", "cummax", "cummin"})


_RANKINGS_WITH_DIM = frozenset({"max", "min", "median", "nanmedian"})


# Every element of their result is a part of the input.
_SPLITS = frozenset({"split", "chunk", "unbind", "tensor_split", "split_with_sizes", "hsplit", "vsplit", "dsplit"})


def _tensor_call(
    imports: ImportMap, expr: cst.BaseExpression, methods: FrozenSet[str], functions: Optional[FrozenSet[str]] = None
) -> Optional[Tuple[str, cst.BaseExpression, Sequence[cst.Arg]]]:
    """`p.name(args)` for one of `methods`, or `torch.name(p, args)` for one of `functions`
    (default: the same names): the name, `p` and the other arguments. `self.split(x)` is a
    method of the module, not a tensor's (`producers` reads what it returns)."""
    if not isinstance(expr, cst.Call):
        return None
    func = expr.func
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in ("self", "cls"):
        return None
    if isinstance(func, cst.Attribute) and func.attr.value in methods and not imports.is_module_ref(func.value):
        return func.attr.value, func.value, expr.args
    qual = imports.qualname(func)
    short = qual[len("torch.") :] if qual is not None and qual.startswith("torch.") else None
    if short in (methods if functions is None else functions) and expr.args:
        first = expr.args[0]
        if first.keyword is None and not first.star:
            return short, first.value, expr.args[1:]
    return None


def finite_kept(imports: ImportMap, expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`p` of `p.nan_to_num(...)` or `torch.nan_to_num(p, ...)` (`vocabulary.FINITE_KEEPING`), else
    None. Not a step of `selection_of`: a rule that asks whether a value can be NaN or Inf must
    not see through it; one that asks whether it is a sigmoid's or softmax's 0 or 1 may."""
    step = _tensor_call(imports, expr, vocabulary.FINITE_KEEPING)
    return step[1] if step is not None else None


def _gives_pair(name: str, args: Sequence[cst.Arg]) -> bool:
    """Whether the ranking `name` called with `args` (after its input) returns (values, indices)."""
    if name in _RANKINGS:
        return True
    if any(a.keyword is not None and a.keyword.value == "dim" for a in args):
        return True
    first = args[0].value if args and args[0].keyword is None and not args[0].star else None
    if isinstance(first, cst.UnaryOperation):
        first = first.expression
    return isinstance(first, cst.Integer)


def selection_of_element(imports: ImportMap, value: cst.BaseExpression, position: int) -> Optional[cst.BaseExpression]:
    """What element `position` of `value` is a selection of, where that is known: the input of
    a ranking for its values (`vals, idx = p.topk(5)`: `p`; `idx` holds indices: None), the
    input of a split for any part, the element of a tuple written out; else None."""
    if isinstance(value, (cst.Tuple, cst.List)):
        elements = value.elements
        if position < len(elements) and not any(isinstance(e, cst.StarredElement) for e in elements):
            return elements[position].value
        return None
    split = _tensor_call(imports, value, _SPLITS)
    if split is not None:
        return split[1]
    ranking = _tensor_call(imports, value, _RANKINGS | _RANKINGS_WITH_DIM)
    if ranking is not None and _gives_pair(ranking[0], ranking[2]) and position == 0:
        return ranking[1]
    return None


def _element_read(imports: ImportMap, expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`p.max(-1)[0]`, `p.topk(5).values`, `p.chunk(2)[1]`: what the element read is a
    selection of (None: indices, or not such a read)."""
    if isinstance(expr, cst.Attribute) and expr.attr.value in ("values", "indices"):
        return selection_of_element(imports, expr.value, 0 if expr.attr.value == "values" else 1)
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
        index = expr.slice[0].slice.value
        if isinstance(index, cst.Integer) and not isinstance(expr.value, (cst.Tuple, cst.List)):
            return selection_of_element(imports, expr.value, int(index.value))
    return None


def selection_of(imports: ImportMap, expr: cst.BaseExpression) -> cst.BaseExpression:
    """`expr` without the steps that keep its values or select some of them (indexing, `gather`,
    `index_select`, `narrow`, `masked_select`, reshapes, `.T`, `contiguous`, float casts and
    `.to(...)` to anything but an integer dtype, the values of a ranking or a part of a split):
    the tensor they start from. Names are not followed (`FileContext.origins` does both)."""
    for _ in range(16):
        element = _element_read(imports, expr)
        if element is not None:
            expr = element
        elif isinstance(expr, cst.Subscript):
            expr = expr.value  # `p.topk(5)[1]` stops at the ranking: not a selection of `p`
        elif isinstance(expr, cst.Attribute) and expr.attr.value in _STEP_ATTRS:
            expr = expr.value
        else:
            step = _tensor_call(imports, expr, _STEP_METHODS, _STEP_FUNCTIONS)
            if step is None or (step[0] == "to" and any(imports.qualname(a.value) in _INTEGER_DTYPES for a in step[2])):
                return expr
            expr = step[1]
    return expr
