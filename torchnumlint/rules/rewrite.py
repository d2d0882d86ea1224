"""Shared fix builders: rename a call to its sibling op, set a keyword argument, swap a call's
input, negate an expression, clamp a value; and where a fix for a value read through names goes.

They rebuild only the nodes they change, so the user's formatting inside and around the call
survives, and they reuse the call's own spelling (`F.` stays `F.`, a method stays a method).

`at_source` is the one way a rule fixes a value it found behind a name (`p = F.softmax(x, d)`
... `torch.log(p)`): rewrite the one assignment when nothing else reads the name, or recompute
the value at the use when what it is computed from is unchanged there, or give no fix.
`renamed_note` is the message's note for the first; `drop_if_unread` removes a line the fix
leaves unread (`e = x.exp()` of a hand-written softmax).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional, Sequence, Tuple

import libcst as cst

from torchnumlint.rules.syntax import strip_parens
from torchnumlint.rules.bindings import Binding
from torchnumlint.rules.calls import CallMatch, match_call, OPS
from torchnumlint.rules.uses import binding_line, reads_of

if TYPE_CHECKING:  # pragma: no cover
    from torchnumlint.context import FixBuilder

_SPACE = cst.SimpleWhitespace(" ")
_NONE = cst.SimpleWhitespace("")


def renamed_func(fix: "FixBuilder", match: CallMatch, new_op: str) -> cst.BaseExpression:
    """The callee for `new_op` spelled like `match`'s: `F.softmax` -> `F.log_softmax`,
    `x.softmax` -> `x.log_softmax`, `softmax` (imported) -> `log_softmax` (imported if needed)."""
    func = match.call.func
    target = OPS[new_op]
    if match.form == "method":
        assert target.method is not None, new_op
        return func.with_changes(attr=cst.Name(target.method))
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
    new = keyword_arg(name, value)
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    if isinstance(last.comma, cst.Comma):  # trailing comma: the new argument takes the last slot
        closing = last.comma.whitespace_after
        previous: Optional[cst.Arg] = args[-2] if len(args) > 1 else None
        if previous is not None:
            between = previous.comma.whitespace_after if isinstance(previous.comma, cst.Comma) else None
        else:  # the only argument: its line starts after the opening parenthesis
            between = call.whitespace_before_args
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


def as_keyword(arg: cst.Arg, name: str) -> cst.Arg:
    """`arg` passed as `name=...`, spelled as PEP 8 wants it (no spaces around `=`)."""
    return arg.with_changes(keyword=cst.Name(name), equal=cst.AssignEqual(whitespace_before=_NONE, whitespace_after=_NONE))


def keyword_arg(name: str, value: cst.BaseExpression, comma: bool = False) -> cst.Arg:
    """A new argument `name=value`, with `, ` after it if asked."""
    return as_keyword(cst.Arg(value=value, comma=cst.Comma(whitespace_after=_SPACE) if comma else cst.MaybeSentinel.DEFAULT), name)


def with_input(match: CallMatch, new: cst.BaseExpression) -> cst.Call:
    """`match`'s call with its tensor input replaced (the receiver, for the method form)."""
    call = match.call
    if match.form == "method":
        return call.with_changes(func=call.func.with_changes(value=new))
    return call.with_changes(args=[a.with_changes(value=new) if a.value is match.input else a for a in call.args])


def _parenthesised(expr: cst.BaseExpression) -> cst.BaseExpression:
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def negated(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`-expr`, parenthesised unless `expr` is an atom (`-x`, `-f(x)`, `-(a + b)`, `-(x ** 2)`)."""
    expr = strip_parens(expr)
    atoms = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float)
    if not isinstance(expr, atoms):
        expr = _parenthesised(expr)
    return cst.UnaryOperation(operator=cst.Minus(), expression=expr)


def with_clamp(expr: cst.BaseExpression, low: str) -> cst.Call:
    """`expr.clamp_min(low)`, parenthesising `expr` where the attribute would bind tighter; `expr`
    keeps its own parentheses (FixBuilder.replace then adds none around the result)."""
    if not expr.lpar and not isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
        expr = _parenthesised(expr)
    value = cst.Float(low) if "." in low or "e" in low else cst.Integer(low)
    return cst.Call(func=cst.Attribute(value=expr, attr=cst.Name("clamp_min")), args=[cst.Arg(value)])


# ---------------------------------------------------------------------------------------------
# Where a fix goes: the one assignment, the use, or nowhere

Build = Callable[["FixBuilder"], Optional[cst.BaseExpression]]


def at_source(
    fix: "FixBuilder",
    core: cst.BaseExpression,
    chain: Sequence[Binding],
    build: Build,
    parts: Optional[Sequence[cst.BaseExpression]] = None,
) -> Tuple[Optional[cst.BaseExpression], Optional[str]]:
    """What replaces `core` (read at the node being visited) when its source is rewritten by
    `build(fix)`, and the name whose assignment the fix rewrites, if it does. `chain` is the
    names followed from `core` to the source (`ctx.chain(core, names_only=True)`; empty when
    `core` is the source itself):

    - no chain: the rewritten source, in place;
    - `core` is a local name bound by one plain assignment of the source and read only here:
      that assignment is rewritten, and `core` comes back with its name (the name no longer
      holds what it says: `renamed_note`);
    - `parts` (what the source is computed from) given and unchanged since the assignment: the
      source recomputed at the use;
    - otherwise (None, None): no fix."""
    ctx = fix.ctx
    if not chain:
        return build(fix), None
    name = strip_parens(core)
    first = chain[0]
    if isinstance(name, cst.Name) and len(chain) == 1 and first.rewritable and ctx.only_read_here(name):
        new = build(fix)
        if new is None:
            return None, None
        fix.replace(first.value, new)  # type: ignore[arg-type]  # a chain's bindings all have values (`FileContext.chain`)
        return name, name.value
    if parts is None or not ctx.unchanged_since(parts, chain):
        return None, None
    return build(fix), None


def renamed_note(name: Optional[str]) -> str:
    """The message's note for a fix that rewrites `name = softmax(...)` into log space."""
    return f" (the fix makes `{name}` hold log-probabilities)" if name else ""


def to_log_softmax(fix: "FixBuilder", value: cst.BaseExpression) -> Tuple[Optional[cst.BaseExpression], Optional[str]]:
    """`value` (a softmax, inline or through one local name) as `log_softmax`, by `at_source`
    without recomputation; the user's spelling kept. (None, None) when the softmax is not a
    plain call reachable by local names (an attribute's, a module's)."""
    ctx = fix.ctx
    chain = ctx.chain(value, names_only=True)
    source = chain[-1].value if chain else value
    match = match_call(ctx.imports, strip_parens(source), "softmax")  # type: ignore[arg-type]  # a chain's bindings all have values (`FileContext.chain`)
    if match is None:
        return None, None
    return at_source(fix, value, chain, lambda f: renamed_call(f, match, "log_softmax"))


def drop_if_unread(fix: "FixBuilder", target: cst.Name, replaced: cst.CSTNode) -> None:
    """Remove the line `target = ...` when every read of it lies inside `replaced`, the node the
    fix replaces: after the fix nothing reads it."""
    reads = reads_of(fix.ctx, target)
    line = binding_line(fix.ctx, target)
    if reads and line is not None and all(any(n is replaced for n in read) for read in reads):
        fix.remove_line(line)
