"""Whether the code guards a value: an eps or a clamp (`is_guarded`, `is_eps_like`), or a test of
it in the function's control flow (`is_tested`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Set

import libcst as cst

from torchnumlint.rules.calls import match_call
from torchnumlint.rules.syntax import code_key, last_identifier, number_value, strip_parens
from torchnumlint.rules.ways import every_way
from torchnumlint.walk import Visitor

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext


_EPS_WORDS = ("eps", "epsilon", "tiny", "smooth")


def is_eps_like(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """A small positive guard: `eps`, `self.eps`, `1e-8`, `torch.finfo(x.dtype).tiny`, `tensor(eps)`,
    whatever way the value comes (`eps = 1e-4 if half else 1e-8`)."""
    return every_way(ctx, expr, "eps", lambda value: _eps_like(ctx, value))


def _eps_like(ctx: "FileContext", expr: cst.CSTNode) -> bool:
    value = number_value(expr) if isinstance(expr, cst.BaseExpression) else None
    if value is not None:
        return value > 0
    ident = last_identifier(expr)
    if ident is not None and any(word in ident.lower() for word in _EPS_WORDS):
        return True
    if isinstance(expr, cst.Call):
        if expr.args and ctx.qualname(expr.func) in ("torch.tensor", "torch.as_tensor", "torch.full_like"):
            return any(is_eps_like(ctx, a.value) for a in expr.args)
        ident = last_identifier(expr.func)
        return ident is not None and "eps" in ident.lower()
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return is_eps_like(ctx, expr.left) or is_eps_like(ctx, expr.right)
    return False


def is_guarded(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """Kept away from 0 (or from its domain's edge): `+ eps`, `clamp(min=)`, `clamp_min`,
    `torch.maximum(d, eps)`, `max(d, eps)`, `torch.where(...)`, `masked_fill`, `torch.finfo`.

    Any floor counts, `clamp(min=0)` included: enough for a log or a division by a count, though
    `sqrt` of it still has an infinite gradient at 0 (no rule asks that of a clamped value yet).
    A name is guarded only when every assignment that reaches it is (a guard on one branch of an
    `if` leaves the other's zero); an in-place `d.clamp_(min=eps)` is such an assignment."""
    return every_way(ctx, expr, "guarded", lambda value: _guarded(ctx, value))


def _guarded(ctx: "FileContext", expr: cst.CSTNode) -> bool:
    if not isinstance(expr, cst.BaseExpression):
        return False  # a parameter, a loop target, an unpacking: nothing says it is guarded
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return is_eps_like(ctx, expr.left) or is_eps_like(ctx, expr.right)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Multiply, cst.Divide)):
        # guarded * anything-nonzero is still guarded only when both sides are; stay simple
        return is_guarded(ctx, expr.left) and is_guarded(ctx, expr.right)
    clamp = match_call(ctx.imports, expr, "clamp", "clip", "clamp_", "clamp_min", "clamp_min_")
    if clamp is not None:
        return clamp.given("min")
    if match_call(ctx.imports, expr, "maximum") is not None:
        return True
    if isinstance(expr, cst.Call):
        qual = ctx.qualname(expr.func)
        if qual in ("torch.where", "torch.nan_to_num") or last_identifier(expr.func) in ("masked_fill", "nan_to_num"):
            return True
        if isinstance(expr.func, cst.Name) and expr.func.value == "max" and qual is None:
            return any(is_eps_like(ctx, a.value) for a in expr.args)
        if qual == "torch.max" and len(expr.args) == 2:
            return is_eps_like(ctx, expr.args[1].value) or is_eps_like(ctx, expr.args[0].value)
    return _mentions_finfo(expr)


def _mentions_finfo(expr: cst.CSTNode) -> bool:
    found: List[cst.BaseExpression] = []

    class _Find(Visitor):
        def visit_Attribute(self, node: cst.Attribute) -> bool:
            if node.attr.value == "finfo":
                found.append(node)
            return not found

        def visit_Name(self, node: cst.Name) -> bool:
            if node.value == "finfo":
                found.append(node)
            return False

    _Find().walk(expr)
    return bool(found)


def is_tested(ctx: "FileContext", *exprs: cst.BaseExpression) -> bool:
    """Whether the enclosing function tests one of `exprs` in its control flow (`if n > 0:`,
    `x / n if n else 0`, `assert v.min() >= 0`): the author has handled the edge case. A
    comparison that only selects or overwrites the result afterwards (`torch.where(n > 0, x / n,
    0)`, `out[n == 0] = 0`) keeps the forward finite, not the gradient: it does not count."""
    texts = ctx.per_scope("tested", lambda scope: _tested_texts(ctx, scope))
    return any(code_key(ctx, e) in texts for e in exprs)


def _tested_texts(ctx: "FileContext", scope: cst.CSTNode) -> Set[str]:
    texts: Set[str] = set()

    def add(expr: cst.BaseExpression) -> None:
        expr = strip_parens(expr)
        while isinstance(expr, cst.Call):  # `n.item() > 0`, `int(n)`, `v.min() >= 0`
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("item", "all", "any", "min", "max") and not expr.args:
                expr = strip_parens(func.value)
            elif isinstance(func, cst.Name) and func.value in ("int", "float", "bool") and len(expr.args) == 1:
                expr = strip_parens(expr.args[0].value)
            else:
                break
        if isinstance(expr, cst.UnaryOperation):
            expr = strip_parens(expr.expression)
        texts.add(code_key(ctx, expr))

    class _Comparisons(Visitor):
        def visit_Comparison(self, node: cst.Comparison) -> None:
            add(node.left)
            for target in node.comparisons:
                add(target.comparator)

    class _Tests(Visitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, (cst.If, cst.IfExp, cst.While, cst.Assert)):
                test = node.test
                if not isinstance(strip_parens(test), cst.Comparison):
                    add(test)
                _Comparisons().walk(test)
            return super().on_visit(node)

    _Tests().walk(scope)
    return texts
