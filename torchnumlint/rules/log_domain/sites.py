"""What a log reads, and how its fix is placed: the part TNL103 and TNL104 share.

Both rules look at a `log` call (`torch.log(v)`, `v.log()`, `from torch import log`) and ask what
its input is. A `LogSite` records the answer: the value the log reads (`core`, past an optional
index or `gather` wrapper), the local names followed from it to the probability's source, how
to build the source's log-space form (`build`), and whether a fix may be built at all. Every
rule builds its fix through `LogRule.fix_for`, which places it with `rewrite.at_source`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence, Tuple

import libcst as cst

from torchnumlint.rules.base import Rule
from torchnumlint.rules.syntax import strip_parens
from torchnumlint.rules.bindings import Binding
from torchnumlint.rules.calls import CallMatch, match_call
from torchnumlint.rules.rewrite import Build, at_source, drop_if_unread, renamed_note

# Plain names followed (`q = p`, `p = F.softmax(x, -1)`) for a fix; never `self.attr`, whose
# assignment lives in another method and can be changed in place where we cannot see it.
MAX_CHAIN = 4


def chain(ctx, expr: cst.BaseExpression) -> List[Binding]:
    """The local assignments behind `expr`, nearest first."""
    return ctx.chain(expr, MAX_CHAIN, names_only=True)


def resolved(ctx, expr: cst.BaseExpression) -> cst.BaseExpression:
    """`expr` followed through local names to the value they hold."""
    return strip_parens(ctx.resolve(expr, MAX_CHAIN, names_only=True))


def recognised(ctx, expr: cst.BaseExpression, recognise, op: str) -> Tuple[Optional[CallMatch], bool]:
    """(`expr` as a call of `op` by the shared recogniser `recognise` (`made_by.softmax_call`,
    `made_by.sigmoid_call`), whether a fix may rebuild it: a plain call of `op` with every
    argument visible, reached from `expr` through local names only. A softmax found through an
    attribute, a helper or a module activation is reported, never rewritten here.)"""
    match = recognise(ctx, expr)
    if match is None:
        return None, False
    plain = match_call(ctx.imports, resolved(ctx, expr), op)
    return match, plain is not None and plain.call is match.call and plain.fully_known


def store_targets(bindings: Sequence[Binding]) -> List[cst.Name]:
    """The names bound by `bindings` (plain one-target assignments)."""
    return [b.node.targets[0].target for b in bindings if b.rewritable and isinstance(b.node.targets[0].target, cst.Name)]  # type: ignore[attr-defined]  # `rewritable`: a one-target Assign


@dataclass
class LogSite:
    """A log whose input (past an optional index/gather wrapper) is a hazardous probability."""

    log: cst.Call
    core: cst.BaseExpression  # what the log (or its wrapper) reads: the source, an expression or a name
    chain: List[Binding]  # the names followed from `core` to the source
    logits: cst.BaseExpression  # what the probability is computed from (for the gradient's words)
    build: Optional[Build]  # fix -> the log-space form of the source; None: no fix
    parts: Sequence[cst.BaseExpression] = ()  # what `build` reads: recomputed only when unchanged
    wrap: Optional[Callable[[cst.BaseExpression], cst.BaseExpression]] = None  # the fix's final form
    source: Optional[CallMatch] = None  # the softmax / sigmoid call, when the source is one
    unread: Sequence[cst.Name] = field(default_factory=tuple)  # names the fix may leave unread


class LogRule(Rule):
    """The common part: find `log(v)`, and fix it in place, at the one assignment, or not."""

    def log_input(self, node: cst.Call) -> Optional[cst.BaseExpression]:
        match = match_call(self.ctx.imports, node, "log")
        if match is None or not match.fully_known:
            return None
        # No `is_guarded` test: an input that is exactly a softmax / sigmoid (or a name whose one
        # assignment is) is unguarded by construction, and `+ eps`, `clamp_min`, `clamp(min=)`,
        # `torch.maximum`, `where` or a second assignment are never that shape. (`is_guarded`
        # would also call `softmax(s.masked_fill(m, finfo.min))` guarded, which is the hazard.)
        return match.input

    def fix_for(self, site: LogSite):
        """The fix and the message's note: a name it turns into log-probabilities is named, since
        the name (`probs`) no longer says what it holds."""
        if site.build is None:
            return None, ""
        fix = self.fix()
        core, renamed = at_source(fix, site.core, site.chain, site.build, site.parts)
        if core is None:
            return None, ""
        new = site.wrap(core) if site.wrap is not None else strip_parens(core)
        fix.replace(site.log, new)  # a wrap decides the parentheses (a difference in a product needs them)
        replaced = site.chain[0].value if renamed else site.log
        for target in site.unread:
            drop_if_unread(fix, target, replaced)  # type: ignore[arg-type]  # a chain's bindings all have values (`FileContext.chain`)
        return fix, renamed_note(renamed)
