"""Shared fix builders: rename a call to its sibling op, set a keyword argument.

They rebuild only the nodes they change, so the user's formatting inside and around the call
survives, and they reuse the call's own spelling (`F.` stays `F.`, a method stays a method).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchnumlint.rules.names import CallMatch, OPS

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.engine import FixBuilder

_SPACE = cst.SimpleWhitespace(" ")
_NONE = cst.SimpleWhitespace("")


def renamed_func(fix: "FixBuilder", match: CallMatch, new_op: str) -> cst.BaseExpression:
    """The callee for `new_op` spelled like `match`'s: `F.softmax` -> `F.log_softmax`,
    `x.softmax` -> `x.log_softmax`, `softmax` (imported) -> `log_softmax` (imported if needed)."""
    func = match.call.func
    target = OPS[new_op]
    if match.form == "method":
        assert target.method is not None, new_op
        return func.with_changes(attr=cst.Name(target.method))  # type: ignore[union-attr]
    qual = fix.ctx.qualname(func)
    assert qual is not None
    module = qual.rsplit(".", 1)[0]
    sibling = f"{module}.{new_op}"
    if sibling not in target.functions:
        sibling = sorted(target.functions)[0]
    if isinstance(func, cst.Attribute) and fix.ctx.qualname(func.value) == sibling.rsplit(".", 1)[0]:
        return func.with_changes(attr=cst.Name(sibling.rsplit(".", 1)[1]))
    return fix.ref(sibling)


def renamed_call(fix: "FixBuilder", match: CallMatch, new_op: str) -> cst.Call:
    """`match`'s call with the same arguments, calling `new_op` instead."""
    return match.call.with_changes(func=renamed_func(fix, match, new_op))


def with_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """`call` with keyword `name=value`: replaced in place if present, else appended, keeping the
    call's layout (a trailing comma and one argument per line stay so)."""
    args = list(call.args)
    for i, arg in enumerate(args):
        if arg.keyword is not None and arg.keyword.value == name:
            args[i] = arg.with_changes(value=value)
            return call.with_changes(args=args)
    new = cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(whitespace_before=_NONE, whitespace_after=_NONE),
    )
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    if isinstance(last.comma, cst.Comma):  # trailing comma: the new argument takes the last slot
        closing = last.comma.whitespace_after
        previous: Optional[cst.Arg] = args[-2] if len(args) > 1 else None
        between = previous.comma.whitespace_after if previous is not None and isinstance(previous.comma, cst.Comma) else None
        if isinstance(closing, cst.ParenthesizedWhitespace) and isinstance(between, cst.ParenthesizedWhitespace):
            # one argument per line: the old last line keeps its comment, the new line goes below
            args[-1] = last.with_changes(
                comma=last.comma.with_changes(
                    whitespace_after=closing.with_changes(indent=between.indent, last_line=between.last_line, empty_lines=[])
                )
            )
            new = new.with_changes(
                comma=last.comma.with_changes(whitespace_after=closing.with_changes(first_line=cst.TrailingWhitespace())),
                whitespace_after_arg=last.whitespace_after_arg,
            )
        else:
            new = new.with_changes(comma=last.comma, whitespace_after_arg=last.whitespace_after_arg)
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=_SPACE), whitespace_after_arg=_NONE)
    else:
        new = new.with_changes(whitespace_after_arg=last.whitespace_after_arg)
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=_SPACE), whitespace_after_arg=_NONE)
    args.append(new)
    return call.with_changes(args=args)


def keyword_is(match: CallMatch, name: str, literal: str) -> bool:
    """Whether argument `name` was passed as the literal `literal` (e.g. log_target=True)."""
    value = match.arg(name)
    return isinstance(value, cst.Name) and value.value == literal
