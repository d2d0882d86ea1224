"""Box geometry by construction: the widths, heights, areas and unions of axis-aligned boxes.

Detection code divides by values that reach 0 for degenerate boxes: IoU's union
(`area_a + area_b - inter`, 0/0 = NaN when both boxes have zero area, measured: the IoU and its
gradient are NaN for two equal point boxes), GIoU's enclosing area, an area itself, and the
aspect ratio `w / h` of CIoU (NaN for a zero-height box). Predicted boxes are degenerate early in
training and ground-truth boxes are after cropping, so these are real inputs.

They are recognised by how they are built, never by names alone: a side is a difference of box
coordinates on the last axis of a batch (`b[..., 2] - b[..., 0]`, `b[:, 3] - b[:, 1]`; never a
bare `v[2] - v[0]`), `rb - lt` of corners, `x2 - x1` of unbound coordinates),
an area a product of an x side and a y side (or `wh[..., 0] * wh[..., 1]`, `wh.prod(-1)`,
`torchvision.ops.box_area`), a union a sum of areas minus an area. Coordinates are read in the
xyxy layout: indices 0 and 2 are x, 1 and 3 are y, a corner is `[..., :2]` or `[..., 2:]`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Tuple

import libcst as cst

from torchnumlint.rules.syntax import number_value, strip_parens
from torchnumlint.rules.calls import match_call
from torchnumlint.rules.shapes import shape_step

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext

Coords = Tuple[int, ...]
_UNPACKING = ("unbind", "chunk", "split")
_CORNER_FUNCS = ("torch.max", "torch.min", "torch.maximum", "torch.minimum", "torch.fmax", "torch.fmin")
_CORNER_METHODS = ("max", "min", "maximum", "minimum")
_AREA_FUNCS = ("torchvision.ops.box_area", "torchvision.ops.boxes.box_area")


def _index(part: cst.BaseSlice) -> Optional[Coords]:
    """The box coordinates one subscript element selects: `2` -> (2,), `2:` / `2:4` -> (2, 3)."""
    if isinstance(part, cst.Index):
        value = number_value(part.value)
        return (int(value),) if value is not None and value in (0, 1, 2, 3) else None
    if isinstance(part, cst.Slice) and part.step is None:
        lower = number_value(part.lower) if part.lower is not None else 0
        upper = number_value(part.upper) if part.upper is not None else (4 if lower == 2 else None)
        if lower is not None and (lower, upper) in ((0, 2), (2, 4)):
            return (int(lower), int(lower) + 1)
    return None


def _last_axis(expr: cst.Subscript) -> bool:
    """`b[:, 2]`, `b[..., 2:]`: an index into the last axis of a batch of boxes. A bare `v[2]` is
    an element of anything (a list of step sizes, `lambda_list[2] - lambda_list[0]` in a
    solver's coefficients), too common to be read as a coordinate."""
    return len(expr.slice) > 1 and all(_whole(e.slice) for e in expr.slice[:-1])


def _whole(part: cst.BaseSlice) -> bool:
    """`:`, `...` or a new axis (`None`): every box of the batch."""
    if isinstance(part, cst.Index):
        return isinstance(part.value, cst.Ellipsis) or (isinstance(part.value, cst.Name) and part.value.value == "None")
    return isinstance(part, cst.Slice) and part.lower is None and part.upper is None and part.step is None


def _unwrap(ctx: "FileContext", expr: cst.BaseExpression) -> cst.BaseExpression:
    """Through a clamp at 0 (`.clamp(min=0)`, `relu`): the side of a box that cannot be inverted,
    still 0 for a degenerate one."""
    expr = strip_parens(expr)
    clamp = match_call(ctx.imports, expr, "clamp", "clip", "clamp_min")
    if clamp is not None and clamp.given("min") and number_value(clamp.arg("min")) == 0 and not clamp.given("max"):
        return strip_parens(clamp.input)
    return expr


def clamped_at_zero(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """`d.clamp(min=0)`: never negative (a clamp keeps it), and still 0."""
    value = strip_parens(_value(ctx, expr))
    return _unwrap(ctx, value) is not value


def _value(ctx: "FileContext", expr: cst.BaseExpression) -> cst.BaseExpression:
    """What a name holds: its assignment, or its element of a tuple assigned in one statement
    (`w, h = b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]`)."""
    for _ in range(6):
        expr = ctx.resolve(expr)
        binding = ctx.binding(expr) if isinstance(expr, cst.Name) else None
        unpacked = getattr(binding, "unpacked", None) if binding is not None else None
        packed = strip_parens(unpacked[0]) if unpacked is not None else None
        if unpacked is None or not isinstance(packed, cst.Tuple):
            return expr
        elements = packed.elements
        if unpacked[1] >= len(elements) or isinstance(elements[unpacked[1]], cst.StarredElement):
            return expr
        expr = elements[unpacked[1]].value
    return expr


def coords(ctx: "FileContext", expr: cst.BaseExpression, depth: int = 0) -> Optional[Coords]:
    """The xyxy coordinates `expr` holds: `b[:, 0]` -> (0,), `b[..., 2:]` -> (2, 3), the
    elementwise max/min of two such (an intersection's corner), a name assigned one, or a name
    unpacked from `b.unbind(-1)` / `b.chunk(4, -1)` at its position."""
    if depth > 6:
        return None
    expr = strip_parens(expr)
    if isinstance(expr, cst.Name):
        value = _value(ctx, expr)
        if value is not expr:
            return coords(ctx, value, depth + 1)
        binding = ctx.binding(expr)
        if binding is None:
            return None
        unpacked = getattr(binding, "unpacked", None)
        if unpacked is not None:
            source, position = unpacked
            source = strip_parens(source)
            if (
                isinstance(source, cst.Call)
                and isinstance(source.func, cst.Attribute)
                and source.func.attr.value in _UNPACKING
                and position in (0, 1, 2, 3)
            ):
                return (position,)
        return None
    if isinstance(expr, cst.Subscript):
        found = _index(expr.slice[-1].slice) if _last_axis(expr) else None
        if found is not None:
            return found
        inner = shape_step(ctx, expr)
        return coords(ctx, inner, depth + 1) if inner is not None else None
    if isinstance(expr, cst.Call):
        pair = None
        if ctx.qualname(expr.func) in _CORNER_FUNCS and len(expr.args) == 2:
            pair = (expr.args[0].value, expr.args[1].value)
        elif (
            isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in _CORNER_METHODS
            and len(expr.args) == 1
            and expr.args[0].keyword is None
            and not ctx.imports.is_module_ref(expr.func.value)
        ):
            pair = (expr.func.value, expr.args[0].value)
        if pair is not None:
            first, second = (coords(ctx, side, depth + 1) for side in pair)
            return first if first is not None and first == second else None
        inner = shape_step(ctx, expr)
        return coords(ctx, inner, depth + 1) if inner is not None else None
    return None


def side(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[Coords]:
    """A box side by construction: a far coordinate minus the near one (`b[..., 2] - b[..., 0]`,
    `x2 - x1`, `rb - lt`), possibly clamped at 0. (0,) is a width, (1,) a height, (0, 1) both."""
    expr = _unwrap(ctx, _value(ctx, expr))
    if not (isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Subtract)):
        return None
    far, near = coords(ctx, expr.left), coords(ctx, expr.right)
    if far is None or near is None or tuple(c - 2 for c in far) != near:
        return None
    return near


def area(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[bool]:
    """A box area by construction (a width times a height, `wh[..., 0] * wh[..., 1]`,
    `wh.prod(-1)`, `torchvision.ops.box_area`): whether it is known not to be negative (both
    sides clamped at 0), or None for no area."""
    expr = strip_parens(_value(ctx, expr))
    while shape_step(ctx, expr) is not None and not isinstance(expr, cst.Subscript):
        expr = strip_parens(ctx.resolve(shape_step(ctx, expr)))  # type: ignore[arg-type]  # not None: the loop test just asked
    if isinstance(expr, cst.Call) and ctx.qualname(expr.func) in _AREA_FUNCS:
        return False
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "prod":
        pair = expr.func.value
        return clamped_at_zero(ctx, pair) if side(ctx, pair) == (0, 1) else None
    if not (isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply)):
        return None
    sides = [_side_of_pair(ctx, f) or side(ctx, f) for f in (expr.left, expr.right)]
    if sorted(s for s in sides if s is not None) != [(0,), (1,)]:
        return None
    return all(clamped_at_zero(ctx, _pair_of(ctx, f)) for f in (expr.left, expr.right))


def _pair_of(ctx: "FileContext", expr: cst.BaseExpression) -> cst.BaseExpression:
    """`wh` for `wh[..., 0]`, else `expr`."""
    value = strip_parens(_value(ctx, expr))
    return value.value if isinstance(value, cst.Subscript) and _side_of_pair(ctx, expr) else expr


def _side_of_pair(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[Coords]:
    """`wh[..., 0]` (a width) or `wh[..., 1]` (a height) of `wh = rb - lt`."""
    value = strip_parens(_value(ctx, expr))
    if not isinstance(value, cst.Subscript) or side(ctx, value.value) != (0, 1):
        return None
    found = _index(value.slice[-1].slice)
    return found if found in ((0,), (1,)) else None


def union(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[bool]:
    """IoU's union by construction, `area_a + area_b - inter` (areas under shape-only steps such
    as `area_a[:, None]`): whether it is known not to be negative, or None for no union."""
    expr = strip_parens(_value(ctx, expr))
    if not (isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Subtract)):
        return None
    total = strip_parens(_value(ctx, expr.left))
    if not (isinstance(total, cst.BinaryOperation) and isinstance(total.operator, cst.Add)):
        return None
    parts = [area(ctx, _through_shape(ctx, p)) for p in (total.left, total.right, expr.right)]
    if any(p is None for p in parts):
        return None
    return all(parts)


def _through_shape(ctx: "FileContext", expr: cst.BaseExpression) -> cst.BaseExpression:
    for _ in range(4):
        inner = shape_step(ctx, strip_parens(expr))
        if inner is None:
            break
        expr = inner
    return expr


def box_divisor(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[Tuple[str, str, bool]]:
    """(what the divisor is, why it is 0, whether it is known not to be negative) for a union,
    an area or a side of boxes by construction; None for anything else."""
    found = union(ctx, expr)
    if found is not None:
        return "the union of two box areas", "for two degenerate (zero-area) boxes", found
    found = area(ctx, expr)
    if found is not None:
        return "a box area", "for a degenerate (zero-area) box", found
    sides = side(ctx, expr)
    if sides in ((0,), (1,)):
        word = "width" if sides == (0,) else "height"
        return f"a box {word}", f"for a degenerate (zero-{word}) box", clamped_at_zero(ctx, expr)
    return None
