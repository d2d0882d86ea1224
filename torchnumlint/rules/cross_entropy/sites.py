"""What the cross-entropy rules share: the fix of a loss call's input.

- The loss calls themselves are `losses.loss_site`, shared with other families.
- `source_of(ctx, expr, op)`: the plain call of `op` (`torch.sigmoid(z)`, `x.softmax(1)`) that
  `expr` is, inline or through local names, with the names followed: what a fix may rebuild.
  A call found only through an attribute, a helper or a module activation is reported, never
  rewritten (its assignment lives where another method can change it).
- `rewritten_input(fix, expr, source, build)`: the fix of the loss input `expr` whose value is
  `source`: the rebuilt value in place, or at the one assignment read only here, or recomputed at
  the use when what it is computed from is unchanged since (then an assignment left unread is
  removed); None where none of these is right.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Tuple

import libcst as cst

from torchnumlint.rules.syntax import strip_parens
from torchnumlint.rules.bindings import Binding
from torchnumlint.rules.calls import CallMatch, match_call
from torchnumlint.rules.rewrite import Build, at_source, drop_if_unread

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext, FixBuilder

# Local names followed to a source for a fix (`p = torch.sigmoid(z)`, `q = p`).
MAX_CHAIN = 4


def source_of(ctx: "FileContext", expr: cst.BaseExpression, op: str) -> Optional[Tuple[CallMatch, List[Binding]]]:
    """The plain, fully known call of `op` that `expr` is (inline or through local names), with
    the names followed to it, nearest first; None where the call is not in reach."""
    chain = ctx.chain(expr, MAX_CHAIN, names_only=True)
    value = strip_parens(chain[-1].value if chain else expr)  # type: ignore[arg-type]  # a chain's bindings all have values (`FileContext.chain`)
    match = match_call(ctx.imports, value, op)
    if match is None or not match.fully_known:
        return None
    return match, chain


def rewritten_input(
    fix: "FixBuilder",
    expr: cst.BaseExpression,
    chain: List[Binding],
    build: Build,
    parts: List[cst.BaseExpression],
    recompute_first: bool,
) -> Tuple[Optional[cst.BaseExpression], Optional[str]]:
    """What replaces the loss input `expr` (whose source `build` rebuilds; `chain` the names from
    `expr` to it) and the name whose assignment is rewritten, if one is. `recompute_first`:
    where the source can be recomputed at the use, do that (and drop an assignment nothing reads
    any more) rather than make the name hold something else (logits in `probs`)."""
    ctx = fix.ctx
    if chain and recompute_first and ctx.unchanged_since(parts, chain):
        new = build(fix)
        if new is None:
            return None, None
        first = chain[0]
        if len(chain) == 1 and first.rewritable and isinstance(first.node.targets[0].target, cst.Name):  # type: ignore[attr-defined]  # `rewritable`: a one-target Assign
            drop_if_unread(fix, first.node.targets[0].target, expr)  # type: ignore[attr-defined]  # `rewritable`: a one-target Assign
        return new, None
    return at_source(fix, expr, chain, build, parts)
