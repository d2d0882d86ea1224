"""Every value a name may hold: `ways` (each assignment that reaches it, `FileContext.reaching`,
and both values of a conditional expression), and `every_way`, which asks a question of each and
says yes only when every way does; a guard on one branch does not guard the other. Answers are
kept per name for the scope, so a name read many times, or rebound in a loop, is followed once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Set, Tuple, TypeVar

import libcst as cst

from torchnumlint.rules.bindings import Binding
from torchnumlint.rules.syntax import strip_parens

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext


T = TypeVar("T")


@dataclass(frozen=True)
class Way:
    """One value an expression may hold: `value` is the assigned expression (or, for a binding
    with no plain value, its node: a parameter, an in-place call `d.clamp_(min=eps)`, a loop or
    an unpacking statement); `binding` the assignment (None for a branch of a conditional
    expression); `where` the node a message points at, `label` how it names this way."""

    value: cst.CSTNode
    binding: Optional[Binding]
    where: cst.CSTNode
    label: str


def ways(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[List[Way]]:
    """The values `expr` holds one step back: for a name (or `self.attr`, a module name bound
    once) every assignment that may reach it here; for a conditional expression both its values.
    None for anything else, or a name nothing here binds."""
    expr = strip_parens(expr)
    if isinstance(expr, cst.IfExp):
        return [Way(expr.body, None, expr, "if"), Way(expr.orelse, None, expr, "else")]
    if not isinstance(expr, (cst.Name, cst.Attribute)):
        return None
    binding = ctx.binding(expr)
    found = [binding] if binding is not None else ctx.reaching(expr)
    if not found:
        return None
    label = expr.value if isinstance(expr, cst.Name) else ctx.module.code_for_node(expr)
    return [Way(b.value if b.value is not None else b.node, b, b.node, label) for b in found]


def branches(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[List[Way]]:
    """`ways` where there is more than one (an `if` that assigns on both branches, a loop that
    rebinds, a conditional expression); None where the value is one or unknown."""
    found = ways(ctx, expr)
    return found if found is not None and len(found) > 1 else None


def way_note(ctx: "FileContext", way: Way) -> str:
    """How a message names one of several ways, as a clause that fits inside its parentheses
    too: `, as `d` is assigned on line 7`, `, the else value of the conditional on line 7`."""
    span = ctx.positions.get(way.where)
    line = f" on line {span.start.line}" if span is not None else ""
    if way.binding is None:
        return f", the {way.label} value of the conditional{line}"
    return f", as `{way.label}` is assigned{line}"


def unless_asking(ctx: "FileContext", key: str, node: cst.CSTNode, ask: Callable[[], T], default: T) -> T:
    """`ask()`, the question `key` about `node`, unless it is being asked already further up (a
    loop's `d = d * w` leads back to `d`): then `default`, the answer that adds nothing."""
    asking: Set[Tuple[str, int]] = ctx.per_scope("asking", lambda _: set())
    slot = (key, id(node))
    if slot in asking:
        return default
    asking.add(slot)
    try:
        return ask()
    finally:
        asking.discard(slot)


_IN_PROGRESS = object()


_DEPTH = 8


def every_way(
    ctx: "FileContext",
    expr: cst.BaseExpression,
    key: str,
    test: Callable[[cst.CSTNode], bool],
    decided: Optional[Callable[[Binding], bool]] = None,
    depth: int = _DEPTH,
) -> bool:
    """Whether `test` holds of every value `expr` may hold (`ways`, followed `depth` steps; a
    value with no ways is tested itself). `decided(binding)` True settles a way without looking
    at its value (assigned under `no_grad`: detached). Answers are kept per scope and `key`; a
    way that leads back to a name being asked (a loop's `n = n + 1`) adds no value of its own."""
    found = ways(ctx, expr)
    if found is None:
        return test(expr)
    if not depth:
        return False  # too far to say anything of every way
    known: Dict[Tuple[str, int], tuple] = ctx.per_scope("every way", lambda _: {})
    asking: List[list] = ctx.per_scope("every way asking", lambda _: [])  # [slot, tentative]
    slot = (key, id(expr))
    entry = known.get(slot)
    if entry is not None:
        if entry[1] is _IN_PROGRESS:  # a loop back: what is asked between relies on this answer
            at = next(i for i, frame in enumerate(asking) if frame[0] == slot)
            for frame in asking[at + 1 :]:
                frame[1] = True
            return True
        return entry[1]
    known[slot] = (expr, _IN_PROGRESS)  # the node is kept with its answer: its id stays its own
    frame = [slot, False]
    asking.append(frame)
    try:
        answer = all(
            (decided is not None and way.binding is not None and decided(way.binding))
            or (every_way(ctx, way.value, key, test, decided, depth - 1) if isinstance(way.value, cst.BaseExpression) else test(way.value))
            for way in found
        )
    finally:
        asking.pop()
    if frame[1] and answer:
        del known[slot]  # true only on the assumption of an answer still being worked out
    else:
        known[slot] = (expr, answer)
    return answer
