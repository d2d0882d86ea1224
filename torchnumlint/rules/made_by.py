"""The softmax or sigmoid behind a value: inline, through every origin, or produced by a helper,
a method or a module (`producers.call_kind`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchnumlint.rules.calls import CallMatch, OPS, match_call
from torchnumlint.rules.producers import call_kind
from torchnumlint.rules.value_steps import finite_kept

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext


def softmax_call(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[CallMatch]:
    """The softmax call (any alias, or the method form) that `expr` holds values of, through
    names, indexing, selections and reshapes (`FileContext.origins`) and a `nan_to_num`, which
    keeps the 0s and 1s a probability's hazards come from; where several assignments
    may reach, all must be softmaxes (the first is returned: a fix must not use it unless
    `ctx.binding` gives the one assignment)."""
    return _made_by(ctx, expr, "softmax")


def sigmoid_call(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[CallMatch]:
    """As `softmax_call`, for a sigmoid: `torch.sigmoid`, `F.sigmoid`, `torch.special.expit`,
    any alias of them, or the method form `x.sigmoid()`."""
    return _made_by(ctx, expr, "sigmoid")


def _made_by(ctx: "FileContext", expr: cst.BaseExpression, op: str, depth: int = 4) -> Optional[CallMatch]:
    """The first call of `op` that `expr` comes from, when every origin is one: written out, or
    (the last resort, `producers.call_kind`) a helper, method or module instance that returns
    one. A produced one is matched as the call with its first argument as input (form
    "producer", no other arguments: nothing to rebuild it from). `depth`: the `nan_to_num`s
    followed, one inside another's input at most that many."""
    matches = []
    for origin in ctx.origins(expr):
        kept = finite_kept(ctx.imports, origin) if depth else None
        match = _made_by(ctx, kept, op, depth - 1) if kept is not None else match_call(ctx.imports, origin, op)
        if match is None and isinstance(origin, (cst.Call, cst.Name)):  # a name: an element of a tuple returned
            produced = call_kind(ctx, origin)
            if produced is not None and produced.kind == op:
                call = produced.call
                first = call.args[0].value if call.args and not call.args[0].star else call
                match = CallMatch(OPS[op], call, first, "producer")
        if match is None:
            return None
        matches.append(match)
    return matches[0] if matches else None
