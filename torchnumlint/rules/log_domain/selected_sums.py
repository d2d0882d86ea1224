"""A sum of selected entries of probabilities, `p[:, pos_idx].sum(-1)`, `p.gather(1, idx).sum(1)`,
`(p * pos_mask).sum(-1)`: the likelihood of a set of correct classes (multi-positive
contrastive losses, marginal likelihoods). Its log is -inf once every selected probability
underflows to 0, or when nothing is selected (an all-false mask, an empty index), where the
log of the whole sum (1) never is.

`selected_sum` finds the form and what selects; `SelectedSum.log_space` rebuilds it from the
log-probabilities as `logsumexp` over the same selection, which is exact for any selection and
any dim (the log commutes with picking entries, and `logsumexp(log q, d) == log(q.sum(d))`; an
empty selection gives -inf in both). A mask is only named: `p * m` with a soft or float `m` is
no selection that `masked_fill(~m, -inf)` could write.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, List, Optional

import libcst as cst

from torchnumlint.rules.calls import CallMatch, match_call
from torchnumlint.rules.made_by import softmax_call
from torchnumlint.rules.masks import is_mask
from torchnumlint.rules.rewrite import with_input
from torchnumlint.rules.syntax import number_value, strip_parens

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext


@dataclass
class SelectedSum:
    """`total` sums the entries of `probs` that `selection` (source text, for the message) picks;
    `reselect` applies the same pick to another tensor (None for a mask: no exact rewrite)."""

    total: CallMatch
    probs: cst.BaseExpression
    selection: str
    reselect: Optional[Callable[[cst.BaseExpression], cst.BaseExpression]]

    @property
    def rewritable(self) -> bool:
        """An index picks (not a mask) and the sum has a dim and nothing but `keepdim` besides."""
        total = self.total
        return self.reselect is not None and total.given("dim") and total.fully_known and not set(total.args) - {"dim", "keepdim"}

    def log_space(self, log_probs: cst.BaseExpression) -> cst.BaseExpression:
        """`log_probs[sel].logsumexp(dim)`, with the sum's `keepdim` (only where `rewritable`)."""
        assert self.reselect is not None
        args = [cst.Arg(self.total.arg("dim"))]  # type: ignore[arg-type]  # `rewritable`: a dim is given
        keepdim = self.total.arg("keepdim")
        if keepdim is not None:
            args.append(
                cst.Arg(keepdim, keyword=cst.Name("keepdim"), equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
            )
        return cst.Call(func=cst.Attribute(value=self.reselect(log_probs), attr=cst.Name("logsumexp")), args=args)


def selected_sum(ctx: "FileContext", expr: cst.BaseExpression, holds_probs: Callable[[cst.BaseExpression], bool]) -> Optional[SelectedSum]:
    """`expr` as a sum of the entries of a tensor for which `holds_probs` is true, picked by an
    index along the summed dim (`p[:, idx].sum(-1)`, `p.gather(1, idx).sum(1)`) or multiplied by a boolean mask (`p * mask`, either
    order, as `masks.is_mask` sees it); else None."""
    total = match_call(ctx.imports, strip_parens(expr), "sum")
    dim = total.arg("dim") if total is not None else None
    if total is None or dim is None:
        return None  # a sum of everything: no set of classes per row
    picked = strip_parens(total.input)
    code = ctx.module.code_for_node
    if isinstance(picked, cst.Subscript) and _picks_along(picked, dim) and holds_probs(picked.value):
        subscript = picked
        return SelectedSum(total, subscript.value, f"`{code(subscript)}`", lambda new: subscript.with_changes(value=new))
    gather = match_call(ctx.imports, picked, "gather")
    along = gather is not None and number_value(gather.arg("dim")) == number_value(dim) and number_value(dim) is not None
    if gather is not None and along and gather.fully_known and holds_probs(gather.input):
        return SelectedSum(total, gather.input, f"`{code(gather.call)}`", lambda new: with_input(gather, new))
    if isinstance(picked, cst.BinaryOperation) and isinstance(picked.operator, cst.Multiply):
        sides: List[cst.BaseExpression] = [picked.left, picked.right]
        for probs, mask in (sides, sides[::-1]):
            if holds_probs(probs) and not holds_probs(mask) and is_mask(ctx, mask):
                return SelectedSum(total, probs, f"the entries the mask `{code(strip_parens(mask))}` keeps", None)
    return None


def softmax_sum(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[SelectedSum]:
    """`selected_sum` of a softmax's entries (`made_by.softmax_call`): TNL103's site, which TNL207
    leaves to it."""
    return selected_sum(ctx, expr, lambda e: softmax_call(ctx, e) is not None)


def _picks_along(subscript: cst.Subscript, dim: cst.BaseExpression) -> bool:
    """Whether `subscript` picks entries by an index or mask along the summed `dim` (`p[:, idx]`,
    `p[..., idx]` for -1, the element at position k for k >= 0), not rows (`p[valid].sum(-1)` and
    `p[i].sum(-1)` sum whole rows, which is 1)."""
    elements = [e.slice for e in subscript.slice]
    where = number_value(dim)
    if where == -1 and len(elements) >= 2:
        element = elements[-1]
    elif (
        where is not None
        and where >= 0
        and where == int(where)
        and int(where) < len(elements)
        and not any(isinstance(e, cst.Index) and isinstance(e.value, cst.Ellipsis) for e in elements[: int(where)])
    ):
        element = elements[int(where)]
    else:
        return False
    if not isinstance(element, cst.Index):
        return False  # a slice (`p[:, :k]` is picked here only through an index)
    value = strip_parens(element.value)
    return not isinstance(value, (cst.Integer, cst.Ellipsis)) and not (isinstance(value, cst.Name) and value.value == "None")
