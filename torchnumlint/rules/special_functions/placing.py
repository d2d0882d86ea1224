"""Where the fix of a special function written by hand goes: the part TNL106-TNL108 share.

The form may be read through local names (`s = 1 + x` ... `torch.log(s)`, `e = x.exp()` ...
`e - 1`). `rewrite.at_source` decides: rewrite the one assignment when only this use reads it
(the name then holds the new function's value, which the message says), recompute at the use
when what the function reads is unchanged there, or no fix. A line the fix leaves unread is
removed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence, Tuple

import libcst as cst

from torchnumlint.rules.syntax import strip_parens
from torchnumlint.rules.bindings import Binding
from torchnumlint.rules.rewrite import Build, at_source, drop_if_unread
from torchnumlint.rules.uses import reads_of

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FileContext, FixBuilder
    from torchnumlint.rules.base import Rule


def placed(
    rule: "Rule",
    replaced: cst.BaseExpression,
    core: cst.BaseExpression,
    chain: Sequence[Binding],
    build: Build,
    parts: Sequence[cst.BaseExpression],
    holds: str,
) -> Tuple[Optional["FixBuilder"], str]:
    """The fix that replaces `replaced` (the whole hand-written form) by `build`'s function of
    `parts`, `core` being what the form reads through the names `chain` (empty: inline); and the
    message's note: `holds` says what a rewritten name holds after the fix."""
    fix = rule.fix()
    new, renamed = at_source(fix, core, chain, build, parts)
    if new is None:
        return None, ""
    fix.replace(replaced, strip_parens(new))
    if renamed is None:
        for binding in chain:
            target = binding.node.targets[0].target if binding.rewritable else None  # type: ignore[attr-defined]  # `rewritable`: a one-target Assign
            if isinstance(target, cst.Name):
                drop_if_unread(fix, target, replaced)
    note = f" (the fix makes `{renamed}` hold {holds})" if renamed else ""
    return fix, note


def torch_function(fix: "FixBuilder", like: cst.Call, name: str, arg: cst.BaseExpression) -> cst.Call:
    """`torch.<name>(arg)`, spelled as the file spells torch in `like`'s callee (`th.exp(x)` ->
    `th.expm1(x)`), else through the file's own torch alias."""
    func = like.func
    if isinstance(func, cst.Attribute) and fix.ctx.qualname(func.value) == "torch":
        callee: cst.BaseExpression = func.with_changes(attr=cst.Name(name))
    else:
        callee = fix.ref(f"torch.{name}")
    return cst.Call(func=callee, args=[cst.Arg(value=strip_parens(arg))])


def method(receiver: cst.BaseExpression, name: str) -> cst.Call:
    """`receiver.<name>()`, the receiver parenthesised unless it is an atom."""
    receiver = strip_parens(receiver)
    if not isinstance(receiver, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
        receiver = receiver.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(func=cst.Attribute(value=receiver, attr=cst.Name(name)))


def read_only_at(ctx: "FileContext", binding: Binding, node: cst.CSTNode) -> bool:
    """Whether the value `binding` gives its name is read nowhere but inside `node` (`x = x + 1`
    then `x = x.log()`: the value of `x + 1` is read once, whatever `x` holds before and after)."""
    target = binding.node.targets[0].target if binding.rewritable else None  # type: ignore[attr-defined]  # `rewritable`: a one-target Assign
    if not isinstance(target, cst.Name):
        return False
    reads = reads_of(ctx, target)
    return bool(reads) and all(any(n is node for n in path) for path in reads)  # type: ignore[union-attr]  # `reads_of` gives the paths of the reads
