"""The softmax or sigmoid behind a value: inline, through every origin, produced by a helper,
a method or a module (`producers.call_kind`), or passed by a caller.

A parameter is the kind its callers in the project pass (`rules/callers.py`): `def entropy(probs)`
called as `entropy(F.softmax(z, -1))` anywhere (the same file or another, through `self.method`,
an instance of a project class, an imported name, a function passed as an argument) has a softmax
`probs`. One caller that passes one is enough: the hazard is reached on that call, which the
finding names (`callers.note_evidence`; the rule's message gets it from `Rule.report`). The
caller's argument is judged in the caller's own file by the same matcher (written out, through
names, a helper returning one), without following that caller's own parameters to its callers
(depth 1). Such a match has form "caller", its `input` the parameter itself (so a question about
the logits, such as TNL101's gradient, goes to the callers too) and no arguments: no fix is ever
built from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Optional, Tuple

import libcst as cst

from torchnumlint.rules.bindings import all_params
from torchnumlint.rules.callers import Caller, callers, carry_evidence, note_evidence
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
    return _noted(ctx, expr, _made_by(ctx, expr, "softmax", callers_too=True))


def sigmoid_call(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[CallMatch]:
    """As `softmax_call`, for a sigmoid: `torch.sigmoid`, `F.sigmoid`, `torch.special.expit`,
    any alias of them, or the method form `x.sigmoid()`."""
    return _noted(ctx, expr, _made_by(ctx, expr, "sigmoid", callers_too=True))


def _noted(ctx: "FileContext", expr: cst.BaseExpression, match: Optional[CallMatch]) -> Optional[CallMatch]:
    """`match`, and where a caller made it (form "caller"), `expr` carries that caller's note."""
    if match is not None and match.form == "caller":
        carry_evidence(ctx, match.input, expr)
    return match


def _made_by(ctx: "FileContext", expr: cst.BaseExpression, op: str, depth: int = 4, callers_too: bool = False) -> Optional[CallMatch]:
    """The first call of `op` that `expr` comes from, when every origin is one: written out, or
    (the last resort, `producers.call_kind`) a helper, method or module instance that returns
    one. A produced one is matched as the call with its first argument as input (form
    "producer", no other arguments: nothing to rebuild it from), or a parameter one of the
    function's callers passes one for (form "caller", `callers_too`). `depth`: the `nan_to_num`s
    followed, one inside another's input at most that many."""
    matches = []
    for origin in ctx.origins(expr):
        kept = finite_kept(ctx.imports, origin) if depth else None
        match = _made_by(ctx, kept, op, depth - 1, callers_too) if kept is not None else match_call(ctx.imports, origin, op)
        if match is None and isinstance(origin, (cst.Call, cst.Name)):  # a name: an element of a tuple returned
            produced = call_kind(ctx, origin)
            if produced is not None and produced.kind == op:
                call = produced.call
                first = call.args[0].value if call.args and not call.args[0].star else call
                match = CallMatch(OPS[op], call, first, "producer")
        if match is None and callers_too and isinstance(origin, cst.Name):
            match = _passed(ctx, origin, op)
        if match is None:
            return None
        matches.append(match)
    return matches[0] if matches else None


def _passed(ctx: "FileContext", name: cst.Name, op: str) -> Optional[CallMatch]:
    """`name`, a parameter of the enclosing function, as the `op` the first of its callers that
    passes one passes (form "caller", the parameter as input); None when none is seen to."""
    function = ctx.enclosing(cst.FunctionDef)
    binding = ctx.binding(name)
    if function is None or binding is None or not isinstance(binding.node, cst.Param):
        return None
    param = binding.node
    if not any(p is param for p in all_params(function.params)) or param.name.value in ("self", "cls"):
        return None  # a parameter of an enclosing function or lambda: not this function's callers
    found: Dict[Tuple[int, str], Optional[Tuple[Caller, CallMatch]]] = ctx.per_file("made_by.passed", lambda c: {})
    key = (id(param), op)
    if key not in found:
        found[key] = _first_passing(ctx, function, param, op)
    if found[key] is None:
        return None
    caller, match = found[key]  # type: ignore[misc]  # not None: tested above
    passed = " ".join(caller.ctx.module.code_for_node(match.call).split())  # one line
    passed = passed if len(passed) <= 40 else passed[:37] + "..."
    note_evidence(ctx, name, f"`{param.name.value}` is a {op}: the call at {caller.where} passes `{passed}`")
    return CallMatch(OPS[op], match.call, name, "caller")


def _first_passing(ctx: "FileContext", function: cst.FunctionDef, param: cst.Param, op: str) -> Optional[Tuple[Caller, CallMatch]]:
    """The first caller (`callers.callers`: depth 1, at most `MAX_ELSEWHERE` in other files) whose
    argument for `param` is an `op`, judged where it is written, and that match. Callers in other
    files are read only where the project's summaries say some call may pass the function an
    `op` (`Summaries.may_be_passed`: most parameters are never passed one, and reading a
    caller's file costs a parse)."""
    elsewhere = ctx.index.summaries.may_be_passed(function.name.value, frozenset({op}))  # other files are read only then
    for caller in callers(ctx, elsewhere):
        arg = caller.argument(function, param)
        if arg is None:
            continue  # the default, or arguments not seen
        with caller.ctx.visiting(caller.path + (arg, arg.value)):
            match = _made_by(caller.ctx, arg.value, op)
        if match is not None:
            return caller, match
    return None
